"""One pass of the balancer, and the polling loop around it, for every scheduler.

A pass reads (the scheduler through its driver, the journal, the cloud and its notices), checks
what it read (a read that cannot be trusted fails the pass, and nothing changes), plans once
(``elb.core.planner.plan_pass``, pure), hands the plan's actions to the executor in the plan's
order, and records what happened. It decides nothing itself.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler

from elb.core.attribution import spanning_jobs
from elb.core.backoff import by_group as backoff_by_group
from elb.core.config import Config
from elb.core.drivers import cloud_settings
from elb.core.durations import minutes
from elb.core.interfaces import (
    Cancels,
    Cloud,
    Instance,
    InstanceState,
    Notice,
    NoticeSource,
    Provisioner,
    ReapsLeftovers,
    ReportsHealth,
    TagsGroups,
    VersionsTemplates,
)
from elb.core.model import Node, NodeState, Plan, Snapshot
from elb.core.planner import PassInputs, PassPlan, cluster_state, count_repair_failures, plan_pass, scaling_waits
from elb.core.policy import Policy
from elb.core.policy.grouped import policy_for
from elb.core.policy.view import oldest_wait
from elb.core.poolplan import group_of as pool_group_of
from elb.core.poolplan import groups_of
from elb.core.reconcile import RepairKind
from elb.core.scheduler import Scheduler, SchedulerError, SchedulerRead
from elb.core.spend import SpendCache, read_spend
from elb.core.state import GONE, busy_hosts, join, seen
from elb.core.tagplan import TagRefusal
from elb.service import nodesize
from elb.service.actuator import Actuator
from elb.service.executor import Executor
from elb.service.journal import Journal
from elb.service.logs import Alarms
from elb.service.metrics import PassMetrics
from elb.service.passrecord import Counters, LastPass, PassResult
from elb.service.reaction import Reaction
from elb.service.sdnotify import KeepAlive, Notifier
from elb.service.stats import StatsRow, append_row, held_and_error

log = logging.getLogger("elb")


def snapshot_summary(snap: Snapshot, master: str) -> list[str]:
    """A few plain lines describing what the scheduler shows."""
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
        states = ",".join(sorted({str(f.name).lower() for q in h.queues for f in q.flags})) or "ok"
        lines.append(f"  {h.name}: {h.slots_used}/{h.slots_total} slots, state {states}")
    return lines


def assumed_instances(records: Sequence[Node]) -> tuple[Instance, ...]:
    """The cloud's workers as the journal has them, for a dry run that cannot list them: each
    record that has an instance and is not gone, in the state the record implies (a pooled node's
    stopped, the others' running). Planned on, no node looks vanished and no instance orphaned."""
    out = []
    for n in records:
        if n.instance_id is None or n.state in GONE:
            continue
        state = InstanceState.STOPPED if n.state is NodeState.STOPPED else InstanceState.RUNNING
        out.append(Instance(n.instance_id, n.name, state, n.launched_at, n.private_ip, n.instance_type, slots=n.slots))
    return tuple(out)


class PassFailed(Exception):
    """What this pass needs cannot be read or trusted: the pass changes nothing."""


class Balancer:
    """Wires the scheduler's driver, the policy, the cloud, the provisioner and the journal together."""

    def __init__(
        self,
        config: Config,
        *,
        scheduler: Scheduler,
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
        self.scheduler = scheduler
        self.notices = notices  # the cloud's notices about workers (EC2's: elb.clouds.ec2.notices), when set up
        self.cloud_settings = cloud_settings(config)  # what the pass reads of the cloud's section
        self.journal = journal
        self.cloud = cloud
        self.provisioner = provisioner
        self.policy = policy or policy_for(config)  # per node group with node_groups
        # Without policy.slots_per_node, ask the cloud once what a new node has (see _learn_new_node_slots).
        self._ask_slots = policy is None and config.policy.slots_per_node is None and config.node_groups is None
        # A new node's slots when known (configured, learnt from the cloud, or given by the dry
        # run); else inferred from the workers each pass, as the policy does.
        self.node_slots = config.policy.slots_per_node if node_slots is None else node_slots
        self.clock = clock
        # Node operations: inline (the pass ends when they end) unless run_forever gives one
        # that runs them in the background.
        self.executor = executor or Executor(inline=True)
        # The asks left open under the back-off already said: (node, asked since, back-off round).
        self._asks_said_open: frozenset[tuple[str, float, int]] = frozenset()
        self.failed_in_a_row = 0
        self.alarms = Alarms(log)  # ALARM lines once per change (elb.service.logs)
        self.last = LastPass()
        self.counters = Counters()
        self.metrics = PassMetrics()
        # Set on SIGTERM/SIGINT: the node operation under way finishes, the next one doesn't start.
        self.stopping = threading.Event()
        self._nodes_at_start: list[Node] = []
        self._watching_since: float | None = None  # the first live pass's time (see reconcile.lost_for)
        self._repair_fails: dict[tuple[RepairKind, str], int] = {}  # failed passes in a row, per repair
        self.spend_cache = SpendCache()  # the budget's gone nodes, kept between passes (elb.core.spend.read_spend)
        pooled = [g.name for g in groups_of(config).groups if g.warm_pool.enabled]
        if pooled:
            log.info("warm pool of %s: idle nodes are stopped, and started again for demand", ", ".join(pooled))
        # Before touching any node: stop the playbooks a killed predecessor left running.
        if isinstance(provisioner, ReapsLeftovers):
            provisioner.reap_leftovers()

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
        """take the scheduler's requests -> read it (checked whole) -> remember what it showed ->
        read the cloud and its notices -> plan (``elb.core.planner.plan_pass``, pure) -> start the
        plan's operations -> record. Failures to read raise ``PassFailed``."""
        if not dry_run:
            for line in self.scheduler.take_requests(self.clock()):
                log.info("%s", line)
        # The nodes an operation owns, asked before anything else is read: an operation that ends
        # later in the pass is still left alone (its node is planned for next pass), and one that
        # ended before has written its last step to the journal read below. Asked after the
        # records, an add that ended in between would leave a node the records show booting with
        # no operation owning it, and the pass would repair it (provision it again, abandon it).
        in_flight = self.executor.in_flight()
        # The journal's node records, read once: the read check, the stats row (the cluster as
        # this pass found it, with what it then did: not after a minute of provisioning) and the
        # planner's inputs (with what this pass saw, ``elb.core.state.seen``) all read these.
        records = tuple(self.journal.nodes(include_gone=True))
        self._nodes_at_start = [n for n in records if n.state not in GONE]
        read = self._read(records)
        snap = read.snapshot
        self._learn_new_node_slots()
        records = self._remember_seen(snap, records, journal=not dry_run)
        if dry_run:
            return self._dry_pass(read, records)
        if self.cloud is None or self.provisioner is None:
            raise RuntimeError("a live pass needs a cloud and a provisioner")
        try:
            instances = self.cloud.list_workers()
        except Exception as err:  # no action on partial data
            raise PassFailed(f"listing the cloud's workers: {err}") from err
        inputs = self._inputs(read, records, instances, in_flight, self._notices(instances), listed=True)
        state = cluster_state(inputs, snap.now)  # joined once: scaling's inputs add no record, instance or job
        if not scaling_waits(inputs, self.config, snap.now, state):
            inputs = self._for_scaling(inputs, read)
        plan = plan_pass(inputs, self.config, self.policy, snap.now, state)
        result = PassResult(True, snap.now, plan.scaling or Plan(reason=plan.scaling_note), snap, planned=plan)
        self._carry_out(plan, inputs, self.actuator(), result)
        self.collect_finished(result)
        self.failed_in_a_row = 0
        self._record(result)
        return result

    def actuator(self) -> Actuator:
        """The node operations on this balancer's journal, scheduler, cloud and provisioner."""
        if self.cloud is None or self.provisioner is None:
            raise RuntimeError("node operations need a cloud and a provisioner")
        return Actuator(
            self.journal,
            self.scheduler,
            self.cloud,
            self.provisioner,
            self.clock,
            stopping=self.stopping,
            groups=groups_of(self.config),
            boot=self.config.provision.mode == "boot",
        )

    def _read(self, records: Sequence[Node]) -> SchedulerRead:
        """The scheduler's read; ``PassFailed`` when it cannot be read or trusted (the driver
        checks it is whole: the one place where a pass decides to trust what it read)."""
        try:
            return self.scheduler.read(records, self.clock())
        except SchedulerError as err:
            raise PassFailed(f"reading {self.scheduler.name}: {err}") from err

    def _dry_pass(self, read: SchedulerRead, records: tuple[Node, ...]) -> PassResult:
        """The plan a live pass would make on what this one read, nothing started (the journal
        is the dry run's copy in memory), by the same ``plan_pass``. The cloud's workers are
        listed, read only, when there is a cloud to ask; when they cannot be, they are taken as
        the journal has them (``assumed_instances``): the scheduler's asks, the back-off and the
        budget still apply, and no repair is planned that only the cloud's list could show (an
        instance gone, an orphan). Operations a running daemon has in flight, and the cloud's
        notices, are not known here."""
        snap = read.snapshot
        instances: list[Instance] | None = None
        why = "no cloud to ask"
        if self.cloud is not None:
            try:
                instances = self.cloud.list_workers()
            except Exception as err:  # the dry run says so and plans on the journal's workers
                why = f"listing the cloud's workers: {err}"
        if instances is None:
            listed = assumed_instances(records)
            note = f"not read ({why}): taken as the journal has them; no repair the cloud's list would show is planned"
        else:
            listed = tuple(instances)
            note = f"{len(instances)} listed (read only)"
        inputs = self._for_scaling(
            self._inputs(read, records, listed, frozenset(), (), listed=instances is not None), read
        )
        if inputs.demand is None:
            raise PassFailed(inputs.demand_error)
        plan = plan_pass(inputs, self.config, self.policy, snap.now)
        scaling = plan.scaling or Plan(reason=plan.scaling_note)
        return PassResult(True, snap.now, scaling, snap, planned=plan, cloud_note=note)

    def _inputs(
        self,
        read: SchedulerRead,
        nodes: tuple[Node, ...],
        instances: Sequence[Instance],
        busy: frozenset[str],
        notices: Sequence[Notice],
        *,
        listed: bool,
    ) -> PassInputs:
        """What the planner plans on, read once: the journal (``nodes``, the pass's one read of
        its records), the scheduler's read, the cloud's workers and notices; without what only
        scaling reads (``_for_scaling``). ``listed``: ``instances`` are the cloud's list, with
        their tags (not the journal's workers taken for it): a cloud that ``TagsGroups`` tags
        the workers that lack their node group's tag."""
        snap = read.snapshot
        tags = listed and isinstance(self.cloud, TagsGroups)
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
            asks=read.asks,
            dropped=read.dropped,
            gone=read.gone,
            names=read.names,
            change=read.change,
            notices=tuple(notices),
            interrupted=tuple(self.journal.interrupted_jobs()),
            scheduler=self.scheduler.name,
            cloud=self.cloud_settings,
            tags_groups=tags,
            tags_refused=self.journal.tags_refused() if tags else None,
        )

    def _for_scaling(self, inputs: PassInputs, read: SchedulerRead) -> PassInputs:
        """``inputs`` with what only scaling reads: the demand (the scheduler's: ``demand``), the
        back-off the journal's bring-ups set, and with ``policy.budget`` what its period has cost so
        far (``elb.core.spend.read_spend``). Gathered only when the repairs let scaling go on."""
        demand, error = None, ""
        try:
            demand = self.scheduler.demand(read, inputs.nodes, self.node_slots)
        except SchedulerError as err:
            error = f"{err}; no scaling this pass"
        if demand is not None:
            # Each once, as it appears or its reason changes: a job held for hours would
            # otherwise fill the log at every pass (``elb status`` and ``elb jobs`` list them all).
            told = {n.describe() for n in self.last.not_demand}
            for line in (n.describe() for n in demand.not_demand):
                if line not in told:
                    log.warning("not demand: %s", line)
            self.last.not_demand = demand.not_demand
            self.last.unservable_jobs = len(demand.unservable)
        b = self.config.backoff
        groups = groups_of(self.config)
        group_of = {n.name: pool_group_of(n, groups).name for n in inputs.nodes}
        first = groups.groups[0].name
        backoff = backoff_by_group(
            self.journal.bring_up_events(), lambda name: group_of.get(name, first), initial=b.initial, maximum=b.max
        )
        now = inputs.snapshot.now
        spend = read_spend(self.journal, self.config, now, records=inputs.nodes, cache=self.spend_cache)
        return dataclasses.replace(inputs, demand=demand, demand_error=error, backoff=backoff, spend=spend)

    def _template_versions(self, nodes: Sequence[Node]) -> dict[str, str]:
        """Each group's launch template version now, when a node is stopped in a warm pool and
        the cloud can tell (``Ec2Cloud.template_versions``); unknown ones are left out (no node
        goes for its version)."""
        if not isinstance(self.cloud, VersionsTemplates) or not any(n.state is NodeState.STOPPED for n in nodes):
            return {}
        try:
            return dict(self.cloud.template_versions())
        except Exception as err:  # the pool's other limits still apply
            log.warning("cannot read the launch template versions: %s", err)
            return {}

    def _notices(self, instances: Sequence[Instance]) -> tuple[Notice, ...]:
        """The cloud's notices (its ``NoticeSource``: EC2's queue, ``cloud.ec2.notices``) and the
        workers' status checks (``ReportsHealth``); none of either when it cannot be read (they are
        an early warning: reconcile still sees a node that is gone)."""
        found: list[Notice] = []
        if self.notices is not None:
            try:
                found += self.notices.poll()
            except Exception as err:
                log.warning("cannot read %s's notices: %s", self.cloud_settings.name, err)
        if isinstance(self.cloud, ReportsHealth) and instances:
            try:
                found += list(self.cloud.health(instances))
            except Exception as err:
                log.warning("cannot read the workers' status checks: %s", err)
        return tuple(found)

    def _carry_out(self, plan: PassPlan, inputs: PassInputs, act: Actuator, result: PassResult) -> None:
        """Start the plan's actions in its order: the notices' retirements and the asks'
        answers (in the pass), repairs, the warm pool's terminations, launches, removals, the
        pool's restarts and stops, give-backs and bindings (on the executor, none on a node with
        an operation in flight: the planner left those out). Nothing here decides; it logs,
        counts and feeds back the repairs' outcomes."""
        self._heed_notices(plan, act, result)
        for a in plan.answers:
            self.journal.answer_ask(a.node, a.since, a.answer, result.now)
            if a.answer.startswith("dropped"):
                log.warning("%s: %s's ask %s", a.node, self.scheduler.name, a.answer)
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
        if plan.group_tags:
            error = act.tag_groups(plan.group_tags)
            self.journal.set_tags_refused(None if error is None else TagRefusal(result.now, error))
        self._start_pool(plan, act, result, scaling=False)
        if inputs.backoff is not None:  # gathered when scaling went on; else the last one stands
            self.last.backoff_rounds = inputs.backoff.rounds
            self.last.backoff_wait = inputs.backoff.waiting(result.now)
        if plan.scaling is not None:
            self._start_scaling(plan, plan.scaling, inputs, act, result)
        self._give_back(plan, act, result)
        self._say_open_asks(plan, inputs)
        for m in plan.moves:
            act.bind(m, result.outcomes)

    def _give_back(self, plan: PassPlan, act: Actuator, result: PassResult) -> None:
        """Give back the asks the pass declines and hold (or reopen) the names the scheduler may
        pick next. The give-backs are one operation (one release a reason: a burst's hundreds of
        nodes over a limit are a few commands, not one a node), of the nodes with none under way;
        the holds another, of the names with none under way."""
        busy = self.executor.in_flight()
        declines = [d for d in plan.declines if d.node not in busy]
        if declines:
            names = [d.node for d in declines]
            nodes = names[0] if len(names) == 1 else f"{len(names)} nodes ({names[0]} ... {names[-1]})"
            if not self._stop_before(f"give back {nodes}", result):
                self.executor.submit(names, f"give back {nodes}", functools.partial(act.give_back_all, declines))
        holds = dataclasses.replace(
            plan.names,
            hold=tuple(n for n in plan.names.hold if n not in busy),
            reopen=tuple(n for n in plan.names.reopen if n not in busy),
        )
        what = f"hold {len(holds.hold)} and reopen {len(holds.reopen)} names"
        if (holds.hold or holds.reopen) and not self._stop_before(what, result):
            self.executor.submit((*holds.hold, *holds.reopen), what, functools.partial(act.hold_names, holds))

    def _say_open_asks(self, plan: PassPlan, inputs: PassInputs) -> None:
        """Say each of the scheduler's asks the back-off leaves open once per ask and back-off
        round (not every pass while the back-off lasts). Remembered from the passes where
        scaling went on (the back-off read): a pass where it waits forgets nothing."""
        if inputs.backoff is None:
            return
        rounds = inputs.backoff.rounds
        now_open = frozenset((d.node, d.since, rounds) for d in plan.waiting)
        for d in plan.waiting:
            if (d.node, d.since, rounds) not in self._asks_said_open:
                log.info("%s: %s's ask left open: %s", d.node, self.scheduler.name, d.reason)
        self._asks_said_open = now_open

    def _start_scaling(
        self, plan: PassPlan, scaling: Plan, inputs: PassInputs, act: Actuator, result: PassResult
    ) -> None:
        """Start the launches (journalled as requested before the pass ends: the next pass counts
        them as booting), the removals, and the warm pool's restarts and stops."""
        if plan.launches_held:
            self.counters.launches_held += plan.launches_held
            self.alarms.alarm("launch back-off", scaling.reason, result.now, changes_with=inputs.backoff)
        if scaling.add and not self._stop_before(",".join(scaling.add_names), result):
            act.request(scaling.add_names, scaling.add_reason, scaling.add_groups)
            names = ",".join(scaling.add_names)
            self.executor.submit(scaling.add_names, names, functools.partial(act.launch, scaling.add_names))
        for h in plan.held:  # kept on its own word lately: said every pass, counted kept and failed
            log.error("ALARM: %s: kept: %s", h.node, h.reason)
            result.outcomes.kept.append(h.node)
            result.outcomes.failed[h.node] = h.reason
        removing = [r.node for r in scaling.remove]
        what = ",".join(removing)
        if removing and not self._stop_before(what, result):
            self.executor.submit(removing, what, functools.partial(act.remove_all, scaling.remove))
        self._start_pool(plan, act, result, scaling=True)

    def _heed_notices(self, plan: PassPlan, act: Actuator, result: PassResult) -> None:
        """Log and count the notices; retire the nodes they doom, at once, in the pass (a spot
        interruption leaves two minutes)."""
        for line in plan.notices.notes:
            log.info("%s", line)
        for kind, n in plan.notices.counts.items():
            self.counters.notices[kind] = self.counters.notices.get(kind, 0) + n
        for r in plan.notices.retire:
            act.retire_doomed(r, result.outcomes)

    def _start_pool(self, plan: PassPlan, act: Actuator, result: PassResult, *, scaling: bool) -> None:
        """Start the warm pool's operations: its terminations (``scaling`` False: they go whether
        or not scaling runs), or its restarts (journalled as starting before the pass ends, so
        the next pass counts them as booting) and its stops; one operation for each kind."""
        pool = plan.pool
        batch, op = (pool.expire, act.retire_all) if not scaling else (pool.stops, act.stop_all)
        if scaling and pool.restarts:
            restarting = [r.node for r in pool.restarts]
            if self._stop_before(",".join(restarting), result):
                return
            begun = []
            for r in pool.restarts:
                log.info("restart %s: %s", r.node, r.reason)
                if act.begin_restart(r.node, r.reason):
                    begun.append(r.node)
            if begun:
                self.executor.submit(begun, ",".join(begun), functools.partial(act.restart_all, begun))
        names = [r.node for r in batch]
        what = ",".join(names)
        if not names or self._stop_before(what, result):
            return
        for r in batch:
            log.info("%s %s: %s", "stop" if scaling else "terminate pooled", r.node, r.reason)
        self.executor.submit(names, what, functools.partial(op, batch))

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

    def _remember_seen(self, snap: Snapshot, records: tuple[Node, ...], *, journal: bool = True) -> tuple[Node, ...]:
        """``records`` with what the pass saw (busy and reachable nodes), as the journal holds
        them once it is written (``journal``: the dry run writes nothing); the journal keeps too
        where the jobs that span hosts run (``elb spend``, where the accounting does not say)."""
        busy = sorted(busy_hosts(snap))
        up = [h.name for h in snap.hosts if h.up]
        if journal:
            self.journal.mark_seen(snap.now, busy=busy, up=up, job_hosts=spanning_jobs(snap.jobs))
        return seen(records, snap.now, busy=busy, up=up)

    def _watching_from(self, now: float) -> float:
        """When this run of elb began to watch the cluster: its first live pass."""
        if self._watching_since is None:
            self._watching_since = now
        return self._watching_since

    def _learn_new_node_slots(self) -> None:
        """Once per start, when policy.slots_per_node is not set: see ``elb.service.nodesize.learn_once``."""
        self.policy, self._ask_slots, learnt = nodesize.learn_once(
            self.config, self.cloud, self.policy, self._ask_slots
        )
        if learnt is not None and learnt.slots is not None:
            self.node_slots = learnt.slots
            self.journal.set_node_size(learnt.slots, learnt.source)  # the commands read it there

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
                f"{self.failed_in_a_row} passes in a row failed; elb is changing nothing until "
                f"{self.scheduler.name} can be read again",
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
        snapshot: ``elb.core.state``), with what it then did."""
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


def run_forever(balancer: Balancer, interval: float, *, clock: Callable[[], float] = time.monotonic) -> None:
    """Run a pass every ``interval`` seconds (first at once), and sooner when the driver's peek
    shows new waiting work (``elb.service.reaction``: every ``policy.peek_interval``, a pass at
    most once a ``policy.peek_gap``), until SIGINT/SIGTERM.

    One pass (or peek) at a time, on one thread; missed looks are coalesced. Node operations run in the background
    (``Executor``), so a pass takes as long as its reads, never a launch or a playbook. A signal
    lets the node operations under way finish (a node half added or half removed is what must
    never be left), starts no other one, and stops; a second signal is passed on to the
    provisioner's cancel event, which stops the running playbooks (the nodes are then failed and
    cleaned up by the actuator or the next start).
    """
    stop = balancer.stopping
    sched = BackgroundScheduler()
    notify = Notifier()
    KeepAlive.watch(sched, notify, interval)  # watchdog keep-alives from their own thread (elb.service.sdnotify)
    first = True
    if balancer.executor.inline:
        balancer.executor = Executor()
    reaction = Reaction.of(balancer.config, balancer.scheduler, interval)
    reaction.announce()

    def one_pass() -> None:
        nonlocal first
        if stop.is_set():
            return
        why = reaction.look(clock())
        if why is None:
            return
        if why != "poll":
            log.info("%s: a pass now", why)
        began = clock()
        if first:  # config read, journal open, scheduler running: systemd may call the service up
            notify.ready(f"polling every {interval:g} s")
            first = False
        result = balancer.run_pass()
        reaction.passed(clock() - began)
        level = logging.INFO if result.ok else logging.WARNING
        log.log(level, "pass: %s", result.summary())
        notify.alive(f"last pass: {'ok' if result.ok else 'failed'}")

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            log.warning("second signal: cancelling running provisioning")
            if isinstance(balancer.provisioner, Cancels):
                balancer.provisioner.cancel()
            return
        log.info("signal %d: stopping after the current step", signum)
        notify.stopping()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sched.add_job(
        one_pass,
        "interval",
        seconds=reaction.cadence.tick,
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
