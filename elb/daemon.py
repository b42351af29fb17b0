"""One pass of the balancer, and the polling loop around it.

A pass: read SGE (and the cloud) -> observe -> decide (pure policy) -> act -> journal and stats.
If anything cannot be read, the pass changes nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import FrameType
from typing import Protocol

from apscheduler.schedulers.background import BackgroundScheduler

from elb import nodesize
from elb.actuator import Actuator, Outcomes, SgeClient
from elb.backoff import compute as compute_backoff
from elb.config import Config
from elb.durations import minutes
from elb.executor import Executor
from elb.interfaces import Cloud, Instance, Notice, NoticeKind, NoticeSource, Provisioner
from elb.interruptions import job_number, moves
from elb.journal import Journal
from elb.logs import Alarms
from elb.metrics import PassMetrics
from elb.model import Job, Node, NodeState, Plan, Snapshot
from elb.planner import PassInputs, PassPlan, count_repair_failures, plan_pass, scale, scaling_waits
from elb.policy import Policy
from elb.policy.grouped import policy_for
from elb.policy.view import oldest_wait
from elb.reconcile import RepairKind
from elb.sdnotify import KeepAlive, Notifier
from elb.servable import DemandSplit, NotDemand, SiteCache, demand_of
from elb.sge.commands import read_whole
from elb.sge.readcheck import expected_hosts, running_jobs
from elb.starttimes import StartTimes
from elb.state import GONE, join, seen
from elb.stats import StatsRow, append_row, held_and_error

log = logging.getLogger("elb")


@dataclass
class PassResult:
    ok: bool
    now: float
    plan: Plan | None = None
    snapshot: Snapshot | None = None
    error: str | None = None
    outcomes: Outcomes = field(default_factory=Outcomes)
    # The dry run's whole plan (scaling alone when the cloud was not read), and what it read of the cloud.
    planned: PassPlan | None = None
    cloud_note: str = ""

    def summary(self) -> str:
        if not self.ok:
            return f"pass failed, nothing changed: {self.error}"
        assert self.plan is not None
        parts = self.plan.describe()
        o = self.outcomes
        if o.added:
            parts.append(f"added {', '.join(o.added)}")
        if o.removed:
            parts.append(f"removed {', '.join(o.removed)}")
        if o.kept:
            parts.append(f"kept (job landed) {', '.join(o.kept)}")
        if o.stopped:
            parts.append(f"stopped into the warm pool {', '.join(o.stopped)}")
        if o.restarted:
            parts.append(f"restarted from the warm pool {', '.join(o.restarted)}")
        parts.extend(f"repaired {r}" for r in o.repaired)
        parts.extend(f"{n}: {why}" for n, why in o.failed.items())
        if o.postponed:
            parts.append(f"stopping: not started {', '.join(o.postponed)}")
        return "; ".join(parts)


@dataclass
class LastPass:
    """Figures of the last pass, for metrics."""

    pending_jobs: int = 0
    pending_slots: int = 0
    oldest_wait: float = 0.0
    duration: float = 0.0
    last_good: float = 0.0
    lost_kept: int = 0  # lost nodes kept because SGE lists work on them (an admin must look)
    backoff_rounds: int = 0  # failed launch rounds in a row (0: launching is not backed off)
    backoff_wait: float = 0.0  # seconds before the next launch may start
    unservable_jobs: int = 0  # waiting jobs no node elb launches could ever run (never demand)
    not_demand: tuple[NotDemand, ...] = ()  # the waiting jobs the last plan left out, with why


@dataclass
class Counters:
    added: int = 0
    removed: int = 0
    failures: int = 0
    failed_passes: int = 0
    repairs: int = 0
    launches_held: int = 0  # launches the policy wanted and the back-off did not allow
    notices: dict[str, int] = field(default_factory=dict)  # EC2 notices about managed nodes, by kind
    rescheduled: int = 0  # jobs requeued from a node about to be taken back (spot interruption)
    moved_on_demand: int = 0  # jobs bound to on-demand queues after too many spot interruptions
    stopped: int = 0  # nodes stopped into a warm pool
    restarted: int = 0  # nodes started again from a warm pool, ready

    def count(self, o: Outcomes) -> None:
        """Add what one pass's operations achieved."""
        self.added += len(o.added)
        self.removed += len(o.removed)
        self.failures += len(o.failed)
        self.repairs += len(o.repaired)
        self.stopped += len(o.stopped)
        self.restarted += len(o.restarted)


def snapshot_summary(snap: Snapshot, master: str) -> list[str]:
    """A few plain lines describing what SGE shows."""
    pend = snap.pending
    held = [j for j in snap.jobs if not j.is_pending and j.queue is None]
    running = [j for j in snap.jobs if j.queue is not None]
    workers = [h for h in snap.hosts if h.name != master]
    oldest = min((j.submitted for j in pend if j.submitted is not None), default=None)
    wait = f", oldest waited {minutes(snap.now - oldest)}" if oldest is not None else ""
    slots = sum(j.total_slots for j in pend)
    lines = [
        f"jobs: {len(running)} running, {len(pend)} waiting ({slots} slots{wait}), {len(held)} held or in error",
        f"hosts: {len(workers)} workers, {sum(h.slots_total for h in workers)} slots, "
        f"{sum(h.slots_used for h in workers)} used",
    ]
    for h in workers:
        states = ",".join(sorted({q.states for q in h.queues if q.states})) or "ok"
        lines.append(f"  {h.name}: {h.slots_used}/{h.slots_total} slots, state {states}")
    return lines


class PassFailed(Exception):
    """What this pass needs cannot be read or trusted: the pass changes nothing."""


class Balancer:
    """Wires the SGE reader, the policy, the cloud, the provisioner and the journal together."""

    def __init__(
        self,
        config: Config,
        *,
        sge: SgeClient,
        journal: Journal,
        cloud: Cloud | None = None,
        provisioner: Provisioner | None = None,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.time,
        executor: Executor | None = None,
        node_slots: int | None = None,
        notices: NoticeSource | None = None,
    ) -> None:
        self.config = config
        self.notices = notices  # EC2's notices about workers (elb.cloud.notices), when set up
        self.sge = sge
        self.journal = journal
        self.cloud = cloud
        self.provisioner = provisioner
        self.policy = policy or policy_for(config)  # per node group with node_groups
        # Without policy.slots_per_node, ask the cloud once what a new node has (see _learn_new_node_slots).
        self._ask_slots = policy is None and config.policy.slots_per_node is None and config.node_groups is None
        # A new node's slots when known (configured, learnt from the cloud, or given by the dry
        # run); else inferred from the workers each pass, as the policy does.
        self.node_slots = config.policy.slots_per_node if node_slots is None else node_slots
        self._start_times = StartTimes()  # qsub -a times of waiting jobs, read a few per pass
        self._site = SiteCache()  # the site's complexes and PEs, read again every SITE_TTL seconds
        self.clock = clock
        # Node operations: inline (the pass ends when they end) unless run_forever gives one
        # that runs them in the background.
        self.executor = executor or Executor(inline=True)
        self.failed_in_a_row = 0
        self.alarms = Alarms(log)  # ALARM lines once per change (elb.logs)
        self.last = LastPass()
        self.counters = Counters()
        self.metrics = PassMetrics()
        # Set on SIGTERM/SIGINT: the node operation under way finishes, the next one doesn't start.
        self.stopping = threading.Event()
        self._nodes_at_start: list[Node] = []
        self._watching_since: float | None = None  # the first live pass's time (see reconcile.lost_for)
        self._repair_fails: dict[tuple[RepairKind, str], int] = {}  # failed passes in a row, per repair
        self._last_whole: Snapshot | None = None  # the last read of SGE found whole (elb.sge.readcheck)
        pooled = [g.name for g in config.groups(self.node_slots or 1).groups if g.warm_pool.enabled]
        if pooled:
            log.info("warm pool of %s: idle nodes are stopped, and started again for demand", ", ".join(pooled))
        # Before touching any node: stop the playbooks a killed predecessor left running.
        reap = getattr(provisioner, "reap_leftovers", None)
        if callable(reap):
            reap()

    def run_pass(self, *, dry_run: bool = False) -> PassResult:
        """One pass. Any exception in it (a bug, a MemoryError, a broken journal) makes a failed
        pass, logged with the error and counted; the next pass starts on a working journal."""
        started = time.monotonic()
        ok = False
        try:
            self.journal.ensure_open()
            result = self._pass(dry_run)
        except PassFailed as err:
            result = self._failed(self.clock(), str(err), dry_run)
        except Exception as err:
            log.exception("pass failed")
            result = self._failed(self.clock(), f"{type(err).__name__}: {err}", dry_run)
        else:
            ok = result.ok
        finally:
            self.last.duration = time.monotonic() - started
            if not dry_run:
                self.metrics.observe_pass(self.last.duration, ok)
            self.alarms.pass_ended(self.clock(), ok)
        return result

    def _pass(self, dry_run: bool) -> PassResult:
        """read SGE -> check the read -> remember what it showed -> read the cloud and EC2's
        notices -> plan (``elb.planner.plan_pass``, pure) -> start the plan's operations ->
        record. Failures to read raise ``PassFailed``."""
        # The journal's node records, read once: the read check, the stats row (the cluster as
        # this pass found it, with what it then did: not after a minute of provisioning) and the
        # planner's inputs (with what this pass saw, ``elb.state.seen``) all read these.
        records = tuple(self.journal.nodes(include_gone=True))
        self._nodes_at_start = [n for n in records if n.state not in GONE]
        snap = self._read_sge("reading SGE", records)
        self._learn_new_node_slots()
        records = self._remember_seen(snap, records, journal=not dry_run)
        if dry_run:
            return self._dry_pass(snap, records)
        if self.cloud is None or self.provisioner is None:
            raise RuntimeError("a live pass needs a cloud and a provisioner")
        try:
            instances = self.cloud.list_workers()
        except Exception as err:  # no action on partial data
            raise PassFailed(f"listing the cloud's workers: {err}") from err
        self._heed_notices(instances, snap.jobs)
        busy = self.executor.in_flight()
        inputs = self._inputs(snap, records, instances, busy)
        if not scaling_waits(inputs, self.config, snap.now):
            inputs = self._for_scaling(inputs)
        plan = plan_pass(inputs, self.config, self.policy, snap.now)
        result = PassResult(True, snap.now, plan.scaling or Plan(reason=plan.scaling_note), snap)
        act = Actuator(self.journal, self.sge, self.cloud, self.provisioner, self.clock)
        self._carry_out(plan, inputs, act, result)
        self.collect_finished(result)
        self.failed_in_a_row = 0
        self._record(result)
        return result

    def _dry_pass(self, snap: Snapshot, records: tuple[Node, ...]) -> PassResult:
        """The plan a live pass would make on what this one read, nothing started (the journal
        is the dry run's copy in memory). The cloud's workers are listed, read only, when there is
        a cloud to ask; without them no repair nor warm-pool action is planned (an instance elb
        cannot see is not gone) and the plan is scaling alone. Operations a running daemon has
        in flight are not known here."""
        instances: list[Instance] | None = None
        why = "no cloud to ask"
        if self.cloud is not None:
            try:
                instances = self.cloud.list_workers()
            except Exception as err:  # the dry run says so and plans scaling alone
                why = f"listing the cloud's workers: {err}"
        inputs = self._for_scaling(self._inputs(snap, records, instances or (), frozenset()))
        if inputs.demand is None:
            raise PassFailed(inputs.demand_error)
        if instances is None:
            plan = PassPlan(scaling=scale(inputs, self.policy, snap.now))
            note = f"not read ({why}): repairs and the warm pool not planned"
        else:
            plan = plan_pass(inputs, self.config, self.policy, snap.now)
            note = f"{len(instances)} listed (read only)"
        scaling = plan.scaling or Plan(reason=plan.scaling_note)
        return PassResult(True, snap.now, scaling, snap, planned=plan, cloud_note=note)

    def _inputs(
        self, snap: Snapshot, nodes: tuple[Node, ...], instances: Sequence[Instance], busy: frozenset[str]
    ) -> PassInputs:
        """What the planner plans on, read once: the journal (``nodes``, the pass's one read of
        its records), the cloud's workers; without what only scaling reads (``_for_scaling``)."""
        return PassInputs(
            snapshot=snap,
            nodes=nodes,
            instances=tuple(instances),
            demand=None,
            history=self.journal.history(),
            orders=self.journal.orders(),
            backoff=None,
            in_flight=busy,
            repair_fails=dict(self._repair_fails),
            watched_since=self._watching_from(snap.now),
            template_versions=self._template_versions(nodes),
        )

    def _for_scaling(self, inputs: PassInputs) -> PassInputs:
        """``inputs`` with what only scaling reads: the demand (``_demand``) and the back-off the
        journal's bring-ups set. Gathered only when the repairs let scaling go on."""
        demand, error = None, ""
        try:
            demand = self._demand(inputs.snapshot, inputs.nodes)
        except PassFailed as err:
            error = f"{err}; no scaling this pass"
        b = self.config.backoff
        backoff = compute_backoff(self.journal.bring_up_events(), initial=b.initial, maximum=b.max)
        return dataclasses.replace(inputs, demand=demand, demand_error=error, backoff=backoff)

    def _template_versions(self, nodes: Sequence[Node]) -> dict[str, str]:
        """Each group's launch template version now, when a node is stopped in a warm pool and
        the cloud can tell (``Ec2Cloud.template_versions``); unknown ones are left out (no node
        goes for its version)."""
        versions = getattr(self.cloud, "template_versions", None)
        if not callable(versions) or not any(n.state is NodeState.STOPPED for n in nodes):
            return {}
        try:
            return dict(versions())
        except Exception as err:  # the pool's other limits still apply
            log.warning("cannot read the launch template versions: %s", err)
            return {}

    def _carry_out(self, plan: PassPlan, inputs: PassInputs, act: Actuator, result: PassResult) -> None:
        """Start the plan's operations in its order, each on the executor (none on a node with
        an operation in flight: the planner left those out): repairs, then launches, then
        removals. Nothing here decides; it logs, counts and feeds back the repairs' outcomes."""
        for k in plan.kept:
            log.warning("%s: %s", k.node, k.reason)
        self.last.lost_kept = len(plan.kept)
        for name in plan.orders_done:
            self.journal.set_order("remove", name, on=False)  # the node is gone: the order is done
        if plan.stuck:
            log.error(
                "ALARM: %s failed %d passes in a row or more; scaling goes on around them",
                ", ".join(f"{r.kind.value} {r.node}" for r in plan.stuck),
                self.config.failed_passes_alarm,
            )
        if inputs.demand_error:
            log.error("%s", inputs.demand_error)
        self._start_repairs(plan, inputs, act, result)
        self._start_pool(plan, act, result, scaling=False)
        if inputs.backoff is not None:  # gathered when scaling went on; else the last one stands
            self.last.backoff_rounds = inputs.backoff.rounds
            self.last.backoff_wait = inputs.backoff.waiting(result.now)
        scaling = plan.scaling
        if scaling is None:
            return
        if plan.launches_held:
            self.counters.launches_held += plan.launches_held
            self.alarms.alarm("launch back-off", scaling.reason, result.now, changes_with=inputs.backoff)
        if scaling.add and not self._stop_before(",".join(scaling.add_names), result):
            # Requested before the pass ends: the next pass counts these nodes as booting.
            act.request(scaling.add_names, scaling.add_reason, scaling.add_groups)
            names = ",".join(scaling.add_names)
            self.executor.submit(scaling.add_names, names, functools.partial(act.launch, scaling.add_names))
        for r in scaling.remove:
            if self._stop_before(r.node, result):
                break
            self.executor.submit([r.node], r.node, functools.partial(act.remove, r.node, r.reason))
        self._start_pool(plan, act, result, scaling=True)

    def _start_pool(self, plan: PassPlan, act: Actuator, result: PassResult, *, scaling: bool) -> None:
        """Start the warm pool's operations: its terminations (``scaling`` False: they go whether
        or not scaling runs), or its restarts (journalled as starting before the pass ends, so the
        next pass counts them as booting) and stops."""
        pool = plan.pool
        todo = (
            [("terminate pooled", r, act.retire) for r in pool.expire]
            if not scaling
            else [("restart", r, None) for r in pool.restarts] + [("stop", r, act.stop) for r in pool.stops]
        )
        for what, r, op in todo:
            if self._stop_before(r.node, result):
                break
            log.info("%s %s: %s", what, r.node, r.reason)
            if op is not None:
                self.executor.submit([r.node], r.node, functools.partial(op, r.node, r.reason))
            elif act.begin_restart(r.node, r.reason):
                self.executor.submit([r.node], r.node, functools.partial(act.restart, r.node))

    def _start_repairs(self, plan: PassPlan, inputs: PassInputs, act: Actuator, result: PassResult) -> None:
        """Start the plan's repairs, and count each one's failed passes in a row."""
        busy = inputs.in_flight
        if not plan.repairs:
            self._repair_fails = {k: n for k, n in self._repair_fails.items() if k[1] in busy}
            return
        self.collect_finished(result)  # failures of repairs that ended since the last pass count below
        for repair in plan.repairs:
            if self._stop_before(repair.node, result):
                break
            self.executor.submit([repair.node], repair.node, functools.partial(act.repair, repair))
        self.collect_finished(result)
        self._repair_fails = count_repair_failures(self._repair_fails, plan.repairs, result.outcomes.failed, busy)

    def collect_finished(self, result: PassResult) -> None:
        """What the node operations that ended since the last pass achieved, into ``result``."""
        done = self.executor.collect()
        result.outcomes.absorb(done)  # the operations never postpone: only a pass does
        self.metrics.observe_added(self.journal, done.added)

    def _read_sge(self, what: str, records: Sequence[Node]) -> Snapshot:
        """Read SGE; ``PassFailed`` if it cannot be read, or if the read is partial: hosts elb
        knows (in the journal's ``records``, or the hosts of jobs it saw running) vanished without
        being deregistered, and ``read_whole`` could not confirm it (``elb.sge.readcheck``). The
        one place where a pass decides to trust what it read."""
        known = expected_hosts(records, self._last_whole)
        try:
            snap = read_whole(self.sge, known_up=known, running_before=running_jobs(self._last_whole))
        except Exception as err:  # any failure to read, or a partial read: no action this pass
            raise PassFailed(f"{what}: {err}") from err
        self._last_whole = snap
        return snap

    def _heed_notices(self, instances: Sequence[Instance], jobs: Sequence[Job]) -> None:
        """Act on EC2's notices about managed nodes: a node about to go (spot interruption,
        scheduled retirement) or failing its status checks is disabled in SGE at once, so no new
        job lands on it, and its removal ordered (the safe drain removes it when idle; demand
        left without it gets new nodes as usual). On a spot interruption (two minutes' warning)
        its rerunnable jobs are also requeued at once (``qmod -rq``), so they start again
        elsewhere rather than die with the node; a job that is not rerunnable runs on, and is
        named. Other notices are logged. A queue or status read that fails changes nothing."""
        notices = [*self._queued_notices(), *self._status_checks(instances)]
        if not notices:
            return
        by_id = {i.instance_id: i.name for i in instances}
        ordered = self.journal.orders().remove
        for n in notices:
            name = by_id.get(n.instance_id)
            if name is None:
                continue  # not one of this cluster's managed workers
            if n.kind is NoticeKind.IMPAIRED and name in ordered:
                continue  # seen in an earlier pass: its removal is under way
            self.counters.notices[n.kind.value] = self.counters.notices.get(n.kind.value, 0) + 1
            if not n.kind.retire:
                log.info("%s: EC2 notice: %s", name, n.describe())
                continue
            log.warning("%s: EC2 notice: %s: disabling it in SGE and ordering its removal", name, n.describe())
            self.journal.set_order("remove", name, on=True)
            try:
                self.sge.disable_host(name)
            except Exception as err:  # the order stands; the drain disables it again
                log.error("%s: could not disable it in SGE: %s", name, err)
            if n.kind is NoticeKind.INTERRUPTION:
                self._requeue(name, jobs)

    def _queued_notices(self) -> Sequence[Notice]:
        """EC2's notices from the queue (``cloud.ec2.notices``); none when it cannot be read."""
        if self.notices is None:
            return ()
        try:
            return self.notices.poll()
        except Exception as err:  # notices are an early warning; the pass goes on without them
            log.warning("cannot read EC2's notices: %s", err)
            return ()

    def _status_checks(self, instances: Sequence[Instance]) -> Sequence[Notice]:
        """EC2's status checks of the workers, when the cloud has them (``Ec2Cloud.health``)."""
        health = getattr(self.cloud, "health", None)
        if not callable(health) or not instances:
            return ()
        try:
            return list(health(instances))
        except Exception as err:  # the pass goes on: reconcile still sees a node that is gone
            log.warning("cannot read the workers' status checks: %s", err)
            return ()

    def _requeue(self, name: str, jobs: Sequence[Job]) -> None:
        """Requeue the rerunnable jobs of a node about to be taken back."""
        try:
            done = self.sge.reschedule_host(name)
        except Exception as err:  # the node goes anyway: said, and the pass goes on
            log.error("%s: could not requeue its jobs: %s", name, err)
            return
        self.counters.rescheduled += len(done.pushed)
        if done.pushed:
            log.warning("%s: requeued job %s: they start again on another node", name, ", ".join(done.pushed))
            self._move_off_spot(done.pushed, jobs)
        if done.not_restartable:
            ids = ", ".join(str(j) for j in done.not_restartable)
            log.error("ALARM: %s: job %s not rerunnable: lost with the node unless it ends in time", name, ids)

    def _move_off_spot(self, pushed: Sequence[str], jobs: Sequence[Job]) -> None:
        """Count the interruption of each requeued job; give the jobs interrupted too often a
        hard request only on-demand nodes satisfy (``elb.interruptions``). ``jobs``: the jobs
        the pass read (their hard requests are kept)."""
        counts = self.journal.count_interruptions([job_number(p) for p in pushed], self.clock())
        groups = self.config.groups(self.node_slots or 1)
        requests = {j.job_id: j.hard_requests for j in jobs}
        for move in moves(counts, self.config.cloud.ec2.spot_interruptions_allowed, groups, requests):
            if not move.requests:
                log.error("ALARM: job %d: %s", move.job, move.reason)
                continue
            try:
                self.sge.set_hard_requests(move.job, move.requests)
            except Exception as err:  # tried again at its next interruption
                log.error("job %d: could not change its requests: %s", move.job, err)
                continue
            self.journal.mark_moved(move.job)
            self.counters.moved_on_demand += 1
            log.warning("job %d: %s", move.job, move.reason)

    def _remember_seen(self, snap: Snapshot, records: tuple[Node, ...], *, journal: bool = True) -> tuple[Node, ...]:
        """``records`` with what the pass saw (busy and reachable nodes), as the journal holds
        them once it is written (``journal``: the dry run writes nothing)."""
        busy = sorted({h.name for h in snap.hosts if h.busy} | {j.host for j in snap.jobs if j.host})
        up = [h.name for h in snap.hosts if h.up]
        if journal:
            self.journal.mark_seen(snap.now, busy=busy, up=up)
        return seen(records, snap.now, busy=busy, up=up)

    def _demand(self, snap: Snapshot, nodes: Sequence[Node]) -> DemandSplit:
        """The snapshot the policy plans on: waiting jobs no new node could ever run, or held by
        ``qsub -a`` until later, left out (``elb.servable``) and reported. ``PassFailed`` when the
        site's configuration cannot be read while jobs wait: nothing is launched on a guess."""
        if not snap.pending:
            self.last.not_demand, self.last.unservable_jobs = (), 0
            return DemandSplit(snap)
        try:
            site = self._site.get(self.sge, snap.now)
        except Exception as err:
            raise PassFailed(f"reading the site's complexes and parallel environments: {err}") from err
        starts = self._start_times.update(self.sge, snap.pending)
        split = demand_of(snap, nodes, self.config, site, self.node_slots, start_times=starts)
        for n in split.not_demand:
            log.warning("not demand: %s", n.describe())
        self.last.not_demand = split.not_demand
        self.last.unservable_jobs = len(split.unservable)
        return split

    def _watching_from(self, now: float) -> float:
        """When this run of elb began to watch the cluster: its first live pass."""
        if self._watching_since is None:
            self._watching_since = now
        return self._watching_since

    def _learn_new_node_slots(self) -> None:
        """Once per start, when policy.slots_per_node is not set: see ``elb.nodesize.learn_once``."""
        self.policy, self._ask_slots, learnt = nodesize.learn_once(
            self.config, self.cloud, self.policy, self._ask_slots
        )
        if learnt is not None:
            self.node_slots = learnt

    def _stop_before(self, what: str, result: PassResult) -> bool:
        """True when elb is stopping: the operation on ``what`` is left for the next start."""
        if not self.stopping.is_set():
            return False
        result.outcomes.postponed.append(what)
        log.info("stopping: %s not started (the next start decides again)", what)
        return True

    def _failed(self, now: float, error: str, dry_run: bool) -> PassResult:
        result = PassResult(False, now, error=error)
        self.failed_in_a_row += 1
        self.counters.failed_passes += 1
        if self.failed_in_a_row >= self.config.failed_passes_alarm:
            self.alarms.alarm(
                "failed passes",
                f"{self.failed_in_a_row} passes in a row failed; elb is changing nothing until SGE can be read again",
                now,
                changes_with=None,
            )
        if not dry_run:
            self._record(result)
        return result

    def _record(self, result: PassResult) -> None:
        summary = result.summary()
        o = result.outcomes
        try:
            self.journal.record_pass(result.now, result.ok, summary, len(o.added), len(o.removed))
        except Exception as err:  # the stats row and the counters still record the pass
            log.error("cannot record the pass in the journal: %s", err)
        row = self._stats_row(result, summary)
        self.counters.count(o)
        if row.ok:
            self.last.pending_jobs = row.pending_jobs
            self.last.pending_slots = row.pending_slots
            self.last.oldest_wait = row.oldest_wait
            self.last.last_good = row.time
        try:
            append_row(self.config.stats_path, row)
        except OSError as err:
            log.warning("cannot write stats file %s: %s", self.config.stats_path, err)

    def _stats_row(self, result: PassResult, summary: str) -> StatsRow:
        """The cluster as the pass found it (the records it read at its start, joined with its
        snapshot: ``elb.state``), with what it then did."""
        snap = result.snapshot
        found = join(self._nodes_at_start, (), snap or Snapshot(result.now, (), ()))
        booting, ready, draining = found.booting, found.count(NodeState.READY), found.count(NodeState.DRAINING)
        if snap is None:
            return StatsRow(result.now, False, 0, 0, 0.0, 0, booting, ready, draining, 0, 0, summary)
        pending = snap.pending
        held, error = held_and_error(snap.jobs)
        return StatsRow(
            time=result.now,
            ok=True,
            pending_jobs=len(pending),
            pending_slots=sum(j.total_slots for j in pending),
            oldest_wait=oldest_wait(pending, result.now),
            running_jobs=sum(1 for j in snap.jobs if j.queue is not None),
            nodes_booting=booting,
            nodes_ready=ready,
            nodes_draining=draining,
            added=len(result.outcomes.added),
            removed=len(result.outcomes.removed),
            action=summary,
            held_jobs=held,
            error_jobs=error,
        )


SIGNAL_CHECK = 1.0  # seconds between two looks of the main thread at the stop event


class Passes(Protocol):
    """What ``run_forever`` drives: ``Balancer`` (Grid Engine) or ``elb.slurm.balancer.SlurmBalancer``."""

    executor: Executor

    @property
    def stopping(self) -> threading.Event: ...

    @property
    def provisioner(self) -> object: ...

    def clock(self) -> float: ...

    def run_pass(self, *, dry_run: bool = False) -> PassResult: ...

    def collect_finished(self, result: PassResult) -> None: ...


def run_forever(balancer: Passes, interval: float) -> None:
    """Run a pass every ``interval`` seconds (first at once) until SIGINT/SIGTERM.

    One pass at a time; missed runs are coalesced. Node operations run in the background
    (``Executor``), so a pass takes as long as its reads, never a launch or a playbook. A signal
    lets the node operations under way finish (a node half added or half removed is what must
    never be left), starts no other one, and stops; a second signal is passed on to the
    provisioner's cancel event, which stops the running playbooks (the nodes are then failed and
    cleaned up by the actuator or the next start).
    """
    stop = balancer.stopping
    sched = BackgroundScheduler()
    notify = Notifier()
    KeepAlive.watch(sched, notify, interval)  # watchdog keep-alives from their own thread (elb.sdnotify)
    first = True
    if balancer.executor.inline:
        balancer.executor = Executor()

    def one_pass() -> None:
        nonlocal first
        if stop.is_set():
            return
        if first:  # config read, journal open, scheduler running: systemd may call the service up
            notify.ready(f"polling every {interval:g} s")
            first = False
        result = balancer.run_pass()
        level = logging.INFO if result.ok else logging.WARNING
        log.log(level, "pass: %s", result.summary())
        notify.alive(f"last pass: {'ok' if result.ok else 'failed'}")

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            log.warning("second signal: cancelling running provisioning")
            cancel = getattr(balancer.provisioner, "cancel", None)
            if callable(cancel):
                cancel()
            return
        log.info("signal %d: stopping after the current step", signum)
        notify.stopping()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sched.add_job(
        one_pass,
        "interval",
        seconds=interval,
        max_instances=1,
        coalesce=True,
        next_run_time=datetime.now().astimezone(),  # first pass at once
        id="pass",
    )
    sched.start()
    # The main thread, where Python runs signal handlers, wakes every second: a signal the kernel
    # hands to another thread (the pass's, or a node operation's) is handled within a second,
    # not when the next pass is due.
    while not stop.wait(SIGNAL_CHECK):
        pass
    sched.shutdown(wait=True)  # the pass under way ends; no other starts
    busy = balancer.executor.in_flight()
    if busy:
        log.info("stopping: waiting for the operations under way on %s", ", ".join(sorted(busy)))
    balancer.executor.shutdown()
    done = PassResult(True, balancer.clock(), Plan(reason="operations that ended after the last pass"))
    balancer.collect_finished(done)
    if done.outcomes.added or done.outcomes.removed or done.outcomes.failed or done.outcomes.kept:
        log.info("stopping: %s", done.summary())
    log.info("elb stopped")
