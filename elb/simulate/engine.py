"""A simulated SGE cluster on a simulated cloud, driven by elb's own planner and a scaling policy.

Events (job submissions, job ends, nodes becoming ready) move the cluster; every poll interval
the live pass's planner (``elb.core.planner.plan_pass``) plans on what the live pass would read: the
scheduler's ``Snapshot``, the journal's ``Node`` records, the cloud's instances, the demand and the
launch back-off of the bring-ups so far; its actions are carried out as the live executor would
start them: launched nodes accept jobs ``boot_time`` later, removed nodes (idle ones only: the
safe drain) stop being billed, the warm pool's stops, restarts and expiries happen as it plans
them, repairs are counted (a replay where nothing breaks has none). With
``provision_failure_rate`` a share of bring-ups fails after its boot time, and the back-off the
live pass computes from its journal holds launches the same way. The replay keeps what a pass
would otherwise find by a scan of every node (``elb.core.state.JoinIndex``: the nodes that are not
steady, each node's instance and record) up to date as events happen, so a decision costs what
changed, not what the cluster holds.

Dispatch (``dispatch``) is SGE's default scheduler without reservations (``"sge"``): jobs in
submission order, each one that fits starts, so a later job that fits starts around one that waits
for room; or strict FIFO (``"fifo"``: nothing starts before the first waiting job), or EASY backfill
(``"easy"``: a later job starts if it does not delay the first one's reserved start). Where a job
goes is ``elb.core.policy.placement``'s rule, the one elb's forecast uses: a job of more slots than a
node has takes ceil(slots / slots per node) whole empty nodes (lowest-numbered first); a narrower
job goes on the lowest-numbered ready node that fits it (``placement="first"``, SGE's host order
when loads tie) or on the one with the fewest free slots (``"best"``). Ready nodes are kept in a
``FreeIndex`` (bucketed by free slots) that every start, end, boot and removal updates, so placing
a job does not walk every node. Waiting jobs are kept in submission order and in one queue per
need (group, and slots on a node or whole nodes: ``elb.simulate.waiting``), so SGE's dispatch
looks at the oldest job of each need until one does not fit, not at every waiting job: a backlog
that cannot start costs nothing per event (FIFO and EASY still walk the queue in order). A
snapshot rebuilds the ``Host``/``Node`` values of the nodes that changed only (a node's ``Host`` of
each free-slot count is made once; its record changes when it turns idle, becomes ready
or goes; a waiting job's ``Job`` value is made by the first snapshot that shows it, so a job that
starts before any does is never made waiting), and each of its tuples says what came and went
since the last snapshot
(``elb.core.policy.tally.Revised``): the peers' and elb's tallies take in those changes instead
of every node and job.

Node groups (``groups``, ``elb.simulate.groups``): each job is placed at submission by the live
demand model on one group (the cheapest that can run it) and runs only on that group's nodes,
taking its footprint there (its slots, more when it asks more memory per slot than a node has);
each group has its own index of ready nodes and its nodes' size. A job no group can run stays
in the replay, never starts and is reported (``SimOutcome.unservable``); like the live pass, the
policy never sees it. A policy per node group (``elb.core.policy.grouped``) is told each waiting job's
group and names the group of each node it launches. Without groups the replay has one group
with ``slots_per_node`` slots a node and ``max_nodes`` nodes.

Fast-forward: a policy may offer ``quiet_until(state, history)`` (see ``elb.core.policy.peers``).
After an empty plan the driver then skips the polls before the earlier of that time and the next
event: nothing the policy sees changes in between, so the result is the same as polling every
interval (``tests/unit/test_simulate_wakeup.py`` compares both on random logs whose jobs overrun
their requested time). When the planner acts on the policy's plan alone (no warm pool, budget,
back-off that can hold, or Slurm's asks), the hint is asked before each pass as well: a time after
the pass's says the policy's plan is empty, and so is the pass's, which is then not planned (it is
counted among the passes all the same). A pass is planned only when the hint says the policy may act
now; the others cost the snapshot and the hint's reads of what changed (the same test file holds
such a replay equal to one that plans at every pass). A policy whose hint can read the changes
alone (``elb.core.policy.base.NotedHint``: StarCluster's, off its tally) is given them there
instead of a snapshot (``elb.core.policy.tally.Noted``: what came and went, no copy of every job,
host and record); the next snapshot's tuples revise them. The hint must bound every rule that changes
with the clock alone (a running job becoming overdue, ``launch_delay``, stabilization, idle timers,
a waiting job's age). A replay in which nothing can change any more (no event to come, an empty
plan, and a hint of never or beyond ``stall_limit``) gives up, billing its nodes up to the first
poll from which nothing changed, with fast-forward or without. A policy whose plans depend on its
nodes only, never on the jobs (``watches_jobs = False``: the static cluster), is then not asked
again for job submissions and ends either, only when a node becomes ready; so its replay costs the
same per job at any cluster size.

Warm pool (``elb.core.poolplan``, a group's ``warm_pool``): a removal the planner makes a stop stops the
node instead; its compute billing ends there (the stretch it ran is one ``NodeLife``) and its
volumes cost ``volume_price_per_hour`` while it is stopped. A launch the planner makes a restart
starts the stopped node under its own name: a new ``NodeLife`` (``restart``, billed from its start
with EC2's minimum again) that takes jobs ``restart_time`` later instead of a boot time.
``boot_time`` is launch to ready, provisioning included, so a restart replaces all of it. A
stopped node goes when the planner expires it (its keep time, billed up to that instant whenever
the next poll sees it; the replay wakes then, fast-forward or not, or the pool's size). Stopped
nodes are records in the journal's sense (``stopped``), not in the policy's view, and do not count
toward ``max_nodes``.

Quick reaction (``peek_interval``, ``elb.core.cadence``): as the live daemon with a driver that
peeks, a pass also comes at the first peek (every ``peek_interval``, the poll divided into whole
peeks, from the replay's start) at which a job submitted since the last pass still waits, and at
least ``peek_gap`` after the last pass; the polls then count from that pass. 0: plain polling.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeVar

from elb.core.backoff import GroupTrackers
from elb.core.budget import Budget, Spend, period_bounds
from elb.core.cadence import Cadence
from elb.core.config import Config, PolicyConfig
from elb.core.demand import DemandSplit
from elb.core.drivers import cloud_settings
from elb.core.frozen import maker, quick_init
from elb.core.gcpause import paused
from elb.core.interfaces import Instance, InstanceState
from elb.core.model import Event, History, Host, Job, JobPhase, Node, NodeState, QueueInstance, Snapshot
from elb.core.naming import next_names
from elb.core.orders import Orders
from elb.core.planner import PassInputs, PassPlan, plan_pass
from elb.core.policy.base import FixedSize, NotedHint, Policy, QuietHint
from elb.core.policy.grouped import GroupedPolicy
from elb.core.policy.placement import FreeIndex, host_order, width
from elb.core.policy.tally import Changes, Noted
from elb.core.scheduler import Ask, NamePool
from elb.core.spend import Billing, billed_seconds, overlap
from elb.core.state import ClusterState, JoinIndex
from elb.core.warmpool import Pooled, WarmPool, due, keep_time, volume_cost
from elb.schedulers.sge.groupoptions import sge_options
from elb.simulate.groups import Assignment, SimGroups, assign, one_group
from elb.simulate.powersave import SUSPEND_TIME, Asked, Behind, PowerSaving
from elb.simulate.swf import SimJob
from elb.simulate.waiting import WaitingJobs

QUEUE = "all.q"
_EPS = 1e-9
_OWNER = "sgeuser"  # the owner qstat shows of every replayed job
_NO_ORDERS = Orders()
_NO_LOAD: Mapping[str, str] = MappingProxyType({})  # a simulated host's load values (none): one for all
_REMOVALS_KEPT = 50  # the removals' times a History keeps, newest last
# The frozen values made at each change and each pass, by keyword without a call of their class
# (``elb.core.frozen.maker``).
_record = maker(Node)
_job = maker(Job)
_join_index = maker(JoinIndex)
_pass_inputs = maker(PassInputs)


def sim_config(settings: SimSettings, groups: SimGroups, max_nodes: int) -> Config:
    """The elb config the planner reads in a replay: the replay's node groups (a group without a
    price at ``settings.price_per_hour``), ``max_nodes``, the billing, the poll, the boot time (its
    mean with jitter), the back-off. Built from values already checked (``model_copy``: the replay may use
    times the live config refuses, such as an instant boot)."""
    node_groups = [
        g if g.price_per_hour is not None else g.model_copy(update={"price_per_hour": settings.price_per_hour})
        for g in groups.groups.groups
    ]
    policy = PolicyConfig().model_copy(
        update={
            "max_nodes": max_nodes,
            "billing": settings.billing,
            "boot_time": settings.boot_time + settings.boot_jitter / 2,
            "poll_interval": settings.poll_interval,
            "peek_interval": settings.peek_interval,
            "peek_gap": settings.peek_gap,
            "budget": settings.budget,
        }
    )
    base = Config()
    return base.model_copy(
        update={
            "poll_interval": settings.poll_interval,
            "policy": policy,
            "node_groups": node_groups,
            "backoff": base.backoff.model_copy(
                update={"initial": settings.backoff_initial, "max": settings.backoff_max}
            ),
        }
    )


@dataclass(frozen=True, slots=True)
class SimSettings:
    slots_per_node: int = 8
    max_nodes: int = 10
    boot_time: float = 300.0
    boot_jitter: float = 0.0  # extra boot delay, uniform in [0, boot_jitter)
    seed: int = 0
    poll_interval: float = 60.0
    # The quick reaction (see the module's doc): a pass at the first peek that sees a job submitted
    # since the last pass still waiting, at least ``peek_gap`` after it. 0: plain polling.
    peek_interval: float = 0.0
    peek_gap: float = 10.0
    dispatch: Literal["sge", "fifo", "easy"] = "sge"  # see the module's doc
    placement: Literal["first", "best"] = "first"  # narrow jobs: lowest-numbered node that fits, or fullest
    fast_forward: bool = True  # use the policy's quiet_until when it has one
    stall_limit: float = 7 * 86400.0  # give up when nothing has changed, and no event is to come, for this long
    record: bool = False  # keep per-job placements and node lives (for tests)
    # The master as an exec host of this many slots (0: it runs no job): ready from the start,
    # never removed and not billed (the master is paid for whatever the policy).
    master_exec_slots: int = 0
    master: str = "master"
    # Price per node-hour of a group without ``price_per_hour``: what a warm pool weighs its
    # volumes' cost against (a restart saves boot time minus restart time of compute).
    price_per_hour: float = 1.0
    # The share of bring-ups whose provisioning fails (after the boot time, billed): the launch
    # back-off (``backoff_initial`` doubling up to ``backoff_max``) then holds launches, as live.
    provision_failure_rate: float = 0.0
    backoff_initial: float = 60.0
    backoff_max: float = 3600.0
    # A budget (``policy.budget``): the planner paces launches on the replay's spend in its period
    # (``BudgetMeter``), billed by ``billing``. None: no budget.
    budget: Budget | None = None
    billing: Billing = "second"
    # The scheduler elb runs behind: Grid Engine (``"sge"``: the policy counts the demand) or
    # Slurm (``"slurm"``: Slurm's power saving, ``elb.simulate.powersave``, asks for nodes by name
    # and the planner acts on its asks), with the cloud nodes slurm.conf names (None:
    # ``max_nodes``) and its SuspendTime. One node group only.
    scheduler: Behind = Behind.SGE
    slurm_nodes: int | None = None
    suspend_time: float = SUSPEND_TIME


@dataclass(slots=True)
class _Node:
    name: str
    slots: int
    group: str
    launched_at: float
    ready_at: float
    index: FreeIndex[tuple[int, str]]  # its group's ready nodes (``Simulator._ready``)
    ready: bool = False
    free: int = 0
    jobs: int = 0  # running jobs (parts of jobs) on it
    # When it last turned idle (its record's): what makes it idle since when it runs nothing
    # (``Node.quiet_since``). Nothing reads it while the node is busy (a busy node is not idle), so
    # a node turning busy, and a job starting or ending on a node that stays busy, leave its
    # record as it was, and a node that turns idle and busy again between two snapshots keeps
    # the record the last one showed (``_shown_record``).
    last_busy_at: float | None = None
    busy_since: float | None = None
    busy_seconds: float = 0.0
    terminated_at: float | None = None
    record: Node | None = None  # cached Node value
    restart: bool = False  # started from the warm pool
    fails: bool = False  # its provisioning fails when its boot time is up
    order: tuple[int, str] = (0, "")  # its key in the ready nodes' index (``host_order``)
    # The Host values shown so far, by free slots: one a node's state is made once (equal values).
    hosts: dict[int, Host] = field(default_factory=dict)


@dataclass(slots=True)
class _Waiting:
    """A job in the queue: what qstat shows of it (made at the first snapshot that shows it:
    None while none has), its group and what it takes there: whole nodes (``width``: a job
    wider than a node), or ``footprint`` slots on one node (``whole`` 0)."""

    job: SimJob
    value: Job | None
    group: str
    footprint: int
    whole: int
    seq: int = 0  # its number in ``Simulator.pending``


@dataclass(slots=True)
class _Run:
    job: SimJob
    group: str
    start: float
    end: float
    expected_end: float  # what the scheduler believes (requested time), for backfill
    parts: list[tuple[_Node, int]]
    number: int  # its start's number: starts are numbered in the order they happen
    # The running Job entry qstat shows, made by the first snapshot that shows it running (None
    # while none has: a job that starts and ends between two snapshots is never made running).
    value: Job | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class Placement:
    job_id: int
    submit: float
    start: float
    end: float
    slots: int
    nodes: tuple[tuple[str, int], ...]  # (node, slots used on it)


@quick_init
@dataclass(frozen=True, slots=True)
class NodeLife:
    name: str
    launched_at: float
    ready_at: float
    terminated_at: float
    busy_seconds: float
    group: str = "default"
    slots: int = 0
    restart: bool = False  # a stopped node started again (its earlier stretches are other lives)


@dataclass(slots=True)
class SimOutcome:
    """Raw results of one replay; ``elb.simulate.report`` turns them into metrics."""

    waits: list[float]
    runs: list[float]
    slot_seconds: float  # sum of slots x run time over the jobs that ran
    nodes: list[NodeLife]
    first_submit: float
    last_end: float
    launches: int = 0
    terminations: int = 0
    refused_removals: int = 0
    polls: int = 0
    # Passes: the polls at which decide() was called, or at which the quiet hint showed its plan
    # empty (``Simulator._pass``).
    decisions: int = 0
    never_started: int = 0
    longest_backlog: float = 0.0  # longest stretch with jobs waiting (s)
    stalled: bool = False
    placements: list[Placement] = field(default_factory=list)
    unservable: list[tuple[SimJob, str]] = field(default_factory=list)  # no group can run it, and why
    restarts: int = 0  # stopped nodes started for demand (not in ``launches``)
    stops: int = 0  # removals that stopped the node into the warm pool (not in ``terminations``)
    pool_terminations: int = 0  # stopped nodes terminated for their age or the pool's size
    pooled_seconds: dict[str, float] = field(default_factory=dict)  # per group: node-seconds stopped
    pool_cost: dict[str, float] = field(default_factory=dict)  # per group: their volumes' cost
    pool_reasons: list[str] = field(default_factory=list)  # each pool decision's reason (with ``record``)
    failed_bringups: int = 0  # bring-ups whose provisioning failed (``provision_failure_rate``)
    launches_held: int = 0  # launches the policy wanted that the back-off held
    backoff_rounds: int = 0  # the most failed rounds in a row the back-off reached
    repairs: int = 0  # repairs the planner asked for (none on a replay where nothing breaks)
    budget_held: int = 0  # passes at which the budget held a launch or a restart (``SimSettings.budget``)
    quick_passes: int = 0  # passes a peek brought forward (``SimSettings.peek_interval``)


@dataclass(slots=True)
class _Changes:
    """What changed since the snapshot last handed out, which the next one's tuples carry
    (``elb.core.policy.tally.Revised``): a policy that keeps a tally (Slurm's) takes in the changes
    instead of every node and job."""

    jobs: Changes[Job] = field(default_factory=Changes)
    hosts: Changes[Host] = field(default_factory=Changes)
    records: Changes[Node] = field(default_factory=Changes)
    given: tuple[tuple[Job, ...], tuple[Host, ...], tuple[Node, ...]] | None = None


V = TypeVar("V")


def _replace(values: dict[str, V], name: str, value: V, changes: Changes[V]) -> None:
    """Set ``values[name]``, noting in ``changes`` the value that went and the one that came."""
    old = values.get(name)
    if old is value:
        return
    if old is not None:
        changes.went(old)
    values[name] = value
    changes.came(value)


def _take_out(values: list[Job], numbers: list[int], number: int, at: int = 0) -> None:
    """Take the value of ``number`` out of ``values``, whose numbers ``numbers`` holds beside
    ``values[at:]`` in increasing order."""
    i = bisect.bisect_left(numbers, number)
    del numbers[i], values[at + i]


class BudgetMeter:
    """The replay's spend in its budget's period, kept up as nodes end."""

    def __init__(self, budget: Budget, billing: Billing, period: float = 3600.0) -> None:
        self.budget = budget
        self.billing = billing
        self.period = period
        self.bounds = (-math.inf, -math.inf)
        self.closed = 0.0  # the lives that ended, billed in the period
        self.seen = 0  # lives taken in (``Simulator.dead`` only grows)
        self.volumes = 0.0  # the warm pools' volumes, money taken in
        self.volumes_at_start = 0.0

    def spend(self, sim: Simulator, now: float) -> Spend:
        start, end = period_bounds(self.budget, now)
        if (start, end) != self.bounds:  # a new period: nothing spent in it yet
            self.bounds = (start, end)
            self.closed = 0.0
            self.volumes_at_start = sum(sim.out.pool_cost.values())
        for node in sim.dead[self.seen :]:
            if node.terminated_at is not None and not self._master(sim, node.name):
                self.closed += self._billed(node.launched_at, node.terminated_at, sim.group_price[node.group], start)
        self.seen = len(sim.dead)
        spent = self.closed
        rate = 0.0
        for node in sim.nodes.values():
            if self._master(sim, node.name):
                continue
            price = sim.group_price[node.group]
            billed = billed_seconds(now - node.launched_at, self.billing, self.period)
            spent += overlap(node.launched_at, node.launched_at + billed, start, now) * price / 3600.0
            rate += price
        spent += sum(sim.out.pool_cost.values()) - self.volumes_at_start  # stretches ended in the period
        for name, pooled in sim.pooled.items():
            volume = sim.pools[sim.pool_group[name]].volume_price_per_hour
            spent += overlap(pooled.stopped_at, now, start, now) * volume / 3600.0
            rate += volume
        return Spend(spent, rate)

    def _billed(self, launched: float, ended: float, price: float, start: float) -> float:
        billed = billed_seconds(ended - launched, self.billing, self.period)
        return overlap(launched, launched + billed, start, math.inf) * price / 3600.0

    @staticmethod
    def _master(sim: Simulator, name: str) -> bool:
        return name == sim.s.master and sim.s.master_exec_slots > 0


class Simulator:
    """One replay of ``jobs`` under ``policy``. Call ``run()`` once."""

    def __init__(  # noqa: PLR0915 (a replay's state, set up in one place)
        self,
        jobs: Sequence[SimJob],
        policy: Policy,
        settings: SimSettings,
        *,
        initial_nodes: int = 0,
        progress: Callable[[float], None] | None = None,
        groups: SimGroups | None = None,
        assignments: Sequence[Assignment] | None = None,
    ) -> None:
        if not jobs:
            raise ValueError("no jobs to replay")
        if assignments is not None and len(assignments) != len(jobs):
            raise ValueError(f"{len(assignments)} assignments for {len(jobs)} jobs")
        self.s = settings
        self.policy = policy
        self.groups = groups or one_group(settings.slots_per_node, settings.max_nodes)
        self.group_slots = dict(self.groups.slots)
        self.several_groups = len(self.group_slots) > 1
        self.first_group = self.groups.groups.groups[0].name
        self.group_max = {g.name: self.groups.groups.max_nodes_of(g) for g in self.groups.groups.groups}
        self.max_nodes = min(settings.max_nodes, self.groups.groups.total_max_nodes)
        given = assignments if assignments is not None else assign(jobs, self.groups)
        order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit, jobs[i].job_id))
        self.jobs = [jobs[i] for i in order]
        self.assignments = [given[i] for i in order]
        self._next_submit = self.jobs[0].submit  # the next submission's time (inf after the last)
        self.progress = progress
        self.rng = random.Random(settings.seed)  # noqa: S311 (seeded boot jitter, not security)
        self.t0 = self.jobs[0].submit
        self.nodes: dict[str, _Node] = {}  # alive (booting or ready)
        self.dead: list[_Node] = []
        # The waiting jobs in submission order, and by need for SGE's dispatch: a job's group and
        # the whole nodes it takes, or the slots it takes on one node (``_submit``): what decides
        # whether and where it starts now (``_place_now``).
        self.pending: WaitingJobs[tuple[str, int, int], _Waiting] = WaitingJobs()
        # The waiting jobs' groups, for a policy per group and the budget; with one group, none
        # (a job not in it goes to the first group).
        self.group_of: dict[Job, str] = {}
        self.group_count: dict[str, int] = dict.fromkeys(self.group_slots, 0)  # alive nodes
        self._queues: dict[str, str] = {}  # each group's queue (``_queue``)
        self.ends: list[tuple[float, int, _Run]] = []  # (end, the start's number, the run)
        self.readies: list[tuple[float, str]] = []
        self.seq = 0  # the starts so far (a start's number)
        self.history = History()
        self.next_sub = 0
        # Whether a job may start that did not at the last dispatch: set when slots are freed
        # while jobs wait, or when a job comes that waits behind none it fits as
        # (``_may_start_alone``). Dispatch depends on the ready nodes and the waiting jobs alone,
        # and leaves none that fits, so after the events that set neither nothing starts.
        self._may_start = False
        self.running: dict[int, _Run] = {}
        # The Job values qstat shows, in the snapshot's order, in one list: the waiting ones in
        # submission order (their numbers in ``pending`` beside them, in ``_pending_numbers``),
        # then the running ones in the order they started (their start's number beside them, in
        # ``_running_numbers``). A job leaves the list where a bisection of the numbers finds it,
        # so that a snapshot's tuple of jobs is the list copied in C, not a walk over every job or
        # over a dict of them.
        self._shown_values: list[Job] = []
        self._pending_numbers: list[int] = []
        self._unshown: dict[int, _Waiting] = {}  # waiting jobs no snapshot showed yet, by number
        self._unshown_runs: dict[int, _Run] = {}  # running jobs no snapshot showed yet, by start number
        self._running_numbers: list[int] = []
        self.out = SimOutcome([], [], 0.0, [], self.t0, self.t0)
        self._jobs_cache: tuple[Job, ...] | None = None
        self._hosts_cache: tuple[Host, ...] | None = None
        self._nodes_cache: tuple[Node, ...] | None = None
        # The values a snapshot shows, per node, rebuilt only for the nodes changed since the last
        # snapshot (``_stale``: each node by name, in the order they changed; one that went since is
        # passed over), so a snapshot does not walk every node.
        self._host_values: dict[str, Host] = {}
        self._record_values: dict[str, Node] = {}
        self._stale: dict[str, _Node] = {}
        self._changes = _Changes()
        self._backlog_since: float | None = None
        self._stalled_at = 0.0  # when the replay gave up, if it stalled
        # Ready nodes by free slots, one index per group.
        self._ready = {g: FreeIndex[tuple[int, str]](n) for g, n in self.group_slots.items()}
        quiet = policy if isinstance(policy, QuietHint | GroupedPolicy) else None
        self.quiet = quiet if settings.fast_forward else None
        self.watches_jobs = policy.watches_jobs if isinstance(policy, FixedSize) else True
        self._last_event_at = self.t0  # the time of the last events handled
        # The quick reaction: the cadence, where the polls count from (the start, or the last
        # pass a peek brought forward), when the last pass was, and the first waiting job's
        # number (in ``pending``) that the last pass did not see.
        self.cadence = Cadence.of(settings.poll_interval, settings.peek_interval, settings.peek_gap)
        self._origin = self.t0
        self._last_pass: float | None = None
        self._unseen = 0
        # Warm pools of the groups that have one, and their stopped nodes (oldest stop first).
        self.pools: dict[str, WarmPool] = {
            g.name: g.warm_pool for g in self.groups.groups.groups if g.warm_pool.enabled
        }
        self.group_price = {
            g.name: g.price_per_hour if g.price_per_hour is not None else settings.price_per_hour
            for g in self.groups.groups.groups
        }
        self.pooled: dict[str, Pooled] = {}  # stopped nodes by name (their keep time, for the bill)
        self.pool_group: dict[str, str] = {}  # stopped nodes' groups
        # The elb config the planner reads, and what the live pass reads of the journal and the
        # cloud, kept event by event: the back-off (its bring-up events), the nodes with a
        # bring-up or a restart under way (in flight), each node's instance, and the nodes that
        # are not steady (booting or stopped: ``elb.core.state.JoinIndex``).
        self.config = sim_config(settings, self.groups, self.max_nodes)
        self.cloud = cloud_settings(self.config)  # the configured cloud's, as the daemon reads them
        self.backoff = GroupTrackers(initial=settings.backoff_initial, maximum=settings.backoff_max)
        # The back-off hears of bring-ups only when one can fail: a request and its readiness
        # alone leave it as it was (nothing backed off), so without failures it is never told.
        self._tell_backoff = settings.provision_failure_rate > 0
        self.failures = random.Random(settings.seed + 1)  # noqa: S311 (seeded failure injection)
        self._booting: dict[str, None] = {}
        self._instance_values: dict[str, Instance] = {}
        self._suspects: dict[str, None] = {}
        self._pooled_records: dict[str, Node] = {}
        # The frozen values a pass reads of the last three, made again only after they change.
        self._frozen_booting: frozenset[str] | None = None
        self._frozen_suspects: tuple[str, ...] | None = None
        self._frozen_pooled: tuple[Node, ...] | None = None
        self.last_inputs: PassInputs | None = None  # the planner's inputs at the last decision
        self.meter = None if settings.budget is None else BudgetMeter(settings.budget, settings.billing)
        # Behind Slurm: its power saving, which asks for the nodes, and its asks so far.
        self.power = self._power_saving(settings)
        self.asked = Asked()
        # The planner acts on the policy's plan alone (no warm pool, budget, back-off that can
        # hold or Slurm's asks, each of which plans of its own or keeps state from pass to pass):
        # a pass whose policy plan the quiet hint shows empty is then known empty without it.
        self._hint_first = (
            self.quiet is not None
            and self.power is None
            and not self.pools
            and self.meter is None
            and not self._tell_backoff
        )
        # A hint that reads the changes alone (``NotedHint``) is given them before a pass: the
        # simulator's nodes have no instance, so none is down.
        self._noted_hint = self.quiet if self._hint_first and isinstance(self.quiet, NotedHint) else None
        for name in next_names((), initial_nodes):
            self._launch(name, self.t0, boot=0.0)
        if settings.master_exec_slots > 0:
            self._launch(settings.master, self.t0, boot=0.0, slots=settings.master_exec_slots)
            self.out.launches -= 1  # not a launch of the policy's (but a node within max_nodes)

    def _power_saving(self, settings: SimSettings) -> PowerSaving | None:
        """Slurm's power saving when the replay runs behind Slurm, else None."""
        if settings.scheduler is not Behind.SLURM:
            return None
        if self.several_groups:
            raise ValueError("a replay behind Slurm has one node group")
        return PowerSaving(
            settings.slurm_nodes or self.max_nodes,
            self.group_slots[self.first_group],
            settings.suspend_time,
            master=settings.master,
        )

    # -- cluster state -------------------------------------------------------------------------
    def _launch(  # noqa: PLR0917 (a node's facts)
        self,
        name: str,
        now: float,
        boot: float | None = None,
        slots: int | None = None,
        group: str | None = None,
        restart: bool = False,
    ) -> None:
        if name in self.nodes:
            raise ValueError(f"policy asked to launch {name}, which already exists")
        if boot is None:
            boot = self.s.boot_time
            if self.s.boot_jitter > 0:
                boot += self.rng.uniform(0.0, self.s.boot_jitter)
        group = group or self.first_group
        slots = slots or self.group_slots[group]
        node = _Node(name, slots, group, now, now + boot, self._ready[group], restart=restart, order=host_order(name))
        rate = self.s.provision_failure_rate
        node.fails = not restart and rate > 0 and self.failures.random() < rate
        self.nodes[name] = node
        self.group_count[group] += 1
        if restart:
            self.out.restarts += 1
        else:
            self.out.launches += 1
            if self._tell_backoff:
                self.backoff.add(Event(now, name, NodeState.REQUESTED, None, None), group)
        self._instance_values[name] = Instance(f"sim-{name}", name, InstanceState.RUNNING, now)
        self._nodes_cache = None
        self._stale[name] = node
        if boot <= 0 and not node.fails:
            self._set_ready(node, now)
        else:
            self._booting[name] = None
            self._suspects[name] = None
            self._frozen_booting = self._frozen_suspects = None
            heapq.heappush(self.readies, (node.ready_at, name))

    def _set_ready(self, node: _Node, now: float) -> None:
        node.ready = True
        node.free = node.slots
        node.ready_at = now
        node.last_busy_at = None
        if self.pending:
            self._may_start = True
        self._booting.pop(node.name, None)
        self._suspects.pop(node.name, None)
        self._frozen_booting = self._frozen_suspects = None
        if not node.restart and self._tell_backoff:
            self.backoff.add(Event(now, node.name, NodeState.READY, None, None), node.group)
        self._touch(node)

    def _fail(self, node: _Node, now: float) -> None:
        """Its provisioning failed: cleaned up and terminated (billed from its launch), a failed
        bring-up for the back-off."""
        self.out.failed_bringups += 1
        self.backoff.add(Event(now, node.name, NodeState.FAILED, None, "provisioning failed (simulated)"), node.group)
        self._terminate(node, now)

    def _touch(self, node: _Node, *, record: bool = True) -> None:
        """The node changed: its free slots (its Host value, the one of its free slots), and with
        ``record`` its record's."""
        if node.ready:
            node.index.set(node.order, node.free, node.slots)
        if record:
            node.record = None
            self._nodes_cache = None
        self._stale[node.name] = node
        self._hosts_cache = None

    def _terminate(self, node: _Node, now: float, *, stopped: bool = False) -> None:
        node.terminated_at = now
        del self.nodes[node.name]
        self._booting.pop(node.name, None)
        self._suspects.pop(node.name, None)
        self._frozen_booting = self._frozen_suspects = None
        self._instance_values.pop(node.name, None)
        self.group_count[node.group] -= 1
        node.index.remove(node.order)
        host, record = self._host_values.pop(node.name, None), self._record_values.pop(node.name, None)
        if host is not None:
            self._changes.hosts.went(host)
        if record is not None:
            self._changes.records.went(record)
        # A node that went is kept for its bill alone: its Host values and record go now, so the
        # replay does not carry every Host shown of every node it ever ran.
        node.record = None
        node.hosts = {}
        self.dead.append(node)
        if stopped:
            self.out.stops += 1
        else:
            self.out.terminations += 1
        self._nodes_cache = None
        self._hosts_cache = None

    def _node_record(self, n: _Node) -> Node:
        """Its record now (made when it changed: ``record`` is None)."""
        booting = NodeState.STARTING if n.restart else NodeState.PROVISIONING
        n.record = record = _record(
            name=n.name,
            state=NodeState.READY if n.ready else booting,
            launched_at=n.launched_at,
            instance_id=f"sim-{n.name}",
            ready_at=n.ready_at if n.ready else None,
            last_busy_at=n.last_busy_at,
            slots=n.slots,
            group=n.group,
        )
        return record

    def _host(self, n: _Node) -> Host:
        """Its Host value of its free slots, the first time it has them (then kept in ``hosts``)."""
        q = QueueInstance(self._queue(n.group), n.name, n.slots, n.slots - n.free)
        host = n.hosts[n.free] = Host(n.name, (q,), n.slots, _NO_LOAD)  # name, queues, num_proc, load
        return host

    def _queue(self, group: str) -> str:
        queue = self._queues.get(group)
        if queue is None:
            found = self.groups.groups.get(group)
            queue = self._queues[group] = sge_options(found).queues[0] if found is not None else QUEUE
        return queue

    def snapshot(self, now: float) -> tuple[Snapshot, tuple[Node, ...]]:
        """What qstat/qhost and elb's journal would show now (the jobs no group can run are not
        shown: the live pass leaves them out of what the policy plans on)."""
        changes = self._changes
        given = changes.given
        if self._jobs_cache is None:
            if self._unshown_runs:
                self._shown_runs()
            if self._unshown:
                self._shown()
            self._jobs_cache = changes.jobs.revised(self._shown_values, given and given[0])
        self._note_stale()
        if self._hosts_cache is None:
            self._hosts_cache = changes.hosts.revised(self._host_values.values(), given and given[1])
        if self._nodes_cache is None:
            self._nodes_cache = changes.records.revised(self._record_values.values(), given and given[2])
        changes.given = (self._jobs_cache, self._hosts_cache, self._nodes_cache)
        return Snapshot(now, self._jobs_cache, self._hosts_cache), self._nodes_cache

    def _noted(self) -> tuple[Noted[Job], Noted[Host], Noted[Node]] | None:
        """What came and went since the last snapshot (or changes) handed out, without the
        objects (``elb.core.policy.tally.Noted``); None before any snapshot. The next snapshot's
        tuples are made whole and revise these."""
        changes = self._changes
        given = changes.given
        if given is None:
            return None
        if self._unshown_runs:
            self._shown_runs()
        if self._unshown:
            self._shown()
        self._note_stale()
        noted = changes.jobs.noted(given[0]), changes.hosts.noted(given[1]), changes.records.noted(given[2])
        changes.given = noted
        self._jobs_cache = self._hosts_cache = self._nodes_cache = None
        return noted

    def _note_stale(self) -> None:
        """The values of the nodes changed since the last snapshot made again, their changes noted
        (``_replace``, written out: a snapshot comes here for every node changed since the last)."""
        stale = self._stale
        if not stale:
            return
        records, hosts = self._record_values, self._host_values
        record_went, record_came = self._changes.records.went, self._changes.records.came
        host_went, host_came = self._changes.hosts.went, self._changes.hosts.came
        for name, n in stale.items():
            if n.terminated_at is not None:
                continue  # it went, and its values with it
            record = n.record or self._node_record(n)
            old = records.get(name)
            if old is not record:
                if old is not None:
                    record_went(old)
                records[name] = record
                record_came(record)
            if n.ready:
                host = n.hosts.get(n.free) or self._host(n)
                shown = hosts.get(name)
                if shown is not host:
                    if shown is not None:
                        host_went(shown)
                    hosts[name] = host
                    host_came(host)
        stale.clear()

    def state(self, now: float) -> ClusterState:
        """The joined state the policy reads now (``snapshot``'s jobs, hosts and records; the
        simulated nodes have no cloud instances)."""
        snapshot, records = self.snapshot(now)
        return ClusterState(snapshot, records, now)

    # -- dispatch ------------------------------------------------------------------------------
    def _place_now(self, w: _Waiting, allowed: dict[str, int] | None = None) -> list[tuple[_Node, int]] | None:
        """Where the job would start now (ready nodes of its group), or None. ``allowed``:
        per-node slot limits."""
        index = self._ready[w.group]
        if allowed is not None:
            index = FreeIndex(self.group_slots[w.group])
            for n in self.nodes.values():
                if n.ready and n.group == w.group:
                    index.set(host_order(n.name), min(n.free, allowed.get(n.name, 0)), n.slots)
        k = w.whole
        if k:
            empty = index.empties(k)
            if len(empty) < k:
                return None
            return [(self.nodes[name], self.nodes[name].slots) for _, name in empty]
        key = index.fullest(w.footprint) if self.s.placement == "best" else index.first(w.footprint)
        return None if key is None else [(self.nodes[key[1]], w.footprint)]

    def _start(self, waiting: _Waiting, parts: list[tuple[_Node, int]], now: float) -> None:
        seq = waiting.seq
        self.pending.remove(seq)
        job, pending_value, group = waiting.job, waiting.value, waiting.group
        if pending_value is None:  # no snapshot showed it waiting
            del self._unshown[seq]
        else:
            _take_out(self._shown_values, self._pending_numbers, seq)
            self._changes.jobs.went(pending_value)
            if self.several_groups:
                del self.group_of[pending_value]
        expected = now + (job.requested if job.requested is not None else job.run)
        self.seq = number = self.seq + 1
        run = _Run(job, group, now, now + job.run, max(expected, now), parts, number)
        stale = self._stale
        for node, used in parts:  # ``_touch`` of each (ready) node, its record left as it is, written out
            node.free -= used
            if node.jobs == 0:
                node.busy_since = now
                if node.record is None:
                    node.record = self._shown_record(node)
            node.jobs += 1
            node.index.set(node.order, node.free, node.slots)
            stale[node.name] = node
        self._hosts_cache = self._jobs_cache = None
        self.running[job.job_id] = run
        self._unshown_runs[number] = run
        heapq.heappush(self.ends, (run.end, number, run))
        out = self.out
        out.waits.append(now - job.submit)
        out.runs.append(job.run)
        out.slot_seconds += job.slots * job.run
        if self.s.record:
            out.placements.append(
                Placement(job.job_id, job.submit, now, run.end, job.slots, tuple((n.name, u) for n, u in parts))
            )

    def _shown_record(self, node: _Node) -> Node | None:
        """The record the last snapshot showed of a node that turned idle since and turns busy
        again now, when it showed the node ready (the same stretch): it stays the node's record,
        as nothing reads when a busy node last turned idle; None: a record is to be made."""
        shown = self._record_values.get(node.name)
        if shown is not None and shown.state is NodeState.READY and shown.launched_at == node.launched_at:
            return shown
        return None

    def _finish(self, run: _Run, now: float) -> None:
        del self.running[run.job.job_id]
        if run.value is None:  # no snapshot showed it running
            del self._unshown_runs[run.number]
        else:
            _take_out(self._shown_values, self._running_numbers, run.number, len(self._pending_numbers))
            self._changes.jobs.went(run.value)
        stale = self._stale
        for node, used in run.parts:  # ``_touch`` of each (ready) node, written out
            node.free += used
            node.jobs -= 1
            if node.jobs == 0:  # it turns idle: a new record
                node.last_busy_at = now
                if node.busy_since is not None:
                    node.busy_seconds += now - node.busy_since
                    node.busy_since = None
                node.record = None
                self._nodes_cache = None
            node.index.set(node.order, node.free, node.slots)
            stale[node.name] = node
        self._hosts_cache = self._jobs_cache = None
        if self.pending:
            self._may_start = True
        self.out.last_end = max(self.out.last_end, now)

    def dispatch(self, now: float) -> None:
        self._may_start = False  # each dispatch leaves no waiting job that fits
        if self.s.dispatch == "sge":
            self._around(now)
            return
        pending, place, start = self.pending, self._place_now, self._start
        while (head := pending.head()) is not None:
            parts = place(head)
            if parts is None:
                break
            start(head, parts, now)
        if len(self.pending) > 1 and self.s.dispatch == "easy":
            self._backfill(now)

    def _around(self, now: float) -> None:
        """SGE without reservations: every waiting job that fits now starts, in submission order.
        Only the oldest job of each need is looked at until one of that need does not fit
        (``WaitingJobs.start_in_order``): the same jobs start, in the same order, on the same nodes
        as a walk over every waiting job. A pass only takes capacity, so once a need of a group
        does not fit, no need of that group that takes as much or more fits either (more whole
        nodes, or more slots on one node): it is declined without a look."""
        for index in self._ready.values():
            if index.most_free > 0:
                break
        else:
            return  # every ready node is full (or there is none): nothing fits
        # Per group and kind (whole nodes, slots on one node): the least that did not fit.
        missed: dict[tuple[str, bool], int] = {}

        def start(w: _Waiting) -> bool:
            whole = w.whole
            kind = (w.group, whole > 0)
            take = whole or w.footprint
            least = missed.get(kind)
            if least is not None and take >= least:
                return False
            parts = self._place_now(w)
            if parts is None:
                missed[kind] = take  # less than any that missed before
                return False
            self._start(w, parts, now)
            return True

        self.pending.start_in_order(start)

    def _backfill(self, now: float) -> None:
        """EASY: a later job may start now if it does not delay the head's reserved start."""
        head = self.pending.head()
        assert head is not None  # called with jobs waiting
        shadow, spare = self._reservation(head, now)
        for w in list(self.pending):
            if w is head:
                continue
            job = w.job
            expected = now + (job.requested if job.requested is not None else job.run)
            ends_in_time = w.group != head.group or expected <= shadow
            parts = self._place_now(w) if ends_in_time else self._place_now(w, spare)
            if parts is None:
                continue
            if not ends_in_time:
                for node, used in parts:
                    spare[node.name] -= used
            self._start(w, parts, now)

    def _reservation(self, head: _Waiting, now: float) -> tuple[float, dict[str, int]]:
        """The head's earliest start on ready nodes of its group (by expected ends) and the slots
        per node that stay spare at that time after the head takes its share."""
        ready = [n for n in self.nodes.values() if n.ready and n.group == head.group]
        free = {n.name: n.free for n in ready}
        releases = sorted(
            ((r.expected_end, n.name, used) for r in self.running.values() for n, used in r.parts),
        )
        k = head.whole
        slots = {n.name: n.slots for n in ready}

        def fits() -> list[str] | None:
            if k:
                empty = sorted((name for name in free if free[name] == slots[name]), key=host_order)
                return empty[:k] if len(empty) >= k else None
            cands = [name for name in free if free[name] >= head.footprint]
            if not cands:
                return None
            if self.s.placement == "best":
                return [min(cands, key=lambda x: (free[x], *host_order(x)))]
            return [min(cands, key=host_order)]

        chosen = fits()
        shadow = now
        idx = 0
        while chosen is None and idx < len(releases):
            t = releases[idx][0]
            while idx < len(releases) and releases[idx][0] <= t:
                _, name, used = releases[idx]
                if name in free:
                    free[name] += used
                idx += 1
            shadow = t
            chosen = fits()
        if chosen is None:
            return math.inf, {n.name: n.free for n in ready}
        spare = dict(free)
        for name in chosen:
            spare[name] -= slots[name] if k else head.footprint
        return shadow, spare

    # -- the loop ------------------------------------------------------------------------------
    def _submit(self, job: SimJob, placed: Assignment) -> None:
        """The job waits. What qstat shows of it is made by the next snapshot (``_shown``): a
        job that starts before then (many do, while there is room) was never shown waiting."""
        if placed.group is None:
            self.out.unservable.append((job, placed.reason))
            return
        group, footprint = placed.group, placed.footprint
        whole = width(footprint, self.group_slots[group])
        need = (group, whole, 0 if whole else footprint)
        waiting = _Waiting(job, None, group, footprint, whole)
        if not self._may_start:
            self._may_start = self._may_start_alone(need)
        waiting.seq = self.pending.add(waiting, need)
        self._unshown[waiting.seq] = waiting
        self._jobs_cache = None

    def _may_start_alone(self, need: tuple[str, int, int]) -> bool:
        """Whether a job of ``need`` that comes now may start at the next dispatch with no slot
        freed since the last: FIFO, when no job waits before it; SGE's, when none of its need
        waits (one of the same need fits as it does, and did not); EASY's backfill, always."""
        if self.s.dispatch == "fifo":
            return not self.pending
        return self.s.dispatch == "easy" or not self.pending.waits(need)

    def _job_value(
        self,
        job: SimJob,
        group: str,
        state: str,
        phase: JobPhase,
        *,
        started: float | None = None,
        queue: str | None = None,
    ) -> Job:
        """What qstat shows of a job of ``group``: waiting (``qw``) or running (``r``, since
        ``started`` in ``queue``); a parallel job in ``mpi`` when it is wider than a node, else ``smp``."""
        pe = pe_range = None
        if job.slots > 1:
            pe, pe_range = ("mpi" if job.slots > self.group_slots[group] else "smp"), str(job.slots)
        return _job(
            job_id=job.job_id,
            name=f"job{job.job_id}",
            owner=_OWNER,
            state=state,
            phase=phase,
            slots=job.slots,
            submitted=job.submit,
            started=started,
            pe=pe,
            pe_range=pe_range,
            queue=queue,
            hard_runtime=job.requested,
        )

    def _shown(self) -> None:
        """Make what qstat shows of the jobs submitted since the last snapshot that still wait,
        in submission order (after every job a snapshot showed waiting)."""
        shown = []
        numbers, came, job_value = self._pending_numbers, self._changes.jobs.came, self._job_value
        for seq, waiting in self._unshown.items():
            value = job_value(waiting.job, waiting.group, "qw", JobPhase.WAITING)
            waiting.value = value
            shown.append(value)
            numbers.append(seq)
            came(value)
            if self.several_groups:
                self.group_of[value] = waiting.group
        self._unshown.clear()
        at = len(numbers) - len(shown)
        self._shown_values[at:at] = shown  # after the jobs shown waiting, before the running ones

    def _shown_runs(self) -> None:
        """Make what qstat shows of the jobs started since the last snapshot that still run, in
        the order they started (after every job a snapshot showed running)."""
        values, numbers, came, job_value = (
            self._shown_values,
            self._running_numbers,
            self._changes.jobs.came,
            self._job_value,
        )
        for number, run in self._unshown_runs.items():
            where = f"{self._queue(run.group)}@{run.parts[0][0].name}"
            value = job_value(run.job, run.group, "r", JobPhase.RUNNING, started=run.start, queue=where)
            run.value = value
            values.append(value)
            numbers.append(number)
            came(value)
        self._unshown_runs.clear()

    def _next_event(self) -> float:
        t = self._next_submit
        if self.ends and self.ends[0][0] < t:
            t = self.ends[0][0]
        if self.readies and self.readies[0][0] < t:
            t = self.readies[0][0]
        return t

    def _next_node_event(self) -> float:
        """When a node next becomes ready (a policy that ignores jobs may plan again then)."""
        return self.readies[0][0] if self.readies else math.inf

    def _events_at(self, t: float) -> None:
        """The jobs that end at ``t``, then the nodes that become ready, then the submissions;
        then dispatch, when a job may start (``_may_start``)."""
        self._last_event_at = t
        ends, readies = self.ends, self.readies
        while ends and ends[0][0] <= t:
            self._finish(heapq.heappop(ends)[2], t)
        while readies and readies[0][0] <= t:
            _, name = heapq.heappop(readies)
            node = self.nodes.get(name)
            if node is not None and not node.ready and node.ready_at <= t:
                if node.fails:
                    self._fail(node, t)
                else:
                    self._set_ready(node, t)
        if self._next_submit <= t:
            jobs, n = self.jobs, len(self.jobs)
            while self.next_sub < n and jobs[self.next_sub].submit <= t:
                self._submit(jobs[self.next_sub], self.assignments[self.next_sub])
                self.next_sub += 1
            self._next_submit = jobs[self.next_sub].submit if self.next_sub < n else math.inf
        if self._may_start:
            self.dispatch(t)
        if (self._backlog_since is None) == bool(self.pending):  # a backlog starts or ends
            self._track_backlog(t)

    def _track_backlog(self, t: float) -> None:
        if self.pending and self._backlog_since is None:
            self._backlog_since = t
        elif not self.pending and self._backlog_since is not None:
            self.out.longest_backlog = max(self.out.longest_backlog, t - self._backlog_since)
            self._backlog_since = None

    # -- the pass: the live planner on what the replay shows ----------------------------------
    def _plan(self, now: float) -> PassPlan:
        """``elb.core.planner.plan_pass`` on what the live pass would read now: the scheduler's
        snapshot, the journal's records (stopped nodes too) and the cloud's instances, the
        demand (each waiting job's group), the back-off of the bring-ups so far."""
        snapshot, records = self.snapshot(now)
        index = _join_index(
            suspects=self._suspects_now(),
            unaccounted=(),
            pooled=self._pooled_now(),
            records=self._record_values,
            instances=self._instance_values,
            hosts=self._host_values,
            jobs_on=self._jobs_on,
        )
        asks: tuple[Ask, ...] | None = None
        names: NamePool | None = None
        if self.power is not None:  # behind Slurm: what its power saving asks by name, and may ask for next
            self.asked, asks = self.power.ask(self.asked, snapshot, records, self.history, now)
            names = self.power.names(self.asked, records)
        inputs = _pass_inputs(
            snapshot=snapshot,
            nodes=records,
            instances=(),
            demand=DemandSplit(snapshot, group_of=self.group_of),
            history=self.history,
            orders=_NO_ORDERS,
            backoff=self.backoff.state,
            scheduler="SGE" if asks is None else "Slurm",  # the simulated cluster's, in the reasons
            cloud=self.cloud,
            in_flight=self._in_flight_now(),
            watched_since=self.t0,
            index=index,
            spend=None if self.meter is None else self.meter.spend(self, now),
            asks=asks,
            names=names,
        )
        self.last_inputs = inputs
        pp = plan_pass(inputs, self.config, self.policy, now)
        if self.power is not None:
            self.asked = self.power.answered(self.asked, pp, now)
        return pp

    def _in_flight_now(self) -> frozenset[str]:
        """The nodes with a bring-up or a restart under way, as a pass reads them."""
        if self._frozen_booting is None:
            self._frozen_booting = frozenset(self._booting)
        return self._frozen_booting

    def _suspects_now(self) -> tuple[str, ...]:
        """The nodes that are not steady (booting or stopped), as a pass reads them."""
        if self._frozen_suspects is None:
            self._frozen_suspects = tuple(self._suspects)
        return self._frozen_suspects

    def _pooled_now(self) -> tuple[Node, ...]:
        """The stopped nodes' records, as a pass reads them."""
        if self._frozen_pooled is None:
            self._frozen_pooled = tuple(self._pooled_records.values())
        return self._frozen_pooled

    def _jobs_on(self, name: str) -> tuple[Job, ...]:
        """The jobs filed under a node (``elb.core.state.started_host``: the host of a job's queue
        instance, its first node here), as the scan of the snapshot finds them (the pass's
        snapshot made every running job's value)."""
        node = self.nodes.get(name)
        if node is None or node.jobs == 0:
            return ()
        return tuple(r.value for r in self.running.values() if r.parts[0][0] is node and r.value is not None)

    def _carry_out(self, pp: PassPlan, now: float) -> bool:
        """The plan's actions on the replay, as the live executor would start them; True when the
        cluster changed. A removal or stop of a node with a job on it is refused (the safe drain
        keeps it), a launch beyond ``max_nodes`` or its group's is not made."""
        self.out.repairs += len(pp.repairs)
        changed = False
        for r in pp.pool.expire:
            self._expire(r.node, now, r.reason)
            changed = True
        plan = pp.scaling
        if plan is None:
            return changed
        self.out.launches_held += pp.launches_held
        self.out.budget_held += pp.budget is not None and pp.budget.holding
        self.out.backoff_rounds = max(self.out.backoff_rounds, self.backoff.state.rounds)
        removed = 0
        for removal in plan.remove:
            if self.s.record and self.pools:  # the pool said why not
                node = self.nodes.get(removal.node)
                if node is not None and node.group in self.pools:
                    self.out.pool_reasons.append(f"{removal.node}: {removal.reason}")
            removed += self._remove(removal.node, now)
        for r in pp.pool.stops:
            removed += self._remove(r.node, now, stop=r.reason)
        if removed:  # the history of the removals, once for all of them (each one's time kept, the last 50)
            self.history = History(now, (*self.history.recent_removals, *(now,) * removed)[-_REMOVALS_KEPT:])
            changed = True
        launched = 0
        for r in pp.pool.restarts:
            self._restart(r.node, now, r.reason)
            launched += 1
        room = self.max_nodes - sum(self.group_count.values())
        for name in plan.add_names[: max(0, room)]:
            group = plan.add_groups.get(name, self.first_group)
            if group not in self.group_slots or self.group_count[group] >= self.group_max[group]:
                continue  # the group's own cap (a plan that ignores it gets no node)
            if name in self.nodes or name in self.pooled:  # a name in use (a policy's own naming): the next free one
                name = next_names(sorted({*self.nodes, *self.pooled}), 1)[0]  # noqa: PLW2901
            self._launch(name, now, group=group)
            launched += 1
        if launched:
            self.history = History(now, self.history.recent_removals)
            changed = True
        return changed

    def _remove(self, name: str, now: float, *, stop: str | None = None) -> bool:
        """The safe drain: a ready node with nothing on it is terminated, or stopped into its
        group's warm pool (``stop``: the pool's reason); True when it was (the history notes the
        pass's removals: ``_carry_out``)."""
        node = self.nodes.get(name)
        if node is None or not node.ready or node.jobs:
            self.out.refused_removals += 1
            return False
        if stop is None:
            self._terminate(node, now)
            return True
        if self.s.record:
            self.out.pool_reasons.append(f"{name}: {stop}")
        self._terminate(node, now, stopped=True)
        pool = self.pools[node.group]
        keep = keep_time(pool, self.config.policy.boot_time, self.group_price[node.group])
        self.pooled[name] = Pooled(name, now, now + keep)
        self.pool_group[name] = node.group
        record = Node(
            name, NodeState.STOPPED, node.launched_at, instance_id=f"sim-{name}", slots=node.slots,
            group=node.group, stopped_at=now,
        )  # fmt: skip
        self._pooled_records[name] = record
        self._frozen_pooled = None
        _replace(self._record_values, name, record, self._changes.records)
        self._nodes_cache = None
        self._instance_values[name] = Instance(f"sim-{name}", name, InstanceState.STOPPED, node.launched_at)
        self._suspects[name] = None
        self._frozen_suspects = None
        return True

    def _unpool(self, name: str, until: float) -> str:
        """A stopped node leaves the pool: its volumes were paid from its stop to ``until``; its group."""
        p = self.pooled.pop(name)
        group = self.pool_group.pop(name)
        record = self._pooled_records.pop(name)
        self._frozen_pooled = None
        if self._record_values.get(name) is record:
            del self._record_values[name]
            self._changes.records.went(record)
            self._nodes_cache = None
        self._instance_values.pop(name, None)
        self._suspects.pop(name, None)
        self._frozen_suspects = None
        seconds = max(0.0, until - p.stopped_at)
        self.out.pooled_seconds[group] = self.out.pooled_seconds.get(group, 0.0) + seconds
        self.out.pool_cost[group] = self.out.pool_cost.get(group, 0.0) + volume_cost(seconds, self.pools[group])
        return group

    def _restart(self, name: str, now: float, why: str) -> None:
        """Start a stopped node again under its own name: a new stretch (billed from now), ready a
        restart time later."""
        group = self._unpool(name, now)
        if self.s.record:
            self.out.pool_reasons.append(why)
        self._launch(name, now, boot=self.pools[group].restart_time, group=group, restart=True)

    def _expire(self, name: str, now: float, why: str) -> None:
        """A stopped node past its keep time (billed up to it) or beyond the pool's size goes."""
        p, group = self.pooled[name], self.pool_group[name]
        self._unpool(name, max(p.stopped_at, min(now, due(p, self.pools[group]))))
        self.out.pool_terminations += 1
        if self.s.record:
            self.out.pool_reasons.append(f"{name}: {why}")

    def _next_pool_due(self) -> float:
        """When the next stopped node is due to go (its keep time): the replay wakes then."""
        if not self.pooled:
            return math.inf
        return min((due(p, self.pools[self.pool_group[n]]) for n, p in self.pooled.items()), default=math.inf)

    def _backoff_ends(self, now: float) -> float:
        """When a launch the back-off holds may start (the replay wakes then); inf: none held
        (as when it is never told of a bring-up: nothing can fail)."""
        if not self._tell_backoff:
            return math.inf
        end = self.backoff.state.next_end(now)
        return math.inf if end is None else end

    def _done(self) -> bool:
        return self.next_sub >= len(self.jobs) and not self.pending and not self.running

    def _grid(self, t: float) -> float:
        """First poll instant at or after ``t``."""
        if t == math.inf:
            return t
        k = math.ceil((t - self._origin) / self.s.poll_interval - _EPS)
        return self._origin + max(0, k) * self.s.poll_interval

    def _news(self) -> bool:
        """A job submitted since the last pass still waits: what a peek would see."""
        newest = self.pending.newest()
        return newest is not None and newest >= self._unseen

    def _peek_after(self, t: float, quick: float) -> float:
        """The peek that will see a job that came at ``t`` still waiting (``quick``, when one
        is due already; inf without peeks or without such a job)."""
        if quick < math.inf or not self.cadence.peek or not self._news():
            return quick
        return self._quick_at(t)

    def _peeked(self, at: float) -> bool:
        """The peek at ``at``: True when what came since the last pass still waits (a pass now,
        and the polls count from it)."""
        if not self._news():
            return False
        self._origin = at
        self.out.quick_passes += 1
        return True

    def _quick_at(self, t: float) -> float:
        """The first peek at or after ``t`` and at least ``peek_gap`` after the last pass."""
        tick, last = self.cadence.peek, self._last_pass
        if last is not None:  # a poll fast-forward skipped was a pass all the same
            last = max(
                last, self._origin + math.floor((t - self._origin) / self.s.poll_interval + _EPS) * self.s.poll_interval
            )
        earliest = t if last is None else max(t, last + self.cadence.gap)
        return self.t0 + max(0, math.ceil((earliest - self.t0) / tick - _EPS)) * tick

    def run(self) -> SimOutcome:
        """Replay the log; the outcome. A replay makes millions of objects and no reference cycle:
        the cycle collector waits until it is done (``elb.core.gcpause``; left running, it walks
        the replay's live objects again and again, about a tenth of the replay's time, and finds
        nothing to collect)."""
        with paused():
            return self._run()

    def _run(self) -> SimOutcome:
        poll = self.t0
        quick = math.inf  # the peek that will see a new waiting job, when one waits
        total = max(1.0, self.jobs[-1].submit - self.t0)
        last_report = -1.0
        quiet_since: float | None = None
        while True:
            nxt = self._next_event()
            if nxt <= min(poll, quick) and nxt < math.inf:
                self._events_at(nxt)
                if self.cadence.peek:
                    quick = self._peek_after(nxt, quick)
                continue
            if self._done():
                break
            if quick < poll and not self._peeked(quick):  # what came started before the peek
                quick = math.inf
                continue
            poll, quick = min(poll, quick), math.inf
            if poll == math.inf:  # asleep until a node event, and none will come: poll again
                poll = self._grid(self._last_event_at)
            now = poll
            self.out.decisions += 1
            changed, step = self._pass(now, nxt)
            # Nothing can ever change: no event to come and the policy does nothing.
            # It gives up when the policy says nothing will ever change, or ``stall_limit`` after
            # the first poll from which nothing changed, whichever comes first; either way the
            # nodes are billed up to that first poll, so the result does not depend on
            # fast-forward or on the limit.
            quiet_since = None if changed or nxt < math.inf else (now if quiet_since is None else quiet_since)
            if quiet_since is not None and step > quiet_since + self.s.stall_limit:
                self.out.stalled = True
                self._stalled_at = quiet_since
                break
            self.out.polls += int((step - now) / self.s.poll_interval + 0.5) if step < math.inf else 1
            poll = step
            if self.progress is not None and now - last_report >= total / 200:
                last_report = now
                self.progress(min(1.0, (now - self.t0) / total))
        return self._close()

    def _pass(self, now: float, nxt: float) -> tuple[bool, float]:
        """The pass at ``now`` (``nxt``: the next event): whether it changed the cluster, and
        the next poll. When the planner can act only on the policy's plan (``_hint_first``),
        the quiet hint is asked first: a wake after ``now`` says the policy's plan is empty, and
        so is the pass's, which is then not planned (the hint's wake is the next poll's as well)."""
        self._last_pass, self._unseen = now, self.pending.next_number  # what waits now, this pass sees
        if self._hint_first:
            wake = self._wake(now, nxt, before_pass=True)
            if wake > now:
                return False, max(now + self.s.poll_interval, self._grid(wake))
        pp = self._plan(now)
        changed = self._carry_out(pp, now)
        if changed:
            self.dispatch(now)
            self._track_backlog(now)
        return changed, self._next_poll(pp, now, nxt)

    def _next_poll(self, pp: PassPlan, now: float, nxt: float) -> float:
        """The poll after ``now``: a poll interval on; after an empty plan, no sooner than the
        wake the quiet hint gives (``_wake``), on the poll grid."""
        step = now + self.s.poll_interval
        quiet = (pp.scaling is None or pp.scaling.empty) and pp.pool.empty and not pp.repairs
        if quiet and self.quiet is not None:
            step = max(step, self._grid(self._wake(now, nxt)))
        return step

    def _wake(self, now: float, nxt: float, *, before_pass: bool = False) -> float:
        """The earliest of the policy's quiet hint, the next event it watches (``nxt``, or a
        node's readiness), a stopped node's due time, the back-off's end and Slurm's next ask:
        before it, on an unchanged cluster, no pass plans anything. Before a pass, a hint that
        reads the changes alone (``NotedHint``) is given them instead of a whole snapshot."""
        assert self.quiet is not None
        until = self._noted_until(now) if before_pass else None
        if until is None:
            state = self.state(now)
            if isinstance(self.quiet, GroupedPolicy):
                until = self.quiet.quiet_until_groups(state, self.group_of, self.history)
            else:
                until = self.quiet.quiet_until(state, self.history)
        wake = min(until, nxt if self.watches_jobs else self._next_node_event())
        if self.pooled:
            wake = min(wake, self._next_pool_due())
        if self._tell_backoff:
            wake = min(wake, self._backoff_ends(now))
        if self.power is not None:
            wake = min(wake, self._slurm_wakes(now))
        return wake

    def _noted_until(self, now: float) -> float | None:
        """The hint of a ``NotedHint`` policy on the changes since the last snapshot; None when
        there is none or it cannot tell (a whole snapshot is then made)."""
        if self._noted_hint is None:
            return None
        noted = self._noted()
        return None if noted is None else self._noted_hint.quiet_until_noted(*noted, now, self.history)

    def _slurm_wakes(self, now: float) -> float:
        """Behind Slurm: before when its power saving asks nothing new while the cluster does
        not change (``PowerSaving.wake``); inf behind Grid Engine."""
        if self.power is None:
            return math.inf
        snapshot, records = self.snapshot(now)
        return self.power.wake(self.asked, snapshot, records, self.history, now)

    def _close(self) -> SimOutcome:
        end = self.out.last_end
        if self.out.stalled:  # the nodes kept running, and billing, up to the first poll from which nothing changed
            end = max(end, self.jobs[-1].submit, self._stalled_at)
        closing = len(self.nodes)  # switched off by the end of the replay, not by the policy
        for node in list(self.nodes.values()):
            if node.busy_since is not None:
                node.busy_seconds += end - node.busy_since
            self._terminate(node, max(end, node.launched_at))
        self.out.terminations -= closing
        for name, p in list(self.pooled.items()):  # the stopped nodes go at the end too
            self._unpool(name, max(p.stopped_at, min(end, due(p, self.pools[self.pool_group[name]]))))
        self.out.never_started = len(self.pending) + (len(self.jobs) - self.next_sub)
        if self._backlog_since is not None:
            self.out.longest_backlog = max(self.out.longest_backlog, end - self._backlog_since)
        for n in self.dead:
            if n.name == self.s.master and self.s.master_exec_slots > 0:
                continue  # the master is not billed
            assert n.terminated_at is not None
            self.out.nodes.append(
                NodeLife(
                    n.name, n.launched_at, n.ready_at, n.terminated_at, n.busy_seconds, n.group, n.slots, n.restart
                )
            )
        if self.progress is not None:
            self.progress(1.0)
        return self.out
