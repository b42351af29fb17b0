"""Our peers' scaling policies, as policy objects the live daemon could run.

Each is modelled on how the peer behaves (see ``docs/simulate.md``), with its own parameters as a
frozen dataclass whose defaults are the peer's. They read the cluster through ``cluster_view``
like elb's own policy, and are pure: the time is the joined state's ``now``.

Besides ``decide`` each offers ``quiet_until(state, history)``: a time before which
``decide`` returns an empty plan as long as the cluster does not change (same jobs, hosts and node
records; only the clock moves, and a busy node's ``last_busy_at`` follows the clock). The simulator
uses it to skip polls that provably cannot act, and asks it before a pass as well: a time after
``now`` says that ``decide`` returns an empty plan now, whatever the plans before it were.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.durations import minutes
from elb.core.frozen import quick_init
from elb.core.model import History, Host, Job, Node, Plan, Removal, Snapshot
from elb.core.policy.placement import Bin, Packing
from elb.core.policy.tally import Noted, WorkerTally
from elb.core.policy.view import ClusterView, ViewCache, Worker, new_names, oldest_wait
from elb.core.state import ClusterState, worker_slots

INF = math.inf


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Limits:
    """What every peer shares with elb's config: cluster bounds, node size and naming."""

    min_nodes: int = 0
    max_nodes: int = 10
    slots_per_node: int | None = None
    master: str = "master"
    node_prefix: str = "node"
    node_digits: int = 3

    @classmethod
    def from_config(cls, cfg: PolicyConfig, cluster: ClusterConfig) -> Limits:
        return cls(
            min_nodes=cfg.min_nodes,
            max_nodes=cfg.max_nodes,
            slots_per_node=cfg.slots_per_node,
            master=cluster.master,
            node_prefix=cluster.node_prefix,
            node_digits=cluster.node_digits,
        )


def _view(cache: ViewCache, limits: Limits, state: ClusterState) -> ClusterView:
    return cache.view(state, limits.master, limits.slots_per_node)


def _names(limits: Limits, state: ClusterState, count: int) -> tuple[str, ...]:
    return new_names(state.snapshot.hosts, state.records, count, limits.node_prefix, limits.node_digits)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the peers read off the workers, computed once per cluster state."""

    idle: tuple[tuple[Worker, float], ...]  # managed idle workers and since when
    free_slots: int  # on ready workers
    busy: int  # workers booting, running a job or holding a reservation
    booting: int


def _slots_per_node(cache: ViewCache, lim: Limits, state: ClusterState) -> int:
    """The limits' slots a node, else the view's (kept while the hosts and records are the same)."""
    return lim.slots_per_node or cache.derived(
        "spn", (state.snapshot.hosts, state.records), lambda: _view(cache, lim, state).slots_per_node
    )


def _facts(cache: ViewCache, view: ClusterView) -> _Facts:
    """``_Facts`` of the view's workers, worked out once per set of workers."""
    return cache.derived("facts", (view.workers,), lambda: _count(view))


def _count(view: ClusterView) -> _Facts:
    idle: list[tuple[Worker, float]] = []
    free = busy = booting = 0
    for w in view.workers:  # each worker's predicates, as ``Worker`` works them out
        busy += w.occupied
        if w.booting:
            booting += 1
            continue
        if w.ready and w.facts is not None:
            free += w.facts.free
        if w.busy:
            continue
        since = w.idle_since
        if since is not None:
            idle.append((w, since))
    return _Facts(tuple(idle), free, busy, booting)


# --------------------------------------------------------------------------------------------
# StarCluster


@dataclass(frozen=True, slots=True)
class StarclusterParams:
    """The original StarCluster SGE balancer's defaults."""

    wait_time: float = 900.0  # the oldest queued job must have waited longer (at least 300 s)
    add_nodes_per_iteration: int = 1
    stabilization_time: float = 180.0  # no change within this long of the last one
    billing_period: float = 3600.0
    kill_after: float = 2700.0  # idle nodes go only when uptime mod period >= this
    block_while_booting: bool = True  # a pass is skipped while a node is not up yet


@quick_init
@dataclass(frozen=True, slots=True)
class _StarReads:
    """What StarCluster's rule reads of the cluster: from the view, or from the tally (the same)."""

    size: int
    booting: int
    queued: int  # waiting job entries
    total: int  # ``count_total_slots``
    spn: int
    oldest_wait: Callable[[float], float]  # seconds the oldest waiting job has waited at a time
    # The managed idle workers and their launch times, by name: listed when asked (the rule reads
    # them only while no job is queued).
    idle: Callable[[], Sequence[tuple[str, float]]]
    names: Callable[[int], tuple[str, ...]]  # names for new nodes


@dataclass(frozen=True, slots=True)
class StarclusterPolicy:
    """StarCluster's SGE balancer as its code behaves. Each pass (skipped while a node is still
    coming up): with queued jobs and no slot at all, add one node at once; with more queued jobs
    (entries, as ``qstat`` lists them) than slots in the cluster, once it is ``stabilization_time``
    since the last change and the oldest queued job has waited over ``wait_time``, add
    ``queued / slots per node`` nodes, at most ``add_nodes_per_iteration``. With nothing queued
    and the cluster stable, remove idle nodes that are ``kill_after`` into their hour.

    The master is an exec host, as in a StarCluster cluster: its slots count among the cluster's
    and it runs jobs (``master_exec``: the simulator gives it a node that is never billed).

    Like Slurm's peer it reads the cluster from a ``WorkerTally`` brought up to date by what
    changed (``incremental``), so a decision does not walk every node and waiting job; without it,
    from the full view, which gives the same plans."""

    limits: Limits = field(default_factory=Limits)
    params: StarclusterParams = field(default_factory=StarclusterParams)
    name: str = "starcluster"
    incremental: bool = True
    cache: ViewCache = field(default_factory=ViewCache, compare=False, repr=False)
    tally: WorkerTally = field(default_factory=WorkerTally, compare=False, repr=False)

    @classmethod
    def from_config(cls, cfg: PolicyConfig, cluster: ClusterConfig) -> StarclusterPolicy:
        return cls(Limits.from_config(cfg, cluster))

    def _stabilizing(self, history: History, now: float) -> float | None:
        last = history.last_change_at
        if last is None:
            return None
        # compared with the end itself: ``now - last`` at that end may round a hair under the time
        end = last + self.params.stabilization_time
        return end if now < end else None

    def _wait(self) -> float:
        return max(300.0, self.params.wait_time)

    @property
    def master_exec(self) -> bool:
        """StarCluster's master is an exec host too."""
        return True

    def _total_slots(self, view: ClusterView, snapshot: Snapshot) -> int:
        """``count_total_slots``: the slots of the execution hosts SGE reports, the master's too."""
        workers = sum(w.facts.total for w in view.workers if w.facts is not None and w.facts.up)
        master = sum(h.slots_total for h in snapshot.hosts if h.name == self.limits.master and h.up)
        return workers + master

    def _reads(self, state: ClusterState) -> _StarReads:
        lim, tally = self.limits, self.tally
        snapshot, nodes = state.snapshot, state.records
        if self.incremental and tally.update(snapshot, nodes, lim.master, lim.node_prefix, state.down):
            return self._tally_reads(_slots_per_node(self.cache, lim, state))
        view = _view(self.cache, lim, state)
        facts = _facts(self.cache, view)

        def idle() -> list[tuple[str, float]]:
            out = []
            for w, _ in facts.idle:
                assert w.node is not None
                out.append((w.name, w.node.launched_at))
            return out

        return _StarReads(
            view.size,
            facts.booting,
            len(view.pending),
            self._total_slots(view, snapshot),
            view.slots_per_node,
            lambda at: oldest_wait(view.pending, at),
            idle,
            lambda n: _names(lim, state, n),
        )

    def _tally_reads(self, spn: int) -> _StarReads:
        """The reads off the tally as it stands (``spn``: the slots a node)."""
        lim, tally = self.limits, self.tally
        return _StarReads(
            tally.size,
            len(tally.booting),
            tally.waiting,
            tally.total_slots(),
            spn,
            tally.oldest_wait,
            lambda: [(name, tally.launched_at(name)) for name in tally.idle],
            lambda n: tally.new_names(n, lim.node_prefix, lim.node_digits),
        )

    def decide(self, state: ClusterState, history: History) -> Plan:  # noqa: PLR0911
        now = state.now
        p, lim = self.params, self.limits
        r = self._reads(state)
        if r.size < lim.min_nodes:
            n = lim.min_nodes - r.size
            return Plan(
                add=n,
                add_names=r.names(n),
                add_reason=f"{r.size} nodes < min_nodes {lim.min_nodes}: adding {_plural(n, 'node')}",
            )
        if p.block_while_booting and r.booting:
            return Plan(reason=f"waiting for {_plural(r.booting, 'node')} to come up")
        queued = r.queued
        if queued:
            total = r.total
            head = f"{_plural(queued, 'job')} queued, {total} slots"
            if r.size >= lim.max_nodes:
                return Plan(reason=f"{head}, but at max_nodes ({r.size}/{lim.max_nodes})")
            room = lim.max_nodes - r.size
            if total == 0:
                return Plan(add=1, add_names=r.names(1), add_reason=f"{head}: no slot, adding one")
            if queued <= total:
                return Plan(reason=f"{head}: no more jobs queued than slots")
            if self._stabilizing(history, now) is not None:
                return Plan(reason=f"{head}: stabilizing after the last change")
            waited = r.oldest_wait(now)
            if waited <= self._wait():
                return Plan(reason=f"{head}, oldest {minutes(waited)} <= {minutes(self._wait())}")
            n = min(p.add_nodes_per_iteration, max(1, queued // r.spn), room)
            return Plan(
                add=n,
                add_names=r.names(n),
                add_reason=f"{head}, oldest {minutes(waited)} > {minutes(self._wait())}",
            )
        if self._stabilizing(history, now) is not None:
            assert history.last_change_at is not None
            return Plan(reason=f"stabilizing: last change {minutes(now - history.last_change_at)} ago")
        removals = []
        for name, launched_at in r.idle():
            into = (now - launched_at) % p.billing_period
            if into >= p.kill_after:
                removals.append(Removal(name, f"no job queued; idle, {minutes(into)} into its hour"))
        chosen = tuple(removals[: max(0, r.size - lim.min_nodes)])
        if not chosen:
            return Plan(reason="no job queued; no idle node in the last part of its hour")
        return Plan(remove=chosen)

    def quiet_until(self, state: ClusterState, history: History) -> float:
        return self._quiet(lambda at: self._reads(state.at(at)), state.now, history)

    def quiet_until_noted(
        self, jobs: Noted[Job], hosts: Noted[Host], nodes: Noted[Node], now: float, history: History
    ) -> float | None:
        """``quiet_until`` on the state that the last one read revised by these changes
        (``WorkerTally.advance``), with no node down; None: the tally does not read it (it is
        then empty, and ``quiet_until`` is to be asked with the whole state)."""
        lim = self.limits
        if not (self.incremental and lim.slots_per_node):  # else the view gives the slots a node
            return None
        if not self.tally.advance(jobs, hosts, nodes, lim.master, lim.node_prefix):
            return None
        r = self._tally_reads(lim.slots_per_node)
        return self._quiet(lambda _at: r, now, history)

    def _quiet(self, reads: Callable[[float], _StarReads], now: float, history: History) -> float:  # noqa: PLR0911
        """``quiet_until`` at ``now`` on the reads of the cluster at a time (the same cluster)."""
        p, lim = self.params, self.limits
        r = reads(now)
        if r.size < lim.min_nodes:
            return now
        if p.block_while_booting and r.booting:
            return INF  # a node coming up is an event
        stab = self._stabilizing(history, now)
        if r.queued:
            total = r.total
            if r.size >= lim.max_nodes or (total and r.queued <= total):
                return INF
            if total == 0:
                return now
            if stab is not None:
                return self._quiet(reads, stab, history)
            return now + max(0.0, self._wait() - r.oldest_wait(now))
        if stab is not None:
            return self._quiet(reads, stab, history)
        if r.size <= lim.min_nodes:
            return INF
        nxt = INF
        for _, launched_at in r.idle():
            into = (now - launched_at) % p.billing_period
            nxt = min(nxt, now if into >= p.kill_after else now + (p.kill_after - into))
        return nxt


# --------------------------------------------------------------------------------------------
# AWS ParallelCluster (jobwatcher + nodewatcher)


@dataclass(frozen=True, slots=True)
class ParallelclusterParams:
    """ParallelCluster's SGE jobwatcher/nodewatcher defaults."""

    idle_time: float = 600.0  # scaledown_idletime: 10 minutes


@quick_init
@dataclass(frozen=True, slots=True)
class _PcReads:
    """What ParallelCluster's rule reads of the cluster: from the view, or from the tally (the same)."""

    size: int
    pending: int  # waiting job entries
    pending_slots: int
    spn: int
    busy: int  # workers booting, running a job or holding a reservation
    # The managed idle workers, (since when, name), by idle since, then name: listed when asked
    # (the rule reads them only while nothing waits), those idle longest first.
    idle: Callable[[], Sequence[tuple[float, str]]]
    names: Callable[[int], tuple[str, ...]]  # names for new nodes


@dataclass(frozen=True, slots=True)
class ParallelclusterPolicy:
    """ParallelCluster's jobwatcher: desired = busy nodes (booting ones count as busy) +
    ceil(pending slots / slots per node), capped at max; nodewatcher: a node idle
    ``idle_time`` while nothing is pending is terminated.

    Counting booting nodes as busy while their demand is still pending makes it ask for the same
    demand again every pass until they boot: this is how one of its versions really behaved.

    Like Slurm's peer it reads the cluster from a ``WorkerTally`` brought up to date by what
    changed (``incremental``); without it, from the full view, which gives the same plans.
    """

    limits: Limits = field(default_factory=Limits)
    params: ParallelclusterParams = field(default_factory=ParallelclusterParams)
    name: str = "parallelcluster"
    incremental: bool = True
    cache: ViewCache = field(default_factory=ViewCache, compare=False, repr=False)
    tally: WorkerTally = field(default_factory=WorkerTally, compare=False, repr=False)

    @classmethod
    def from_config(cls, cfg: PolicyConfig, cluster: ClusterConfig) -> ParallelclusterPolicy:
        return cls(Limits.from_config(cfg, cluster))

    def _reads(self, state: ClusterState) -> _PcReads:
        lim, tally = self.limits, self.tally
        snapshot, nodes = state.snapshot, state.records
        if self.incremental and tally.update(snapshot, nodes, lim.master, lim.node_prefix, state.down):
            spn = _slots_per_node(self.cache, lim, state)
            return _PcReads(
                tally.size,
                tally.waiting,
                tally.pending_slots,
                spn,
                tally.busy,
                lambda: tally.idle_by_since,
                lambda n: tally.new_names(n, lim.node_prefix, lim.node_digits),
            )
        view = _view(self.cache, lim, state)
        facts = _facts(self.cache, view)
        return _PcReads(
            view.size,
            len(view.pending),
            view.pending_slots,
            view.slots_per_node,
            facts.busy,
            lambda: sorted((since, w.name) for w, since in facts.idle),
            lambda n: _names(lim, state, n),
        )

    def _desired(self, r: _PcReads) -> tuple[int, int]:
        need = math.ceil(r.pending_slots / r.spn)
        return need, min(self.limits.max_nodes, r.busy + need)

    def decide(self, state: ClusterState, history: History) -> Plan:
        now = state.now
        lim = self.limits
        r = self._reads(state)
        if r.size < lim.min_nodes:
            n = lim.min_nodes - r.size
            return Plan(
                add=n,
                add_names=r.names(n),
                add_reason=f"{r.size} nodes < min_nodes {lim.min_nodes}: adding {_plural(n, 'node')}",
            )
        if r.pending:
            need, desired = self._desired(r)
            if desired > r.size:
                n = desired - r.size
                return Plan(
                    add=n,
                    add_names=r.names(n),
                    add_reason=(
                        f"desired {r.busy} busy + {need} for {r.pending_slots} pending slots "
                        f"= {desired} > {r.size} nodes"
                    ),
                )
            return Plan(reason=f"desired {desired} <= {r.size} nodes")
        # Those idle ``idle_time`` or more come first by idle since; removed in name order.
        due: list[tuple[str, float]] = []
        for since, name in r.idle():
            if now - since < self.params.idle_time:
                break
            due.append((name, since))
        due.sort()
        removals = [Removal(name, f"nothing pending; idle {minutes(now - since)}") for name, since in due]
        chosen = tuple(removals[: max(0, r.size - lim.min_nodes)])
        if not chosen:
            return Plan(reason="nothing pending; no node idle long enough")
        return Plan(remove=chosen)

    def quiet_until(self, state: ClusterState, history: History) -> float:
        now = state.now
        lim = self.limits
        r = self._reads(state)
        if r.size < lim.min_nodes:
            return now
        if r.pending:
            return now if self._desired(r)[1] > r.size else INF
        if r.size <= lim.min_nodes:
            return INF
        idle = r.idle()
        return max(now, idle[0][0] + self.params.idle_time) if idle else INF  # the one idle longest


# --------------------------------------------------------------------------------------------
# Slurm power saving


@dataclass(frozen=True, slots=True)
class SlurmParams:
    """Slurm's power-saving defaults."""

    suspend_time: float = 300.0  # SuspendTime: an idle node is powered down after this long
    power_save_interval: float = 10.0  # slurmctld's power-saving pass runs this often (its default)


@quick_init
@dataclass(frozen=True, slots=True)
class _Fit:
    assigned: frozenset[str]  # existing workers that a waiting job would get
    new_nodes: int  # nodes to power up for the jobs that fit nowhere
    complete: bool = True  # False: counting stopped past the room under max_nodes (a lower bound)


_NO_FIT = _Fit(frozenset(), 0)


def _fit(packing: Packing, pending: Sequence[Job]) -> _Fit:
    """Place the waiting jobs, oldest first, on ``packing``'s bins (ready then booting nodes),
    then on new ones (up to just past its limit), by the placement every policy shares
    (``elb.core.policy.placement``)."""
    for job in pending:
        packing.place(job.slots, job.tasks)
    return _Fit(frozenset(packing.assigned), packing.new_nodes, packing.complete)


class _KeptFit:
    """Slurm's last fit on a tally's bins (``WorkerTally.name_bins``), carried on when the next
    one asks for more of the same: its bins unchanged since (the same index, and no read of it
    changed it), the same limit, and the waiting jobs it placed the first ones of the new queue,
    in order (jobs submitted since, and nothing started). Placing the jobs after them on its
    packing is then what a fresh packing of the whole queue does (a packing places one job after
    another, reading its bins alone), without placing the first ones again."""

    def __init__(self) -> None:
        self._packing: Packing | None = None
        self._jobs: Sequence[Job] = ()  # the jobs placed on it, in order
        self._changes = -1  # ``WorkerTally.name_bins_changes`` at its read
        self._last = _NO_FIT  # what it came to

    def fit(self, tally: WorkerTally, spn: int, limit: int, pending: Sequence[Job]) -> _Fit:
        """``_fit`` of ``pending`` on a packing of the tally's bins of ``spn``, new nodes counted
        up to just past ``limit``."""
        index = tally.name_bins(spn)
        changes = tally.name_bins_changes
        packing, done = self._packing, self._jobs
        if (
            packing is None
            or packing.ready is not index
            or changes != self._changes
            or packing.limit != limit
            or len(pending) < len(done)
            or not all(map(operator.is_, done, pending))
        ):
            packing, done = Packing([], spn, limit, ready=index), ()
        elif len(pending) == len(done):
            return self._last
        fit = _fit(packing, pending[len(done) :])
        self._packing, self._jobs, self._changes, self._last = packing, pending, changes, fit
        return fit


@quick_init
@dataclass(frozen=True, slots=True)
class _SlurmReads:
    """What Slurm's rule reads of the cluster: from the view, or from the tally (the same)."""

    size: int
    pending: Sequence[Job]
    spn: int
    idle: Sequence[tuple[float, str]]  # managed idle workers, (since when, name), by idle since, then name
    # ``_fit`` of the waiting jobs on a packing, new nodes counted up to just past the limit given,
    # of the ready workers' free slots, then the booting workers', each by name (``_bins``).
    fit: Callable[[int], _Fit]
    names: Callable[[int], tuple[str, ...]]  # names for new nodes


def _bins(ready: Iterable[tuple[str, int, int]], booting: Iterable[tuple[str, int]]) -> list[Bin]:
    """The bins Slurm's rule places waiting jobs on: the ready workers (name, free, total) with a
    free slot (a full one takes no job), then the booting ones (name, slots: ``worker_slots`` of
    the record), each in name order."""
    bins = [Bin(name, free, total) for name, free, total in ready if free > 0]
    bins.extend(Bin(name, s, s) for name, s in booting)
    return bins


def _view_bins(view: ClusterView) -> list[Bin]:
    """``_bins`` of the view's workers."""
    spn = view.slots_per_node
    return _bins(
        ((w.name, w.facts.free, w.facts.total) for w in view.workers if w.ready and w.facts is not None),
        ((w.name, worker_slots(w.node, otherwise=spn)) for w in view.workers if w.booting and w.node is not None),
    )


@dataclass(frozen=True, slots=True)
class SlurmPolicy:
    """Slurm's power saving: power up nodes for exactly the waiting jobs that fit on no ready or
    booting node; power down a node idle ``suspend_time``. A ready node that a waiting job has been
    given (a wide job whose other nodes still boot) belongs to that job's allocation: not idle.

    What it reads of the cluster comes from a ``WorkerTally`` brought up to date by what changed
    since its last call (``incremental``), so a decision's work does not grow with the cluster;
    without it, from the full view (``cluster_view``), which gives the same plans."""

    limits: Limits = field(default_factory=Limits)
    params: SlurmParams = field(default_factory=SlurmParams)
    name: str = "slurm"
    incremental: bool = True
    cache: ViewCache = field(default_factory=ViewCache, compare=False, repr=False)
    tally: WorkerTally = field(default_factory=WorkerTally, compare=False, repr=False)
    fits: _KeptFit = field(default_factory=_KeptFit, compare=False, repr=False)  # its fits on the tally's bins

    @classmethod
    def from_config(cls, cfg: PolicyConfig, cluster: ClusterConfig) -> SlurmPolicy:
        return cls(Limits.from_config(cfg, cluster))

    @property
    def interval(self) -> float:
        """How often Slurm itself decides (``power_save_interval``): the simulator polls it this
        often, not at the balancer's poll."""
        return self.params.power_save_interval

    def _reads(self, state: ClusterState) -> _SlurmReads:
        lim, tally = self.limits, self.tally
        snapshot, nodes, now = state.snapshot, state.records, state.now
        if self.incremental and tally.update(snapshot, nodes, lim.master, lim.node_prefix, state.down):
            configured = lim.slots_per_node
            spn = configured or self.cache.derived(
                "spn",
                (snapshot.hosts, nodes),
                lambda: _view(self.cache, lim, state).slots_per_node,
            )
            pending = tally.pending(snapshot, now)
            return _SlurmReads(
                tally.size,
                pending,
                spn,
                tally.idle_by_since,
                lambda limit: self.fits.fit(tally, spn, limit, pending),
                lambda n: tally.new_names(n, lim.node_prefix, lim.node_digits),
            )
        view = _view(self.cache, lim, state)
        return _SlurmReads(
            view.size,
            view.pending,
            view.slots_per_node,
            sorted((since, w.name) for w, since in _facts(self.cache, view).idle),
            lambda limit: _fit(Packing(_view_bins(view), view.slots_per_node, limit), view.pending),
            lambda n: _names(lim, state, n),
        )

    def _fit(self, reads: _SlurmReads, state: ClusterState) -> _Fit:
        """The waiting jobs placed (``_fit``), worked out once for the very same inputs and time
        (``quiet_until`` after an empty plan asks for the fit ``decide`` made)."""
        if not reads.pending:
            return _NO_FIT
        snapshot = state.snapshot
        return self.cache.derived(
            "fit",
            (snapshot.jobs, snapshot.hosts, state.records, state.now),
            lambda: reads.fit(max(0, self.limits.max_nodes - reads.size)),
        )

    def _idle_due(self, reads: _SlurmReads, fit: _Fit, now: float) -> tuple[list[Removal], float]:
        """The idle workers due to be powered down at ``now``, by name, and when the next one is due
        (inf: none). By idle since, those due come first; the first not due is the next."""
        due: list[tuple[str, float]] = []
        nxt = INF
        for since, name in reads.idle:
            if name in fit.assigned:
                continue
            at = since + self.params.suspend_time
            if now < at:
                nxt = at
                break
            due.append((name, since))
        due.sort()
        return [Removal(name, f"idle {minutes(now - since)} >= SuspendTime") for name, since in due], nxt

    def _first_due(self, reads: _SlurmReads, fit: _Fit, now: float) -> float:
        """``now`` when an idle worker is due to be powered down (``_idle_due`` finds one), else
        when the next one is (inf: none): the first idle worker, by idle since, that no waiting
        job was given tells, as it is the first ``_idle_due`` takes or stops at."""
        assigned = fit.assigned
        for since, name in reads.idle:
            if name not in assigned:
                return max(now, since + self.params.suspend_time)
        return INF

    def _keep_min(self, reads: _SlurmReads, removals: list[Removal]) -> tuple[Removal, ...]:
        return tuple(removals[: max(0, reads.size - self.limits.min_nodes)])

    def decide(self, state: ClusterState, history: History) -> Plan:
        now = state.now
        lim = self.limits
        reads = self._reads(state)
        size = reads.size
        if size < lim.min_nodes:
            n = lim.min_nodes - size
            return Plan(
                add=n,
                add_names=reads.names(n),
                add_reason=f"{size} nodes < min_nodes {lim.min_nodes}: adding {_plural(n, 'node')}",
            )
        fit = self._fit(reads, state)
        add = min(fit.new_nodes, max(0, lim.max_nodes - size))
        removals, _ = self._idle_due(reads, fit, now)
        chosen = self._keep_min(reads, removals)
        if not add and not chosen:
            why = f"{_plural(len(reads.pending), 'job')} waiting, all placed" if reads.pending else "idle"
            if fit.new_nodes and not add:
                wanted = f"{fit.new_nodes}" if fit.complete else f"at least {fit.new_nodes}"
                why = f"{wanted} more nodes wanted but at max_nodes ({size}/{lim.max_nodes})"
            return Plan(reason=f"{why}; no node idle {minutes(self.params.suspend_time)}")
        names = reads.names(add) if add else ()
        return Plan(
            add=add,
            add_names=names,
            add_reason=f"{_plural(add, 'node')} for waiting jobs that fit on no ready or booting node",
            remove=chosen,
        )

    def quiet_until(self, state: ClusterState, history: History) -> float:
        now = state.now
        lim = self.limits
        reads = self._reads(state)
        if reads.size < lim.min_nodes:
            return now
        fit = self._fit(reads, state)
        if fit.new_nodes and reads.size < lim.max_nodes:
            return now
        if reads.size <= lim.min_nodes:
            return INF
        return self._first_due(reads, fit, now)


# --------------------------------------------------------------------------------------------
# Static


@dataclass(frozen=True, slots=True)
class StaticParams:
    nodes: int | None = None  # None: max_nodes


@dataclass(frozen=True, slots=True)
class StaticPolicy:
    """A fixed cluster of ``nodes`` workers: started at once, lost ones replaced, never shrunk."""

    limits: Limits = field(default_factory=Limits)
    params: StaticParams = field(default_factory=StaticParams)
    name: str = "static"
    # Its plans depend on its nodes only: a job's start or end never changes them (the
    # simulator's fast-forward relies on it).
    watches_jobs: ClassVar[bool] = False
    cache: ViewCache = field(default_factory=ViewCache, compare=False, repr=False)

    @classmethod
    def from_config(cls, cfg: PolicyConfig, cluster: ClusterConfig) -> StaticPolicy:
        return cls(Limits.from_config(cfg, cluster))

    @property
    def initial_nodes(self) -> int:
        return self.params.nodes if self.params.nodes is not None else self.limits.max_nodes

    def _size(self, state: ClusterState) -> int:
        """``ClusterView.size`` without building the view: exec hosts and alive nodes, not the master."""

        def count() -> int:
            names = state.hosts.keys() | {n.name for n in state.records if n.state.alive}
            names.discard(self.limits.master)
            return len(names)

        return self.cache.derived("size", (state.snapshot.hosts, state.records), count)

    def decide(self, state: ClusterState, history: History) -> Plan:
        size = self._size(state)
        want = self.initial_nodes
        if size < want:
            n = want - size
            return Plan(
                add=n,
                add_names=_names(self.limits, state, n),
                add_reason=f"static cluster of {want}: {size} nodes, adding {n}",
            )
        return Plan(reason=f"static cluster of {want} nodes")

    def quiet_until(self, state: ClusterState, history: History) -> float:
        return state.now if self._size(state) < self.initial_nodes else INF
