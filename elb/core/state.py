"""One joined view of the cluster per pass: the journal's node records, the cloud's instances and
the scheduler's snapshot, joined once into managed nodes that carry every predicate a pass asks.

Pure: built from values and ``now``. The instance state is the core's (``InstanceState``): each
cloud's adapter translates its own words into it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from elb.core.frozen import cached, quick_init, replacer
from elb.core.interfaces import Instance, InstanceState, InstanceWord
from elb.core.model import Host, Job, JobPhase, Node, NodeState, Snapshot

# Records of nodes that are gone for good: kept in the journal, not part of the cluster.
GONE = frozenset({NodeState.TERMINATED, NodeState.FAILED})
_RUNNING = JobPhase.RUNNING  # a job filed under its host (``started_host``)


def seen(records: Sequence[Node], now: float, *, busy: Collection[str], up: Collection[str]) -> tuple[Node, ...]:
    """``records`` with what ``Journal.mark_seen(now, busy=..., up=...)`` writes: the pass saw a
    job or a reservation on ``busy`` and the scheduler reached ``up``. A pass reads the journal's records
    once and applies what it saw to them, instead of reading them again."""
    busy, up = set(busy), set(up)
    out = []
    for r in records:
        name = r.name
        was_busy, was_up = name in busy, name in up
        if was_busy or was_up:
            r = _seen_record(r, now if was_busy else r.last_busy_at, now if was_up else r.last_up_at)  # noqa: PLW2901
        out.append(r)
    return tuple(out)


# ``dataclasses.replace`` of a record's two sightings, without its checks: a pass does it for every node.
_seen_record = replacer(Node, "last_busy_at", "last_up_at")


def serves(record: Node | None, host_up: bool) -> bool:
    """Ready to take jobs: the scheduler reaches its host and elb's record, if it has one (an exec host elb
    does not manage has none), says READY. The policies' "ready" (``elb.core.policy.view.Worker``)."""
    return host_up and (record is None or record.state is NodeState.READY)


def is_busy(has_jobs: bool, host_busy: bool) -> bool:
    """Busy: a job filed under the node (``started_host``), or a slot used or reserved on its
    host. The one rule; ``ManagedNode.busy``, the policies' workers and the peers' tally apply it
    to what each has at hand."""
    return has_jobs or host_busy


def busy_hosts(snapshot: Snapshot) -> set[str]:
    """The hosts of a snapshot that are busy (``is_busy``): what a pass remembers as seen busy."""
    busy = {h.name for h in snapshot.hosts if h.busy}
    busy.update(jobs_started_on(snapshot.jobs))  # ``started_host``'s hosts
    return busy


def worker_slots(record: Node | None, host: Host | None = None, *, otherwise: int) -> int:
    """A worker's slots: its host's as the scheduler counts them (``Host.slots_total``, every queue
    instance's) when it shows any; else its record's (what it was launched with); else ``otherwise``,
    the caller's size of a node it knows nothing of (the policy's ``slots_per_node``, or 1). A booting
    worker is counted by its record alone (its callers pass no host: one the scheduler shows already
    serves nothing yet)."""
    if host is not None:
        total = host.slots_total
        if total:
            return total
    if record is not None and record.slots:
        return record.slots
    return otherwise


def idle_since(record: Node | None, ready: bool, busy: bool) -> float | None:
    """Since when a ready node that runs nothing has been idle: its record's ``quiet_since``;
    None when it is busy (a job or a reservation on it), not ready, or not elb's (no record)."""
    return record.quiet_since if ready and not busy and record is not None else None


# Pending or running. Any other state but gone (stopping, stopped: a spot stop, a crash, an admin,
# the warm pool) is a machine that still exists, and costs (its disks), and can start again.
LIVE = frozenset({InstanceState.PENDING, InstanceState.RUNNING})
# The states of an instance that exists but runs nothing: a ready node's machine stopped outside
# elb (elb stops only the warm pool's, whose records say so).
HALTED = frozenset({InstanceState.STOPPING, InstanceState.STOPPED})
NO_NAMES: frozenset[str] = frozenset()  # ``ClusterState.down`` with none (one object: a cache compares it by identity)


_STATES: dict[str, InstanceState] = {s.value: s for s in InstanceState}  # a member is found by itself too


def instance_state(word: InstanceState | InstanceWord) -> InstanceState:
    """An instance's state (``Instance.state``: a member or its word) as the enum's member (found
    in a dict: the enum's own call is several times slower, and a pass asks it of every node)."""
    state = _STATES.get(word)
    return state if state is not None else InstanceState(word)  # (an unknown word: the enum's error)


@quick_init
@dataclass(frozen=True, slots=True)
class ManagedNode:
    """A node elb manages, as the journal, the cloud and the scheduler show it at ``now``."""

    record: Node
    instance: Instance | None  # its instance in any state but gone
    host: Host | None  # the scheduler's host of that name
    jobs: tuple[Job, ...]  # what the scheduler lists on it
    in_flight: bool  # an operation of elb runs on it
    now: float

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def instance_state(self) -> InstanceState:
        return InstanceState.GONE if self.instance is None else instance_state(self.instance.state)

    @property
    def booting(self) -> bool:
        return self.record.state.booting

    @property
    def ready(self) -> bool:
        return self.record.state is NodeState.READY

    @property
    def serves(self) -> bool:
        """Takes jobs: the scheduler reaches it and its record says READY (``serves``)."""
        return serves(self.record, self.reachable)

    @property
    def draining(self) -> bool:
        return self.record.state in (NodeState.DRAINING, NodeState.DEREGISTERED)

    @property
    def busy(self) -> bool:
        """A job or a reservation on it (``is_busy``)."""
        return is_busy(bool(self.jobs), self.host is not None and self.host.busy)

    @property
    def reachable(self) -> bool:
        return self.host is not None and self.host.up

    @property
    def idle_since(self) -> float | None:
        """Since when no job or reservation was seen on a node that serves (None: busy, or not serving)."""
        return idle_since(self.record, self.serves, self.busy)

    def lost_for(self, watched_since: float | None = None) -> float:
        """Seconds a ready node has been out of the scheduler's reach (0 while the scheduler reaches it), counted from
        the last pass that saw it up and never from before ``watched_since``."""
        if self.reachable:
            return 0.0
        seen = [t for t in (self.record.last_up_at, self.record.ready_at, self.record.launched_at, watched_since)]
        return max(0.0, self.now - max(t for t in seen if t is not None))

    @property
    def steady(self) -> bool:
        """Ready, its instance running, and the scheduler reaches it: nothing to repair, whatever
        the time (``elb.core.reconcile``'s rules plan nothing for such a node)."""
        return is_steady(self.record, self.instance, self.host)

    @property
    def instance_gone(self) -> bool:
        return self.instance_state is InstanceState.GONE

    @property
    def down(self) -> bool:
        """Ready by its record, but the cloud lists its instance as stopping or stopped (``is_down``)."""
        return is_down(self.record, self.instance)

    @property
    def instance_live(self) -> bool:
        """Its instance is pending or running."""
        return self.instance_state in LIVE


def is_steady(record: Node, instance: Instance | None, host: Host | None) -> bool:
    """``ManagedNode.steady`` of a node's record, instance and host: its record ready, its
    instance pending or running, and the scheduler reaching its host."""
    return (
        record.state is NodeState.READY
        and instance is not None
        and instance_state(instance.state) in LIVE
        and host is not None
        and host.up
    )


def is_down(record: Node, instance: Instance | None) -> bool:
    """A ready node whose machine the cloud lists as stopping or stopped: it runs nothing, whatever
    the scheduler still lists there, and takes no place under ``max_nodes`` while the scheduler
    lets go of its jobs (``ClusterState.down``). Only a listed state is taken as evidence: an
    instance missing from a listing is not down (a listing may be hollow; EC2's terminated ones
    are ``gone``), and keeps its place."""
    return record.state is NodeState.READY and instance is not None and instance_state(instance.state) in HALTED


def worker_names(hosts: Collection[str], alive: Collection[str], master: str, down: Collection[str]) -> set[str]:
    """The workers' names, whose count is the cluster's size under ``max_nodes``: the scheduler's
    hosts and the alive records, but the master and the nodes that are down
    (``is_down``: a machine that runs nothing takes no place; its name stays in
    use, ``elb.core.policy.view.new_names`` reads every record)."""
    names = set(hosts) | set(alive)
    names.discard(master)
    return names.difference(down) if down else names


def started_host(j: Job) -> str | None:
    """The host a job is filed under: an entry the scheduler lists with a queue instance there,
    started. What a node's ``jobs`` are, everywhere a pass or a policy asks."""
    if j.queue is None or j.phase is not _RUNNING:  # ``Job.host``'s first test, without its call
        return None
    return j.host


def started_on(jobs: Sequence[Job]) -> dict[str, list[Job]]:
    """The jobs started on each host: ``started_host``'s rule, written out in the loop (it runs
    over every job of a snapshot at each view a policy builds; a test holds the two equal). The
    running entries are picked out first, by one comprehension that compares each phase by
    identity (most of a large queue is waiting): it costs less than ``compress`` over ``map``s of
    an ``attrgetter`` and a ``partial`` (two calls a job), as ``Snapshot.pending`` finds."""
    out: dict[str, list[Job]] = {}
    for j in [j for j in jobs if j.phase is _RUNNING]:
        if j.queue is None:
            continue
        h = j.host
        if h is not None:
            out.setdefault(h, []).append(j)
    return out


class _LastStarted:
    """``jobs_started_on``'s answer for the last tuple of jobs it was asked about, kept with that
    tuple (so its identity stays its own): a pass asks it of one snapshot's jobs for its busy
    hosts and at each join of the snapshot (the repairs', the scaling's), each a scan of every
    job. One pair, replaced whole."""

    pair: tuple[tuple[Job, ...], Mapping[str, tuple[Job, ...]]] | None = None


_LAST_STARTED = _LastStarted()


def jobs_started_on(jobs: tuple[Job, ...]) -> Mapping[str, tuple[Job, ...]]:
    """``started_on`` with each host's jobs as a tuple, read only, worked out once for the very
    same tuple of jobs asked about again (only a tuple: a list may change meanwhile)."""
    pair = _LAST_STARTED.pair
    if pair is not None and pair[0] is jobs:
        return pair[1]
    on = _read_only(started_on(jobs))
    if type(jobs) is tuple:
        _LAST_STARTED.pair = (jobs, on)
    return on


def started_among(jobs: tuple[Job, ...], running: Sequence[Job]) -> None:
    """Has ``jobs_started_on`` answer for ``jobs`` from ``running`` alone: a subsequence of
    ``jobs`` (in their order) that holds every job of it that may be started (each
    ``JobPhase.RUNNING`` one), from a producer that knows where they are (Slurm's lines that are
    not pending), so that no pass scans every job for them."""
    _LAST_STARTED.pair = (jobs, _read_only(started_on(running)))


def _read_only(on: dict[str, list[Job]]) -> Mapping[str, tuple[Job, ...]]:
    """``started_on``'s answer with each host's jobs as a tuple, read only."""
    return MappingProxyType({h: tuple(js) for h, js in on.items()})


POOLED = frozenset({NodeState.STOPPING, NodeState.STOPPED})


@quick_init
@dataclass(frozen=True, slots=True)
class JobsChange:
    """How a snapshot's jobs (``after``) differ from the jobs its producer read before
    (``before``), as the producer knows it without comparing them (Slurm's read: the squeue
    lines it took in place from the read before's): ``after`` is ``before`` without the jobs
    ``left`` and with the jobs that ``came``, each the very objects (a job that moved is in
    both). A policy's view follows the change from its view of ``before``
    (``elb.core.policy.view.waiting_of``) instead of walking the two tuples side by side."""

    before: tuple[Job, ...] = dataclasses.field(repr=False)  # (the queue's every job: not shown)
    after: tuple[Job, ...] = dataclasses.field(repr=False)
    left: tuple[Job, ...]  # of ``before``, in its order
    came: tuple[Job, ...]  # of ``after``, in its order


@quick_init
@dataclass(frozen=True, slots=True)
class JoinIndex:
    """What a producer that keeps the joined state up to date event by event (the simulator)
    knows of it without a scan: the records that may need a repair (every other is ``steady``),
    the instances no record accounts for, the records in a warm pool, and each record, instance,
    host and node's jobs by name. With it a pass's planning costs what changed, not what the
    cluster holds; without it (the live pass) each is found by a scan. A test holds the two equal."""

    suspects: tuple[str, ...]
    unaccounted: tuple[Instance, ...]
    pooled: tuple[Node, ...]
    records: Mapping[str, Node]
    instances: Mapping[str, Instance]
    hosts: Mapping[str, Host]
    jobs_on: Callable[[str], tuple[Job, ...]]


@quick_init
@dataclass(frozen=True, eq=False)
class ClusterState:
    """The joined view of the cluster at ``now``: the journal's records, the cloud's instances
    and the scheduler's snapshot. The pass's planner, reconcile, the policies (``elb.core.policy.view``), the
    simulator, ``status`` and the stats row read it.

    The join is made when first asked and kept (``elb.core.frozen.cached``): a policy that finds the
    very same records, hosts and jobs as at its last call (the simulator, between events)
    reads nothing more of it."""

    snapshot: Snapshot
    records: tuple[Node, ...]  # the journal's records as read (gone ones too when the reader asked)
    now: float
    instances: tuple[Instance, ...] = ()  # the cloud's instances in any state but gone, joined or not
    in_flight: frozenset[str] = frozenset()  # nodes an operation of elb runs on
    include_gone: bool = False  # ``nodes`` keeps the records of terminated and failed nodes
    index: JoinIndex | None = None  # what its producer keeps up to date (``JoinIndex``); None: scan
    # The snapshot's jobs against the ones its producer read before (``JobsChange``).
    change: JobsChange | None = dataclasses.field(default=None, repr=False)

    @cached
    def hosts(self) -> dict[str, Host]:
        """the scheduler's hosts by name (the first of a name, as ``Snapshot.host``)."""
        out: dict[str, Host] = {}
        for h in self.snapshot.hosts:
            out.setdefault(h.name, h)
        return out

    @cached
    def jobs_on(self) -> Mapping[str, tuple[Job, ...]]:
        """The started jobs on each host (``jobs_started_on``)."""
        return jobs_started_on(self.snapshot.jobs)

    @cached
    def _instances_by(self) -> tuple[dict[str, Instance], dict[str, Instance]]:
        """The instances by id and by name (a pending or running one of a name before any other)."""
        by_id = {i.instance_id: i for i in self.instances}
        by_name: dict[str, Instance] = {}
        for i in sorted(self.instances, key=lambda i: instance_state(i.state) not in LIVE):  # live ones first
            by_name.setdefault(i.name, i)
        return by_id, by_name

    def managed(self, record: Node) -> ManagedNode:
        """``record`` joined with its instance, the scheduler's host and the jobs there.

        A record's instance is the one of its instance id; a record without one (a launch not
        yet journalled whole) has the instance of its name."""
        name = record.name
        index = self.index
        if index is not None:
            inst = index.instances.get(name)
            return ManagedNode(
                record, inst, index.hosts.get(name), index.jobs_on(name), name in self.in_flight, self.now
            )
        return ManagedNode(
            record,
            self._instance(record),
            self.hosts.get(name),
            self.jobs_on.get(name, ()),
            name in self.in_flight,
            self.now,
        )

    def _instance(self, record: Node) -> Instance | None:
        """``record``'s instance (without an index): the one of its instance id, or of its name when it has none."""
        by_id, by_name = self._instances_by
        return by_id.get(record.instance_id) if record.instance_id else by_name.get(record.name)

    @cached
    def suspects(self) -> tuple[ManagedNode, ...]:
        """The nodes that may need a repair: every one but the ``steady`` (the index's, or a scan)."""
        index = self.index
        if index is not None:
            return tuple(self.managed(index.records[name]) for name in index.suspects)
        keep, hosts, instance = self.include_gone, self.hosts, self._instance
        return tuple(
            self.managed(r)
            for r in self.records
            if (keep or r.state not in GONE) and not is_steady(r, instance(r), hosts.get(r.name))
        )  # (the steady records' predicate read off their instance and host: only the others joined)

    @cached
    def down(self) -> frozenset[str]:
        """The names of the nodes that are down (``is_down``): among the ``suspects``, as a
        down node is never ``steady`` (the index's, or a scan; none without an instance)."""
        index = self.index
        if index is not None:
            records, instances = index.records, index.instances
            found = [n for n in index.suspects if is_down(records[n], instances.get(n))]
        elif self.instances:
            found = [m.name for m in self.suspects if m.down]
        else:
            return NO_NAMES
        return frozenset(found) if found else NO_NAMES

    def suspects_apart(self, skip: Collection[str]) -> tuple[ManagedNode, ...]:
        """``suspects`` but those named in ``skip``: with the index, a skipped node is not joined."""
        index = self.index
        if index is None:
            return tuple(m for m in self.suspects if m.name not in skip)
        return tuple(self.managed(index.records[name]) for name in index.suspects if name not in skip)

    def skipped_instances(self, skip: Collection[str]) -> tuple[tuple[str, Instance], ...]:
        """The instances of the ``suspects`` named in ``skip`` (by name)."""
        index = self.index
        if index is None:
            return tuple((m.name, m.instance) for m in self.suspects if m.name in skip and m.instance is not None)
        found = ((name, index.instances.get(name)) for name in index.suspects if name in skip)
        return tuple((name, inst) for name, inst in found if inst is not None)

    # What the index holds is read off it as it is (a plain property: a pass asks a few of these,
    # and keeping one costs more than reading it off); without one, a scan kept.
    @property
    def unaccounted(self) -> tuple[Instance, ...]:
        """The instances whose id no record has (the index's, or a scan)."""
        return self.index.unaccounted if self.index is not None else self._unaccounted_scan

    @cached
    def _unaccounted_scan(self) -> tuple[Instance, ...]:
        known = {r.instance_id for r in self.records if r.instance_id}
        return tuple(i for i in self.instances if i.instance_id not in known)

    @property
    def pooled(self) -> tuple[Node, ...]:
        """The records stopping or stopped in a warm pool (the index's, or a scan)."""
        return self.index.pooled if self.index is not None else self._pooled_scan

    @cached
    def _pooled_scan(self) -> tuple[Node, ...]:
        return tuple(r for r in self.records if r.state in POOLED)

    @cached
    def _records_scan(self) -> Mapping[str, Node]:
        return {r.name: r for r in self.records}

    def record(self, name: str) -> Node | None:
        """The record of ``name`` (the last of a name, as the journal keeps one a name)."""
        return (self.index.records if self.index is not None else self._records_scan).get(name)

    def host(self, name: str) -> Host | None:
        return self.index.hosts.get(name) if self.index is not None else self.hosts.get(name)

    @cached
    def nodes(self) -> tuple[ManagedNode, ...]:
        """The records (live ones, and gone ones when ``include_gone``), oldest first, each joined
        (``managed``)."""
        keep = self.include_gone
        return tuple(self.managed(r) for r in self.records if keep or r.state not in GONE)

    def node(self, name: str) -> ManagedNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def count(self, *states: NodeState) -> int:
        return sum(1 for n in self.nodes if n.record.state in states)

    @property
    def booting(self) -> int:
        return sum(1 for n in self.nodes if n.booting)

    def at(self, now: float) -> ClusterState:
        """The same state read at another time (the simulator's look ahead on an unchanged cluster)."""
        return dataclasses.replace(self, now=now)

    def seeing(self, snapshot: Snapshot) -> ClusterState:
        """The same records and instances joined with another view of the scheduler (the
        demand's: waiting jobs no group can run left out, pooled nodes' hosts left out). The nodes
        down depend on the records and instances alone: worked out here already, they are kept."""
        if snapshot is self.snapshot:
            return self
        other = dataclasses.replace(self, snapshot=snapshot)
        if "down" in self.__dict__:
            other.__dict__["down"] = self.down  # the ``cached`` field's own slot, as it fills it
        return other


def join(
    records: Sequence[Node],
    instances: Sequence[Instance],
    snapshot: Snapshot,
    in_flight: Collection[str] = (),
    *,
    include_gone: bool = False,
    now: float | None = None,
    index: JoinIndex | None = None,
    change: JobsChange | None = None,
) -> ClusterState:
    """The journal's live records (and the gone ones when asked: ``elb nodes --all``) joined with
    their instances and the scheduler's hosts and jobs, at ``now`` (the snapshot's time unless
    given). With an ``index``, its producer hands only instances that are not gone; ``change``:
    how the snapshot's jobs differ from the ones its producer read before (``JobsChange``)."""
    at = snapshot.now if now is None else now
    present = (
        tuple(instances)
        if index is not None
        else tuple(i for i in instances if instance_state(i.state) is not InstanceState.GONE)
    )
    kept = records if isinstance(records, tuple) else tuple(records)  # a producer's tuple kept as is (its identity)
    return ClusterState(snapshot, kept, at, present, frozenset(in_flight), include_gone, index, change)
