"""The pure planner of a pass: what a pass read, joined, in; the actions it takes, as data with
their reasons, out. No I/O; time is passed in.

- ``plan_pass``: the whole pass: the repairs (reconcile) and the rules that order them before
  scaling, the policy's plan on the demand, the admin's orders, the warm pool (``elb.core.poolplan``:
  stops instead of removals, restarts instead of launches, pooled nodes past their limits), the
  back-off and the node group tags workers lack (``elb.core.tagplan``), in one call
  that the daemon runs live and its tests run on values;
- ``limit_launches``: the policy's plan with its launches cut by the back-off;
- ``pace_launches``: the launches and warm-pool restarts left, cut by the budget (``elb.core.budget``);
- ``drain_verdict``: after the scheduler disabled it and a fresh read, may the node go on to deregistration?
- ``witness_needed``, ``witness_verdict``: must the node itself be asked before it goes (the
  scheduler showed it busy), and may it go on what it answered?
- ``witness_hold``: is a node kept on its own word lately held out of the drain this pass?
- ``cleanup_verdict``: a node whose deregistration play failed: terminate it, or keep it?
- ``repairs_hold_scaling``: do this pass's repairs make scaling wait for the next pass (a
  fresh read), or have they all failed so often that scaling must go on around them?
- ``scaling_waits``: that answer for a pass's inputs, before the shell gathers what only
  scaling reads (the demand, the back-off);
- ``count_repair_failures``: the failed-passes-in-a-row count of each repair, after a pass.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elb.core.askplan import Answer, AskPlan, Decline, NameHolds, plan_asks
from elb.core.backoff import Backoff, Backoffs
from elb.core.budget import BudgetCheck, Launch, Spend, pace, period_bounds, room
from elb.core.config import Config
from elb.core.demand import DemandSplit, NotDemand
from elb.core.durations import minutes
from elb.core.frozen import maker, quick_init
from elb.core.groups import NodeGroups
from elb.core.interfaces import CloudSettings, Instance, JobProcesses, Notice, Witness
from elb.core.interruptions import Move
from elb.core.model import History, Job, Node, Plan, Removal, Snapshot
from elb.core.noticeplan import NoticePlan, plan_moves, plan_notices
from elb.core.orders import Orders, apply_orders
from elb.core.policy import Policy
from elb.core.policy.grouped import decide_demand
from elb.core.policy.placement import width
from elb.core.poolplan import PoolPlan, group_of, groups_of, plan_pool, pooled_hosts_left_out
from elb.core.reconcile import Repair, RepairKind, repairs_of
from elb.core.scheduler import Ask, Dropped, NamePool
from elb.core.state import ClusterState, JobsChange, JoinIndex, join, worker_slots
from elb.core.tagplan import GroupTag, TagRefusal, UntaggedWorker, describe_tags, untagged_workers

RepairKey = tuple[RepairKind, str]  # a repair of one kind on one node


def limit_launches(plan: Plan, backoffs: Backoffs, now: float, *, group_of: Callable[[str], str]) -> Plan:
    """``plan`` with no more launches than each node group's back-off allows at ``now`` (removals
    untouched); ``group_of``: the group of a launch by its name. The launches keep their order."""
    if not backoffs.active:  # no group's back-off caps anything (``Backoff.cap``)
        return plan
    by_group: dict[str, list[str]] = {}
    for name in plan.add_names:
        by_group.setdefault(group_of(name), []).append(name)
    if not plan.add_names and plan.add:  # a plan that names no node: one group's count
        allowed = backoffs.default.cap(plan.add, now)
        if allowed >= plan.add:
            return plan
        return _held(plan, plan.add_names[:allowed], [held_why(backoffs.default, now, allowed, plan.add)])
    keep: set[str] = set()
    whys: list[str] = []
    for group, names in by_group.items():
        b = backoffs.of(group)
        allowed = b.cap(len(names), now)
        keep.update(names[:allowed])
        if allowed < len(names):
            whys.append(held_why(b, now, allowed, len(names), group=group if len(by_group) > 1 else None))
    if not whys:
        return plan
    return _held(plan, tuple(n for n in plan.add_names if n in keep), whys)


def _held(plan: Plan, names: tuple[str, ...], whys: Sequence[str]) -> Plan:
    """``plan`` launching ``names`` alone, the back-off's ``whys`` said."""
    why = "; ".join(whys)
    allowed = len(names)
    held = f"{plan.add_reason}; " if plan.add_reason and allowed else ""
    return dataclasses.replace(
        plan,
        add=allowed,
        add_names=names,
        add_groups={n: g for n, g in plan.add_groups.items() if n in names},
        add_reason=f"{held}{why}" if allowed else "",
        reason="; ".join(r for r in (plan.reason, why) if r),
    )


def held_why(backoff: Backoff, now: float, allowed: int, wanted: int, *, group: str | None = None) -> str:
    """Why the back-off lets ``allowed`` of ``wanted`` launches (of node group ``group``, named
    when there are several) start at ``now``."""
    of = f" of group {group}" if group is not None else ""
    if allowed == 0 and backoff.probing and backoff.waiting(now) <= 0:
        why = f"launch{of} waits for the probe on its way"
    elif allowed == 0:
        why = f"launch{of} backed off for {minutes(backoff.waiting(now))} more"
    else:
        why = f"launching {allowed} of {wanted}{of} (a probe)"
    streak = (
        f"{backoff.rounds} failed launch round(s)" if backoff.rounds else f"{backoff.throttled} throttled launch(es)"
    )
    return why + f" after {streak} in a row ({backoff.cause}: {backoff.last_failure})"


def pace_launches(  # noqa: PLR0917 (the plan's two parts, the spend, and the pass's facts)
    plan: Plan, pool: PoolPlan, spend: Spend, config: Config, now: float, record_of: Callable[[str], Node | None]
) -> tuple[Plan, PoolPlan, BudgetCheck]:
    """``plan``'s launches and ``pool``'s restarts that the budget lets start (``elb.core.budget.pace``:
    restarts first, then launches, in order), the others held, with the budget's verdict. A
    launch adds its group's price; a restart its price less the volumes its stopped node costs
    already. Removals, stops and expiries are untouched."""
    assert config.policy.budget is not None
    check = pace(config.policy.budget, spend, _launches_wanted(plan, pool, config, record_of), now)
    if not check.held:
        return plan, pool, check
    held = set(check.held)
    check = dataclasses.replace(check, restarts_held=sum(1 for r in pool.restarts if r.node in held))
    pool = dataclasses.replace(pool, restarts=tuple(r for r in pool.restarts if r.node not in held))
    return _without_held(plan, held, check.reason), pool, check


def _launches_wanted(
    plan: Plan, pool: PoolPlan, config: Config, record_of: Callable[[str], Node | None]
) -> list[Launch]:
    """The pass's starts with what each adds to the spend: ``pool``'s restarts first (their group's
    price less the volumes already paid), then ``plan``'s launches (their group's price)."""
    groups = groups_of(config)
    wanted: list[Launch] = []
    for r in pool.restarts:
        record = record_of(r.node)
        g = group_of(record, groups) if record is not None else groups.groups[0]
        wanted.append(Launch(r.node, (g.price_per_hour or 0.0) - g.warm_pool.volume_price_per_hour))
    for name in plan.add_names:
        g = groups.get(plan.add_groups.get(name, "")) or groups.groups[0]
        wanted.append(Launch(name, g.price_per_hour or 0.0))
    return wanted


def _without_held(plan: Plan, held: set[str], why: str) -> Plan:
    """``plan`` without the launches the budget held, ``why`` said in its reasons."""
    names = tuple(n for n in plan.add_names if n not in held)
    kept = f"{plan.add_reason}; " if plan.add_reason and names else ""
    return dataclasses.replace(
        plan,
        add=len(names),
        add_names=names,
        add_groups=MappingProxyType({n: g for n, g in plan.add_groups.items() if n in names}),
        add_reason=f"{kept}{why}" if names else "",
        reason="; ".join(r for r in (plan.reason, why) if r),
    )


def within_budget(demand: DemandSplit, nodes: Sequence[Node], spend: Spend, config: Config, now: float) -> DemandSplit:
    """``demand`` without the wide jobs that need more nodes than the budget lets their group
    have (its nodes up, and the more nodes ``elb.core.budget.room`` affords): they are not demand
    this pass (not yet, at the latest when the period ends), so no node is launched for them,
    none of a few nodes that could never start them, and no idle node is kept for them."""
    budget = config.policy.budget
    assert budget is not None
    groups = groups_of(config)
    first = groups.groups[0].name
    prices = {g.name: g.price_per_hour or 0.0 for g in groups.groups}
    more = room(budget, spend, prices, now)
    up: dict[str, int] = dict.fromkeys(prices, 0)
    for n in nodes:
        if n.state.alive:
            up[group_of(n, groups).name] += 1
    _, end = period_bounds(budget, now)
    held: list[NotDemand] = []
    for job in demand.snapshot.pending:
        name = demand.group_of.get(job, first)
        g = groups.get(name) or groups.groups[0]
        need = width(job.slots, g.slots)
        have = up.get(g.name, 0) + more.get(g.name, 0)
        if need > have:
            why = f"needs {need} nodes of group {g.name}; the budget lets it have {have} this {budget.period}"
            held.append(NotDemand(job, why, end))
    if not held:
        return demand
    out = {id(h.job) for h in held}
    snapshot = dataclasses.replace(demand.snapshot, jobs=tuple(j for j in demand.snapshot.jobs if id(j) not in out))
    return dataclasses.replace(demand, snapshot=snapshot, not_demand=(*demand.not_demand, *held))


class Drain(enum.StrEnum):
    GO = "go"  # nothing on the node: deregister it
    KEEP = "keep"  # a job landed, or a slot is reserved: re-enable it, it stays ready


@dataclass(frozen=True, slots=True)
class DrainVerdict:
    verdict: Drain
    reason: str


def drain_verdict(jobs: Sequence[Job], reserved_slots: int) -> DrainVerdict:
    """What a disabled node's fresh read says: anything there keeps the node."""
    if jobs:
        ids = ", ".join(str(j.job_id) for j in jobs[:5])
        return DrainVerdict(Drain.KEEP, f"job {ids} landed")
    if reserved_slots:
        return DrainVerdict(Drain.KEEP, f"{reserved_slots} slots reserved")
    return DrainVerdict(Drain.GO, "no job, no reservation")


def witness_needed(node: Node) -> bool:
    """Whether ``node`` must be asked itself (``Provisioner.probe_jobs``) before it is removed or
    stopped: the scheduler showed it busy at a read elb trusted, i.e. a whole read of some pass
    saw a job or a reservation on it (the journal's ``last_busy_at`` is set).

    No window limits it: a job that ended and a read that lost it look the same from the
    scheduler, and a scheduler that lost its spool (or restarted from an old state) may say
    "nothing there" for as long as it runs. A node no read ever showed busy is removed on the
    scheduler's word alone."""
    return node.last_busy_at is not None


def witness_verdict(name: str, witness: Witness | None, *, ordered: bool = False) -> DrainVerdict:
    """What the node's own answer (``witness``; None: no answer for it) says of removing a node
    the scheduler showed busy and now shows idle (``witness_needed``).

    Job processes there: the two witnesses disagree and the node is kept (elb never kills a
    job). None there: it goes. Not asked (SSH failed, no host key held, time-out): silence is no
    witness for "idle", so it is kept, unless an admin ordered its removal (``ordered``: ``elb
    remove NODE``); a node whose instance is gone or stopped is never asked (nothing runs there).
    """
    if witness is not None and witness.answer is JobProcesses.NONE:
        return DrainVerdict(Drain.GO, "the node itself runs no job process")
    if witness is not None and witness.answer is JobProcesses.FOUND:
        found = f" ({witness.detail})" if witness.detail else ""
        return DrainVerdict(
            Drain.KEEP,
            f"the scheduler lists no job on {name} but the node runs job processes{found}; the two disagree, "
            "so it is kept (elb never kills a job)",
        )
    why = witness.detail if witness is not None and witness.detail else "no answer"
    if ordered:
        return DrainVerdict(Drain.GO, f"the node could not be asked ({why}); removed as an admin ordered")
    return DrainVerdict(
        Drain.KEEP,
        f"the scheduler showed {name} busy and now lists nothing there, and the node could not be asked "
        f"whether job processes run there ({why}); kept until it answers (elb remove {name} removes it anyway)",
    )


WITNESS_HOLD = 30 * 60.0  # seconds a node that said it runs job processes is not drained again
WITNESS_SILENT_HOLD = 10 * 60.0  # seconds a node that could not be asked is not drained again


def witness_hold(node: Node, now: float, *, ordered: bool = False) -> str | None:
    """Why ``node`` is not drained at ``now``, or None when it may be: a node kept on its own
    word (``Node.witness_keep``, journalled when ``witness_verdict`` kept it) is held out of the
    drain, so that each pass does not disable it, find it busy and enable it again (a flapping
    queue turns away the jobs the scheduler places there) nor ask it again.

    The hold lasts ``WITNESS_HOLD`` seconds after a node said it runs job processes,
    ``WITNESS_SILENT_HOLD`` after it could not be asked (silence may end any time: an sshd
    restarted, a network back), and ends at once when the scheduler's view of it changes (a read
    shows a job or a reservation there: its ``last_busy_at`` moves); the node is then asked
    again. An admin's removal order (``ordered``) ends the hold of a node that could not be
    asked (``witness_verdict`` lets it go on the order), never that of one that runs job processes."""
    keep = node.witness_keep
    if keep is None or node.last_busy_at != keep.busy_at or (ordered and not keep.found):
        return None
    hold = WITNESS_HOLD if keep.found else WITNESS_SILENT_HOLD
    left = min(hold, keep.at + hold - now)  # a keep journalled after ``now`` is held no longer than ``hold``
    if left <= 0:
        return None
    return f"{keep.why}; not drained again for {minutes(left)} unless the scheduler shows it busy again"


class Cleanup(enum.StrEnum):
    TERMINATE = "terminate"  # nothing left to deregister: terminate the instance
    RETRY = "retry"  # the scheduler lists it (or can't be read): keep it draining, alarm, try again next pass


def cleanup_verdict(node: Node, listed: bool | None, failure: str, scheduler: str) -> tuple[Cleanup, str]:
    """A node whose deregistration play failed (``failure``). ``listed``: whether the scheduler
    still lists it, None if it could not be read.

    A node that never became ready and that the scheduler does not list can run no job: its instance is
    terminated at once, and the (master-side) deregistration is retried each pass until what the
    failed play left on the master (a hosts line, an export) is gone. Any other node is kept
    draining, and billed, with an ALARM every pass until the play goes through: a node the scheduler lists
    is never terminated.
    """
    if node.ready_at is None and listed is False:
        why = (
            f"deregistration failed ({failure}); never ready and {scheduler} does not list it: instance terminated, "
            "deregistration retried each pass"
        )
        return Cleanup.TERMINATE, why
    where = f"{scheduler} cannot be read" if listed is None else f"{scheduler} lists it" if listed else "it was ready"
    return Cleanup.RETRY, f"deregistration failed ({failure}); kept draining and retried each pass ({where})"


@quick_init
@dataclass(frozen=True, slots=True)
class RepairHold:
    """Whether scaling waits for the next pass, and the repairs stuck for ``alarm`` passes or
    more (an ALARM when every repair is stuck: scaling then goes on around them)."""

    scaling_waits: bool
    stuck: tuple[Repair, ...]


_NO_HOLD = RepairHold(False, ())  # no repair: scaling goes on


def repairs_hold_scaling(repairs: Sequence[Repair], fails: Mapping[RepairKey, int], alarm: int) -> RepairHold:
    """Repairs change the cluster, so scaling decides again next pass on a fresh read; unless
    every one of them has failed ``alarm`` passes in a row: a repair that never succeeds must not
    hold growth (or shrinking) for ever. No repair: scaling goes on at once."""
    if not repairs:
        return _NO_HOLD
    stuck = tuple(r for r in repairs if fails.get((r.kind, r.node), 0) >= alarm)
    return RepairHold(len(stuck) < len(repairs), stuck if len(stuck) == len(repairs) else ())


def count_repair_failures(
    before: Mapping[RepairKey, int], repairs: Sequence[Repair], failed: Collection[str], in_flight: Collection[str]
) -> dict[RepairKey, int]:
    """Failed passes in a row per repair after a pass that started ``repairs``: one more for
    each whose node failed, back to none for each that went through; a repair still in flight
    keeps its count (its outcome is not known yet); repairs no longer planned are forgotten."""
    counts = {k: n for k, n in before.items() if k[1] in in_flight}
    for r in repairs:
        key = (r.kind, r.node)
        counts[key] = before.get(key, 0) + 1 if r.node in failed else 0
    return {k: n for k, n in counts.items() if n}


@quick_init
@dataclass(frozen=True, slots=True)
class PassInputs:
    """Everything one pass read, as values: the planner's whole input besides the configuration,
    the policy and ``now``."""

    snapshot: Snapshot  # the scheduler's jobs and hosts, checked whole
    nodes: tuple[Node, ...]  # the journal's records, gone ones included
    instances: tuple[Instance, ...]  # the cloud's workers
    # What only scaling reads, gathered when it goes on (``scaling_waits``): the waiting jobs that
    # are demand (None: not known, ``demand_error``, or not gathered) and the launch back-off
    # (None: not gathered; scaling then does not go on).
    demand: DemandSplit | None
    history: History
    orders: Orders
    backoff: Backoffs | None  # each node group's
    scheduler: str  # the scheduler's name, in the reasons
    cloud: CloudSettings  # what the pass reads of the cloud's settings (``elb.core.drivers.cloud_settings``)
    in_flight: frozenset[str] = frozenset()  # nodes with an operation of elb under way
    repair_fails: Mapping[RepairKey, int] = field(default_factory=dict)  # failed passes in a row
    watched_since: float | None = None  # this run's first live pass (``reconcile.lost_for``)
    demand_error: str = ""  # why the demand is not known (the site's configuration unreadable)
    template_versions: Mapping[str, str] = field(default_factory=dict)  # each group's launch template version now
    # What the scheduler asked by name (None: it never names nodes; elb sizes the demand), the
    # asks the read dropped, and nodes of elb's it shows gone (``elb.core.scheduler.SchedulerRead``).
    asks: tuple[Ask, ...] | None = None
    dropped: tuple[Dropped, ...] = ()
    gone: Mapping[str, str] = field(default_factory=dict)
    names: NamePool | None = None  # the names it may ask for next (``HoldsNames``); None: not read
    notices: tuple[Notice, ...] = ()  # the cloud's notices since the last pass
    interrupted: tuple[tuple[int, int, bool], ...] = ()  # (job, spot interruptions, bound already)
    index: JoinIndex | None = None  # what the simulator keeps of the joined state (``elb.core.state.JoinIndex``)
    # How the snapshot's jobs differ from the read before's (``SchedulerRead.change``; not compared).
    change: JobsChange | None = field(default=None, compare=False, repr=False)
    # The budget's period so far and the rate spent now (``elb.core.spend.read_spend``), gathered with
    # the demand when ``policy.budget`` is set; None: no budget (launches are not paced).
    spend: Spend | None = None
    # The cloud can tag a worker with its node group afterwards (``TagsGroups``) and ``instances``
    # carry their tags as the cloud listed them: the workers that lack it are tagged.
    tags_groups: bool = False
    tags_refused: TagRefusal | None = None  # the cloud's last refusal to tag, journalled (``tagplan.tags_due``)


@quick_init
@dataclass(frozen=True, slots=True)
class PassPlan:
    """The actions of one pass, each with its reason, in the order the pass starts them: the
    notices' retirements, repairs, the workers' node group tags; scaling (``scaling``) only when
    the repairs let it go on (``scaling_note`` says why not); removal orders whose node is gone are done
    (``orders_done``); the warm pool's actions; the scheduler's asks answered or declined; jobs
    bound to on-demand nodes."""

    repairs: tuple[Repair, ...] = ()  # to start, in order
    kept: tuple[Repair, ...] = ()  # lost nodes kept because the scheduler lists work on them (an admin must look)
    stuck: tuple[Repair, ...] = ()  # every repair failed ``failed_passes_alarm`` passes or more
    scaling: Plan | None = None  # None: no scaling this pass
    scaling_note: str = ""  # why there is no scaling this pass
    wanted: int = 0  # launches the policy (or the scheduler) asked for before the back-off
    orders_done: tuple[str, ...] = ()  # removal orders to withdraw: their nodes are gone
    pool: PoolPlan = field(
        default_factory=PoolPlan
    )  # the warm pool's stops, restarts and terminations (``elb.core.poolplan``)
    notices: NoticePlan = field(default_factory=NoticePlan)
    moves: tuple[Move, ...] = ()  # jobs to bind to on-demand nodes
    declines: tuple[Decline, ...] = ()  # nodes the scheduler asked for that elb gives back
    waiting: tuple[Decline, ...] = ()  # asks the back-off holds, left open (launched when it lets them)
    answers: tuple[Answer, ...] = ()  # the scheduler's asks elb is done with
    names: NameHolds = field(default_factory=NameHolds)  # names kept from (or opened to) its next asks
    budget: BudgetCheck | None = None  # the budget's verdict on the launches (``policy.budget``)
    held: tuple[Removal, ...] = ()  # removals not planned: nodes kept on their own word lately (``witness_hold``)
    group_tags: tuple[GroupTag, ...] = ()  # workers whose instances get their node group's tag (``elb.core.tagplan``)
    tags_waiting: tuple[UntaggedWorker, ...] = ()  # workers whose tag waits out the cloud's refusal (``tags_due``)

    @property
    def launches_held(self) -> int:
        """Launches the back-off held (the budget's: ``budget.held``)."""
        by_budget = len(self.budget.held) - self.budget.restarts_held if self.budget is not None else 0
        return self.wanted - (self.scaling.add if self.scaling is not None else 0) - by_budget

    def describe(self) -> list[str]:
        """Plain-words lines, in the order the pass starts them (``elb once --dry-run``)."""
        lines = [f"retire {r.node}: {r.cloud} {r.kind.value} notice: {r.reason}" for r in self.notices.retire]
        lines += [f"repair ({r.kind.value}) {r.node}: {r.reason}" for r in self.repairs]
        lines += describe_tags(self.group_tags)
        lines += [f"{u.tag.node}: {u.describe()}" for u in self.tags_waiting]
        lines += [f"kept {r.node}: {r.reason}" for r in self.kept]
        lines += [
            f"ALARM: {r.kind.value} {r.node} failed pass after pass; scaling goes on around it" for r in self.stuck
        ]
        lines += [f"removal order for {name} done: the node is gone" for name in self.orders_done]
        lines += self.pool.describe()
        if self.scaling is None:
            lines.append(f"no scaling this pass: {self.scaling_note}")
        else:
            lines += self.scaling.describe()
        lines += [f"kept {r.node}: {r.reason}" for r in self.held]
        if self.budget is not None:
            lines.append(self.budget.describe())
        lines += [f"give back {d.node}: {d.reason}" for d in self.declines]
        lines += [f"wait {d.node}: {d.reason}" for d in self.waiting]
        lines += self.names.describe()
        lines += [f"bind job {m.job} to on-demand nodes: {m.reason}" for m in self.moves]
        return lines


_pass_plan = maker(PassPlan)  # each pass makes one by keyword (``elb.core.frozen.maker``)


def plan_pass(
    inputs: PassInputs, config: Config, policy: Policy, now: float, state: ClusterState | None = None
) -> PassPlan:
    """One pass's actions. The notices' retirements first; then repairs (``elb.core.reconcile``),
    none on a node with an operation in flight; while any is not stuck, scaling waits for the
    next pass (it decides on the cluster as the repairs leave it). Scaling is the policy's plan
    on the demand (with a scheduler that names its nodes, the nodes it asked for, and the ones
    it is done with removed), the admin's orders applied, the warm pool's stops and restarts,
    and the launches cut by the back-off; it never removes a node under repair or with an
    operation in flight. ``state``: what ``cluster_state`` joined of these inputs' read, when the
    shell joined it already (``scaling_waits``): a pass joins its read once."""
    state = cluster_state(inputs, now) if state is None else state
    groups = groups_of(config)
    asks = _plan_asks(inputs, config, now, down=state.down)
    base, hold, around = _regardless_of_scaling(inputs, state, config, groups=groups, asks=asks, now=now)
    waits = _why_scaling_waits(inputs, hold)
    if waits:
        return base.plan(scaling_note=waits)
    return _with_scaling(base, inputs, state, config, policy, groups=groups, asks=asks, around=around, now=now)


@quick_init
@dataclass(frozen=True, slots=True)
class _Regardless:
    """The parts of a pass's plan that go whether or not scaling runs (``PassPlan``'s fields of
    those names; ``pool``: the warm pool's expired nodes alone), made into the plan once with
    scaling's parts (a plan made and then copied with them costs three times as much)."""

    repairs: tuple[Repair, ...]
    kept: tuple[Repair, ...]
    stuck: tuple[Repair, ...]
    orders_done: tuple[str, ...]
    pool: PoolPlan
    notices: NoticePlan
    moves: tuple[Move, ...]
    answers: tuple[Answer, ...]
    names: NameHolds
    group_tags: tuple[GroupTag, ...]
    tags_waiting: tuple[UntaggedWorker, ...]

    def plan(
        self,
        *,
        scaling: Plan | None = None,
        scaling_note: str = "",
        wanted: int = 0,
        pool: PoolPlan | None = None,
        declines: tuple[Decline, ...] = (),
        waiting: tuple[Decline, ...] = (),
        budget: BudgetCheck | None = None,
        held: tuple[Removal, ...] = (),
    ) -> PassPlan:
        """The pass's plan: these parts, with scaling's (``pool``: the warm pool's plan with
        scaling, which replaces this one's)."""
        return _pass_plan(
            repairs=self.repairs,
            kept=self.kept,
            stuck=self.stuck,
            scaling=scaling,
            scaling_note=scaling_note,
            wanted=wanted,
            orders_done=self.orders_done,
            pool=self.pool if pool is None else pool,
            notices=self.notices,
            moves=self.moves,
            declines=declines,
            waiting=waiting,
            answers=self.answers,
            names=self.names,
            budget=budget,
            held=held,
            group_tags=self.group_tags,
            tags_waiting=self.tags_waiting,
        )


_regardless = maker(_Regardless)


@quick_init
@dataclass(frozen=True, slots=True)
class _Around:
    """What scaling must leave alone or treat apart: the nodes under repair or with an operation
    under way (``busy``), whether warm pools are in play (``pools``) and then the nodes the cloud
    dooms (``doomed``; empty without warm pools: nothing else reads them)."""

    busy: frozenset[str]
    doomed: frozenset[str]
    pools: bool


def _regardless_of_scaling(
    inputs: PassInputs, state: ClusterState, config: Config, *, groups: NodeGroups, asks: AskPlan, now: float
) -> tuple[_Regardless, RepairHold, _Around]:
    """The part of a pass that goes whether or not scaling runs: the notices' retirements, the
    repairs, the orders done, the warm pool's expired nodes, the jobs to move, the asks'
    answers, the workers' node group tags."""
    notices = (
        plan_notices(
            inputs.notices,
            inputs.instances,
            inputs.nodes,
            inputs.orders,
            snapshot=inputs.snapshot,
            interrupted=inputs.interrupted,
            allowed=config.policy.spot_interruptions_allowed,
            cloud=inputs.cloud.name,
        )
        if inputs.notices
        else _NO_NOTICES
    )
    todo, kept, hold = _repairs(inputs, state, config, abandon=asks.abandon)
    done = _orders_done(inputs.orders, state) if inputs.orders.remove else ()
    # A node under repair, or with an operation under way, is left to it.
    busy = inputs.in_flight | {r.node for r in todo} if todo else inputs.in_flight
    # Pooled nodes past their limits go whether or not scaling runs this pass.
    pools = bool(state.pooled) or any(g.warm_pool.enabled for g in groups.groups)
    # Only the warm pool reads the doomed nodes (never to be pooled).
    doomed = _doomed(inputs.orders, notices) if pools else frozenset()
    _, expiring = (
        plan_pool(Plan(), state.pooled, config, now, in_flight=busy, template_versions=inputs.template_versions)
        if pools
        else (None, _NO_POOL)
    )
    moved = (
        plan_moves(inputs.interrupted, config.policy.spot_interruptions_allowed, inputs.snapshot)
        if inputs.interrupted
        else ()
    )
    untagged = untagged_workers(state, groups, inputs.tags_refused, state.now) if inputs.tags_groups else ()
    base = _regardless(
        repairs=todo,
        kept=kept,
        stuck=hold.stuck,
        orders_done=done,
        pool=expiring,
        notices=notices,
        moves=moved,
        answers=asks.answers,
        names=asks.holds,
        group_tags=tuple(u.tag for u in untagged if u.due) if untagged else (),
        tags_waiting=tuple(u for u in untagged if not u.due) if untagged else (),
    )
    return base, hold, _Around(frozenset(busy), doomed, pools)


def _doomed(orders: Orders, notices: NoticePlan) -> frozenset[str]:
    """The nodes the cloud is taking back: by a removal order its notice gave, or a notice's
    retirement this pass."""
    if notices.retire:
        return orders.doomed | {r.node for r in notices.retire}
    return orders.doomed


def _why_scaling_waits(inputs: PassInputs, hold: RepairHold) -> str:
    """Why scaling does not run this pass ("": it runs)."""
    if hold.scaling_waits:
        return "reconciling; scaling waits for the next pass"
    if inputs.demand is None:
        return inputs.demand_error or "the demand is not known"
    if inputs.backoff is None:
        return "the launch back-off is not known"
    return ""


def _with_scaling(
    base: _Regardless,
    inputs: PassInputs,
    state: ClusterState,
    config: Config,
    policy: Policy,
    *,
    groups: NodeGroups,
    asks: AskPlan,
    around: _Around,
    now: float,
) -> PassPlan:
    """``base`` with scaling: the policy's plan on the demand (paced by the budget first), the
    scheduler's named asks, nothing removed that is busy, the warm pool's stops and restarts,
    the launches cut by the back-off, then paced by the budget."""
    assert inputs.demand is not None and inputs.backoff is not None  # _why_scaling_waits
    planned_on = _paced_demand(inputs, config, now)
    plan = scale(planned_on, policy, now, state, due_lead=config.policy.boot_time)
    declines = list(asks.declines)
    if inputs.asks is not None:
        plan, held = _named(plan, asks, inputs.orders)
        declines += held
    if plan.remove and any(r.node in around.busy for r in plan.remove):
        plan = dataclasses.replace(plan, remove=tuple(r for r in plan.remove if r.node not in around.busy))
    plan, held_out = _witness_held(plan, state, inputs.orders, now) if plan.remove else (plan, ())
    if plan.remove and inputs.backoff.active:
        plan = kept_while_held(plan, inputs.backoff, state, config, now, ordered=inputs.orders.by_admin)
    # Removals that are stops and launches that are restarts (a group's warm pool); the back-off
    # holds new launches only. A node the cloud is taking back is never pooled.
    plan, pool = (
        plan_pool(
            plan,
            state.pooled,
            config,
            now,
            in_flight=around.busy,
            template_versions=inputs.template_versions,
            doomed=around.doomed,
            named=inputs.asks is not None,
            record_of=state.record,
        )
        if around.pools
        else (plan, _NO_POOL)
    )
    wanted = plan.add
    asked = {a.node: a for a in asks.launch} if inputs.asks is not None else {}
    since = {name: a.since for name, a in asked.items()} if asked else {}
    waiting: list[Decline] = []
    if plan.add:
        # A node launched when the back-off ends boots and is provisioned before its ask's deadline.
        lead = inputs.cloud.boot_timeout + config.provision.timeout
        plan, held_back, waiting = _backed_off(plan, inputs.backoff, groups, asked, now, lead=lead)
        declines += held_back
    plan, pool, budget, held_by_budget = _budgeted(plan, pool, inputs, planned_on, config, now, state, since)
    declines += held_by_budget
    return base.plan(
        scaling=plan,
        wanted=wanted,
        pool=pool,
        declines=tuple(declines),
        waiting=tuple(waiting),
        budget=budget,
        held=held_out,
    )


def _witness_held(plan: Plan, state: ClusterState, orders: Orders, now: float) -> tuple[Plan, tuple[Removal, ...]]:
    """``plan`` without the removals (and so the stops) of nodes kept on their own word lately
    (``witness_hold``), and those nodes, each with why it is held."""
    held: list[Removal] = []
    for r in plan.remove:
        record = state.record(r.node)
        if record is None or record.witness_keep is None:
            continue
        why = witness_hold(record, now, ordered=r.node in orders.by_admin)
        if why is not None:
            held.append(Removal(r.node, why))
    if not held:
        return plan, ()
    out = {r.node for r in held}
    return dataclasses.replace(plan, remove=tuple(r for r in plan.remove if r.node not in out)), tuple(held)


def _paced_demand(inputs: PassInputs, config: Config, now: float) -> PassInputs:
    """``inputs`` with the demand the budget lets the policy plan on (``within_budget``: the jobs
    too wide for it left out); ``inputs`` itself with no budget or nothing waiting."""
    assert inputs.demand is not None
    if config.policy.budget is None or inputs.spend is None or not inputs.demand.snapshot.pending:
        return inputs
    return dataclasses.replace(inputs, demand=within_budget(inputs.demand, inputs.nodes, inputs.spend, config, now))


def _budgeted(  # noqa: PLR0917 (the plan's two parts, the demand before and after pacing, the pass's facts)
    plan: Plan,
    pool: PoolPlan,
    inputs: PassInputs,
    planned_on: PassInputs,
    config: Config,
    now: float,
    state: ClusterState,
    since: Mapping[str, float],
) -> tuple[Plan, PoolPlan, BudgetCheck | None, list[Decline]]:
    """The launches and restarts the budget lets start (``pace_launches``), its verdict (with the
    jobs too wide for it counted), and the scheduler's asks it held (``since``: when each was
    asked for), given back; everything as it was with no budget."""
    if config.policy.budget is None or inputs.spend is None:
        return plan, pool, None, []
    plan, pool, budget = pace_launches(plan, pool, inputs.spend, config, now, state.record)
    if planned_on.demand is not None and inputs.demand is not None and inputs.demand is not planned_on.demand:
        budget = dataclasses.replace(budget, too_wide=len(planned_on.demand.not_demand) - len(inputs.demand.not_demand))
    return plan, pool, budget, [Decline(name, since[name], budget.reason) for name in budget.held if name in since]


def kept_for_due(plan: Plan, demand: DemandSplit, state: ClusterState, *, lead: float, now: float) -> Plan:
    """``plan`` without the idle removals that jobs due within ``lead`` seconds need: a job the
    scheduler holds until a known time (``NotDemand.until``: ``qsub -a``, Slurm's begin time)
    that comes within a boot of now. Keeping a node that long costs at most a boot; removing
    it and launching another for the job costs a boot and the job's wait. A job due for longer
    than a boot that the scheduler has not started (Slurm still shows its begin time passed) is
    no reason: it waits for something else, and a node kept for it could be kept for ever. The
    nodes kept are enough for the due jobs' slots, in the plan's order; the plan's reason says
    which and why."""
    due = [nd for nd in demand.not_demand if nd.until is not None and now - lead <= nd.until <= now + lead]
    if not due:
        return plan
    need = sum(nd.job.slots * max(1, nd.job.tasks) for nd in due)
    kept: list[str] = []
    removals: list[Removal] = []
    for r in plan.remove:
        if need <= 0:
            removals.append(r)
            continue
        need -= worker_slots(state.record(r.node), state.host(r.node), otherwise=1)
        kept.append(r.node)
    if not kept:
        return plan
    soonest = min(due, key=lambda nd: nd.until or 0.0)
    when = max(0.0, (soonest.until or now) - now)
    jobs = ", ".join(str(nd.job.job_id) for nd in due[:5]) + (" ..." if len(due) > 5 else "")
    why = (
        f"kept {', '.join(kept)} idle: job(s) {jobs} may start within {minutes(when)} "
        f"(not yet: {soonest.reason}), sooner than a new node boots"
    )
    return _kept(plan, removals, why)


def _kept(plan: Plan, removals: Sequence[Removal], why: str) -> Plan:
    """``plan`` with only ``removals`` left, ``why`` the others are kept added to its reason."""
    return dataclasses.replace(plan, remove=tuple(removals), reason=f"{plan.reason}; {why}" if plan.reason else why)


def idle_kept(config: Config) -> float:
    """The longest elb keeps an idle node: to the end of its paid period (``billing: hour``), else
    the shrink rule's limit (``idle_time`` with ``shrink: timer``, or ``idle_factor`` boot times)
    and ``backoff.max`` more while its group's launches are held (``kept_while_held``)."""
    p = config.policy
    if p.billing == "hour":
        return p.billing_period
    return p.idle_limit + config.backoff.max


def kept_while_held(
    plan: Plan, backoffs: Backoffs, state: ClusterState, config: Config, now: float, *, ordered: Collection[str] = ()
) -> Plan:
    """``plan`` without the idle removals of nodes whose group cannot launch now: its back-off
    waits, or its probe is on its way. With per-second billing an idle node goes when keeping it
    is expected to cost more than a relaunch; while the group's launches are held, a relaunch
    costs the hold too, and a job that comes meanwhile waits for all of it (the cloud out of
    capacity, a bad image). Such a node is kept until it has idled ``backoff.max`` past the
    shrink rule's own limit (``idle_time``, or ``idle_factor`` boot times), so a hold that lasts
    costs each idle node at most that. Per-period billing keeps an idle node to the end of its
    paid period anyway: nothing is kept here. A removal the admin ordered, or of a node that is
    not idle, is never kept; the plan's reason says which nodes are kept and why."""
    if config.policy.billing == "hour":
        return plan
    limit = idle_kept(config)
    groups = groups_of(config)
    kept: list[str] = []
    why: dict[str, str] = {}
    removals: list[Removal] = []
    for r in plan.remove:
        managed = state.node(r.node)
        since = managed.idle_since if managed is not None and r.node not in ordered else None
        if managed is None or since is None or now - since >= limit:
            removals.append(r)
            continue
        group = group_of(managed.record, groups).name
        backoff = backoffs.of(group)
        if backoff.waiting(now) <= 0 and not backoff.probing:
            removals.append(r)
            continue
        kept.append(r.node)
        if group not in why:
            why[group] = held_why(backoff, now, 0, 1, group=group if len(groups.groups) > 1 else None)
    if not kept:
        return plan
    text = f"kept {', '.join(kept)} idle while launches are held ({'; '.join(why.values())})"
    return _kept(plan, removals, text)


def _backed_off(
    plan: Plan, backoffs: Backoffs, groups: NodeGroups, asked: Mapping[str, Ask], now: float, *, lead: float
) -> tuple[Plan, list[Decline], list[Decline]]:
    """``plan``'s launches cut by each node group's back-off; the scheduler's asks for the
    launches cut either given back with why, or, when the scheduler keeps waiting for them long
    enough (``Ask.deadline``) for the back-off to end and a node to boot and be provisioned
    (``lead``: the cloud's ``boot_timeout`` and ``provision.timeout``) before it
    gives up by itself, left open (the third list): launched when the back-off lets them. A
    give-back makes the scheduler put the job back in line (Slurm holds a requeued job for a
    while); an ask left open keeps its place."""

    def launch_group(name: str) -> str:
        g = plan.add_groups.get(name)
        return ((groups.get(g) if g is not None else None) or groups.groups[0]).name

    limited = limit_launches(plan, backoffs, now, group_of=launch_group)
    if not asked or len(limited.add_names) == len(plan.add_names):
        return limited, [], []  # no ask was held back: nothing to give back or leave open
    launching = set(limited.add_names)
    wanted = Counter(launch_group(n) for n in plan.add_names)
    allowed = Counter(launch_group(n) for n in limited.add_names)
    declines: list[Decline] = []
    waiting: list[Decline] = []
    for name in plan.add_names:
        ask = asked.get(name)
        if name in launching or ask is None:
            continue
        g = launch_group(name)
        backoff = backoffs.of(g)
        why = held_why(backoff, now, allowed[g], wanted[g])
        if ask.deadline is not None and now + backoff.waiting(now) + lead <= ask.deadline:
            waiting.append(Decline(name, ask.since, f"{why}; the ask stays open until the back-off lets it launch"))
        else:
            declines.append(Decline(name, ask.since, why))
    return limited, declines, waiting


_NO_NOTICES = NoticePlan()
_NO_POOL = PoolPlan()
_NO_ASKS = AskPlan()


def _plan_asks(inputs: PassInputs, config: Config, now: float, *, down: Collection[str]) -> AskPlan:
    """The scheduler's asks as actions (``elb.core.askplan``); nothing when it never names nodes.
    ``down``: the nodes that are down, which take no room under ``max_nodes``."""
    if inputs.asks is None:
        if not inputs.dropped:
            return _NO_ASKS
        return AskPlan(answers=tuple(Answer(d.ask.node, d.ask.since, f"dropped: {d.reason}") for d in inputs.dropped))
    groups = groups_of(config)
    budget, names, afford = config.policy.budget, inputs.names, None
    if budget is not None and names is not None:
        if inputs.spend is None:  # what the budget affords is not known: the names stay as they are
            names = None
        else:
            afford = room(budget, inputs.spend, {g.name: g.price_per_hour or 0.0 for g in groups.groups}, now)
    return plan_asks(
        inputs.asks,
        inputs.dropped,
        inputs.gone,
        inputs.nodes,
        inputs.in_flight,
        max_nodes=config.policy.max_nodes,
        group_max={g.name: groups.max_nodes_of(g) for g in groups.groups},
        first_group=groups.groups[0].name,
        master=config.cluster.master,
        now=now,
        names=names,
        afford=afford,
        paused=_pause_reason(inputs.orders),
        down=down,
    )


def _pause_reason(orders: Orders) -> str:
    """Why scaling is paused ("": it is not)."""
    return f"scaling paused by an admin ({orders.pause_reason or 'no reason given'})" if orders.paused else ""


def _named(plan: Plan, asks: AskPlan, orders: Orders) -> tuple[Plan, list[Decline]]:
    """The policy's plan with the scheduler's named nodes as its launches (the policy's own count
    is not used: the scheduler chose), and the nodes it released as removals (not subject to the
    admin's pause or keep: the scheduler is done with them). Paused, every launch is declined."""
    removals = list(plan.remove)
    planned = {r.node for r in removals}
    removals += [r for r in asks.removals if r.node not in planned]
    if orders.paused:
        why = _pause_reason(orders)
        held = [Decline(a.node, a.since, why) for a in asks.launch]
        return dataclasses.replace(
            plan, add=0, add_names=(), add_groups={}, add_reason="", remove=tuple(removals)
        ), held
    names = tuple(a.node for a in asks.launch)
    detail = {a.node: a.detail for a in asks.launch if a.detail}
    why = "the scheduler asked for " + ", ".join(f"{n} ({detail[n]})" if n in detail else n for n in names)
    named = dataclasses.replace(
        plan,
        add=len(names),
        add_names=names,
        add_groups=MappingProxyType(dict(asks.groups)),
        add_reason=why if names else "",
        remove=tuple(removals),
    )
    return named, []


def scaling_waits(inputs: PassInputs, config: Config, now: float, state: ClusterState | None = None) -> bool:
    """Whether this pass's repairs hold scaling (``plan_pass`` then plans no scaling): the shell
    need not gather what only scaling reads (``PassInputs.demand`` and ``backoff``). ``state``:
    ``cluster_state(inputs, now)``, joined by the shell to give ``plan_pass`` too."""
    joined = cluster_state(inputs, now) if state is None else state
    return _repairs(inputs, joined, config)[2].scaling_waits


def cluster_state(inputs: PassInputs, now: float) -> ClusterState:
    """What the pass read, joined once (``elb.core.state.join``): the journal's records (gone ones
    included), the cloud's workers and the scheduler's snapshot, with the operations in flight."""
    return join(
        inputs.nodes,
        inputs.instances,
        inputs.snapshot,
        inputs.in_flight,
        include_gone=True,
        now=now,
        index=inputs.index,
        change=inputs.change,
    )


def _repairs(
    inputs: PassInputs, state: ClusterState, config: Config, *, abandon: Sequence[Removal] = ()
) -> tuple[tuple[Repair, ...], tuple[Repair, ...], RepairHold]:
    """The repairs to start (none on a node with an operation in flight), the lost nodes kept,
    and whether they hold scaling. ``abandon``: booting nodes the scheduler gave up on, cleaned
    up and terminated instead of provisioned."""
    repairs = repairs_of(
        state,
        master=config.cluster.master,
        boot_timeout=inputs.cloud.boot_timeout,
        orphan_timeout=config.orphan_timeout,
        unreachable_timeout=config.unreachable_timeout,
        watched_since=inputs.watched_since,
        scheduler=inputs.scheduler,
        skip=inputs.in_flight,
        groups=[g.name for g in config.node_groups or ()],
    )
    if abandon:
        given_up = {r.node: r.reason for r in abandon}
        instances = {r.node: r.instance for r in repairs}
        repairs = [r for r in repairs if r.node not in given_up]
        repairs += [Repair(RepairKind.ABANDON, name, why, instances.get(name)) for name, why in given_up.items()]
    if not repairs:
        return (), (), _NO_HOLD
    kept = tuple(r for r in repairs if r.kind is RepairKind.KEPT)
    todo = tuple(r for r in repairs if r.kind is not RepairKind.KEPT and r.node not in inputs.in_flight)
    return todo, kept, repairs_hold_scaling(todo, inputs.repair_fails, config.failed_passes_alarm)


def scale(
    inputs: PassInputs, policy: Policy, now: float, state: ClusterState | None = None, *, due_lead: float = 0.0
) -> Plan:
    """The policy's plan on the demand, its idle removals cut for the jobs due within
    ``due_lead`` (``kept_for_due``), with the admin's standing orders applied (pause, keep,
    remove; no node the joined ``state`` shows busy is removed on an order: an ordered removal is
    never kept for a due job). ``state``: joined here when None."""
    assert inputs.demand is not None
    demand = inputs.demand
    # Pooled nodes stay exec hosts (disabled) but are no capacity nor size: the policy plans without them.
    joined = state if state is not None else cluster_state(inputs, now)
    seen = pooled_hosts_left_out(demand.snapshot, joined.pooled)
    plan = decide_demand(policy, joined.seeing(seen), inputs.history, group_of=demand.group_of)
    if plan.remove and demand.not_demand and due_lead > 0:
        plan = kept_for_due(plan, demand, joined, lead=due_lead, now=now)
    orders = inputs.orders
    if not (orders.paused or orders.kept or orders.remove):
        return plan
    return apply_orders(plan, orders, inputs.nodes, {m.name for m in joined.nodes if m.busy}, cloud=inputs.cloud.name)


def _orders_done(orders: Orders, state: ClusterState) -> tuple[str, ...]:
    """Removal orders whose node is gone (or was never one of elb's)."""
    return tuple(sorted(name for name in orders.remove if (r := state.record(name)) is None or not r.state.alive))
