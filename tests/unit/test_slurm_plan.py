"""Slurm's asks as the one planner plans them, on values: the driver's read of the asks
(``elb.schedulers.slurm.driver.asks_now``), their actions (``elb.core.askplan.plan_asks``) and the whole pass
(``elb.core.planner.plan_pass``) with a scheduler that names its nodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from elb.core.askplan import NameHolds, plan_asks, release_retry_at
from elb.core.backoff import Backoff, Backoffs, Cause
from elb.core.config import Config, parse_config
from elb.core.demand import DemandSplit
from elb.core.interfaces import Instance
from elb.core.model import History, JobPhase, Node, NodeState, Plan, Removal
from elb.core.orders import Orders
from elb.core.planner import PassInputs, plan_pass
from elb.core.scheduler import Ask, AskKind, NamePool, PoolName
from elb.core.state import ClusterState
from elb.schedulers.slurm.commands import SlurmRead
from elb.schedulers.slurm.driver import asks_now, name_pool
from elb.schedulers.slurm.parse import SlurmNode
from elb.schedulers.slurm.view import array_tasks, snapshot
from tests.unit.factories import EC2
from tests.unit.slurm_fakes import NOW, sjob, snode


class Removes:
    """A policy that removes the nodes it is given and asks for ten (the planner's rules are
    under test: with named asks the policy's own launches are not used)."""

    name = "removes"

    def __init__(self, *names: str) -> None:
        self.names = names

    def decide(self, state: ClusterState, history: History) -> Plan:
        return Plan(
            add=10, add_names=tuple(f"x{i}" for i in range(10)), remove=tuple(Removal(n, "idle") for n in self.names)
        )


def config(**policy: object) -> Config:
    return parse_config({"scheduler": "slurm", "policy": {"max_nodes": 4, **policy}})


def record(name: str, state: NodeState = NodeState.READY, *, at: float = NOW - 600) -> Node:
    return Node(name, state, launched_at=at, updated_at=at, ready_at=at, instance_id=f"i-{name}", private_ip="10.0.0.5")


def want(name: str, at: float = NOW - 30, **kw: object) -> Ask:
    return Ask(name, AskKind.WANT, at, **kw)  # type: ignore[arg-type]


def read(*nodes: SlurmNode) -> SlurmRead:
    return SlurmRead.of((), nodes)


def test_an_ask_slurm_still_wants_is_kept_with_its_partitions_group() -> None:
    kept, dropped, gone = asks_now(
        [want("node001")],
        read(snode("node001", "idle", "powering_up", partition="gpu")),
        [],
        resume_timeout=600,
        register_wait=0,
        partition_groups={"gpu": "gpus"},
        now=NOW,
    )
    assert [(a.node, a.group) for a in kept] == [("node001", "gpus")] and dropped == () and gone == {}


def test_a_stale_ask_is_dropped_never_acted_on() -> None:
    asks = [want("node001", NOW - 7200), want("node002"), want("node009")]
    kept, dropped, _ = asks_now(
        asks,
        read(snode("node001", "idle", "powering_up"), snode("node002", "idle", "powered_down")),
        [],
        resume_timeout=600,
        register_wait=0,
        partition_groups={},
        now=NOW,
    )
    assert kept == ()
    why = {d.ask.node: d.reason for d in dropped}
    assert "past Slurm's ResumeTimeout (600 s)" in why["node001"]
    assert "no longer wants it (it shows idle+cloud+powered_down)" in why["node002"]
    assert why["node009"] == "Slurm does not know node node009"


def test_an_old_ask_of_a_node_elb_brings_up_is_left_to_the_bring_up() -> None:
    kept, dropped, _ = asks_now(
        [want("node001", NOW - 7200)],
        read(snode("node001", "idle", "powering_up")),
        [record("node001", NodeState.PROVISIONING)],
        resume_timeout=600,
        register_wait=0,
        partition_groups={},
        now=NOW,
    )
    assert [a.node for a in kept] == ["node001"] and dropped == ()


def test_a_node_slurm_powered_down_under_elb_is_gone() -> None:
    _, _, gone = asks_now(
        [],
        read(snode("node001", "idle", "powered_down"), snode("node002", "idle")),
        [record("node001"), record("node002")],
        resume_timeout=None,
        register_wait=0,
        partition_groups={},
        now=NOW,
    )
    assert gone == {"node001": "Slurm has it idle+cloud+powered_down"}


def _asks(asks: Sequence[Ask], records: Sequence[Node] = (), in_flight: frozenset[str] = frozenset()) -> object:
    return plan_asks(
        asks,
        (),
        {},
        records,
        in_flight,
        max_nodes=2,
        group_max={"default": 2},
        first_group="default",
        master="master",
        now=NOW,
    )


def test_wants_are_launched_within_max_nodes_and_the_rest_given_back() -> None:
    p = plan_asks(
        [want("node001"), want("node002"), want("node003")],
        (),
        {},
        [],
        frozenset(),
        max_nodes=2,
        group_max={"default": 2},
        first_group="default",
        master="master",
        now=NOW,
    )
    assert [a.node for a in p.launch] == ["node001", "node002"]
    assert [(d.node, d.reason) for d in p.declines] == [("node003", "max_nodes 2 reached")]


def test_a_want_is_answered_once_its_node_is_ready_and_left_open_while_it_boots() -> None:
    p = plan_asks(
        [want("node001"), want("node002")],
        (),
        {},
        [record("node001"), record("node002", NodeState.PROVISIONING)],
        frozenset(),
        max_nodes=4,
        group_max={"default": 4},
        first_group="default",
        master="master",
        now=NOW,
    )
    assert p.launch == () and p.declines == ()
    assert [(a.node, a.answer) for a in p.answers] == [("node001", "ready")]


def test_releases_remove_ready_nodes_abandon_booting_ones_and_resets_give_back_the_rest() -> None:
    asks = [
        Ask("node001", AskKind.RELEASE, NOW),
        Ask("node002", AskKind.RESET, NOW),
        Ask("node003", AskKind.RESET, NOW),
        Ask("node004", AskKind.RELEASE, NOW),
    ]
    records = [record("node001"), record("node002", NodeState.PROVISIONING)]
    p = plan_asks(
        asks, (), {}, records, frozenset(), max_nodes=4, group_max={}, first_group="default", master="master", now=NOW
    )
    assert [r.node for r in p.removals] == ["node001"] and [r.node for r in p.abandon] == ["node002"]
    assert [d.node for d in p.declines] == ["node003"]
    assert [(a.node, a.answer) for a in p.answers] == [("node004", "done: the node is not running")]


def test_a_give_back_that_failed_waits_for_its_retry_time_doubling() -> None:
    failed = want("node003", attempts=1, retry_at=NOW + 60)
    p = plan_asks(
        [failed], (), {}, [record("node001"), record("node002")], frozenset(), max_nodes=2,
        group_max={"default": 2}, first_group="default", master="master", now=NOW,
    )  # fmt: skip
    assert p.declines == ()
    assert (release_retry_at(1, NOW), release_retry_at(2, NOW), release_retry_at(9, NOW)) == (
        NOW + 60,
        NOW + 120,
        NOW + 3600,
    )


def _inputs(asks: Sequence[Ask], records: Sequence[Node] = (), **kw: object) -> PassInputs:
    """The pass's inputs: each record's instance runs (stopped for a pooled node) and Slurm has
    the ready ones up."""
    ready = [snode(n.name, "idle") for n in records if n.state is NodeState.READY]
    snap = snapshot((), ready, NOW)
    instances = tuple(
        Instance(n.instance_id, n.name, "stopped" if n.state.pooled else "running", n.launched_at, n.private_ip)
        for n in records
        if n.instance_id
    )
    return PassInputs(
        snapshot=snap,
        nodes=tuple(records),
        instances=instances,
        demand=DemandSplit(snap),
        history=History(),
        orders=kw.pop("orders", Orders()),  # type: ignore[arg-type]
        backoff=kw.pop("backoff", Backoffs()),  # type: ignore[arg-type]
        asks=tuple(asks),
        scheduler="Slurm",
        cloud=EC2,
        **kw,  # type: ignore[arg-type]
    )


def test_the_pass_launches_the_nodes_slurm_named_not_the_policys_count() -> None:
    p = plan_pass(_inputs([want("node002"), want("node003")]), config(), Removes(), NOW)
    assert p.scaling is not None and p.scaling.add_names == ("node002", "node003")
    assert "the scheduler asked for node002, node003" in p.scaling.add_reason


def test_a_backed_off_launch_is_given_back_with_why() -> None:
    backoff = Backoffs(default=Backoff(1, NOW + 300, Cause.PROVISION, "node001: provisioning failed"))
    p = plan_pass(_inputs([want("node001")], backoff=backoff), config(), Removes(), NOW)
    assert p.scaling is not None and p.scaling.add == 0 and p.launches_held == 1
    (d,) = p.declines
    assert d.node == "node001" and "launch backed off for 5 min more" in d.reason


def test_a_backed_off_ask_slurm_waits_for_long_enough_stays_open_and_launches_when_it_ends() -> None:
    """Given back, the job goes back in line (Slurm holds a requeued job 120 s more): an ask
    whose deadline leaves room for the back-off and a boot (EC2's 600 s here) stays open."""
    backoff = Backoffs(default=Backoff(1, NOW + 60, Cause.PROVISION, "node005: its slurmd did not register"))
    ask = want("node001", deadline=NOW - 30 + 1800)
    p = plan_pass(_inputs([ask], backoff=backoff), config(), Removes(), NOW)
    assert p.scaling is not None and p.scaling.add == 0 and p.launches_held == 1
    assert p.declines == ()
    (w,) = p.waiting
    assert w.node == "node001" and "stays open" in w.reason and "backed off for 60 s more" in w.reason
    assert "wait node001: launch backed off" in "\n".join(p.describe())
    later = plan_pass(_inputs([ask], backoff=backoff), config(), Removes(), NOW + 61)
    assert later.scaling is not None and later.scaling.add_names == ("node001",) and later.waiting == ()


def test_a_backed_off_ask_too_close_to_its_deadline_is_given_back() -> None:
    backoff = Backoffs(default=Backoff(1, NOW + 60, Cause.PROVISION, "node005: its slurmd did not register"))
    # The back-off's 60 s and a boot (600 s) end after Slurm gives up (asked 30 s ago, ResumeTimeout 600 s).
    p = plan_pass(_inputs([want("node001", deadline=NOW - 30 + 600)], backoff=backoff), config(), Removes(), NOW)
    assert p.waiting == ()
    (d,) = p.declines
    assert d.node == "node001" and "backed off" in d.reason
    # No deadline known (ResumeTimeout unread): given back, as before.
    p = plan_pass(_inputs([want("node001")], backoff=backoff), config(), Removes(), NOW)
    assert p.waiting == () and [d.node for d in p.declines] == ["node001"]


def test_a_backed_off_ask_with_room_for_a_boot_but_not_for_the_play_is_given_back() -> None:
    """Launched when the back-off ends, the node boots (EC2's ``boot_timeout``, 600 s) and is
    provisioned (``provision.timeout``, 900 s) before its ask's deadline, or Slurm has given up on
    it by then and the launch is wasted: an ask with room for the boot alone is given back."""
    backoff = Backoffs(default=Backoff(1, NOW + 60, Cause.PROVISION, "node005: its slurmd did not register"))
    ask = want("node001", deadline=NOW - 30 + 1000)  # 60 s + 600 s fit before it; 60 + 600 + 900 do not
    p = plan_pass(_inputs([ask], backoff=backoff), config(), Removes(), NOW)
    assert p.waiting == ()
    assert [d.node for d in p.declines] == ["node001"]
    # With a play bounded at 200 s, the same ask has room: left open.
    short = parse_config({"scheduler": "slurm", "policy": {"max_nodes": 4}, "provision": {"timeout": 200}})
    p = plan_pass(_inputs([ask], backoff=backoff), short, Removes(), NOW)
    assert p.declines == () and [w.node for w in p.waiting] == ["node001"]


def test_the_asks_slurm_still_wants_carry_its_deadline_less_the_drivers_wait_for_a_registration() -> None:
    """Slurm gives up ResumeTimeout after its ask; the node must have been provisioned by that
    less the wait for its slurmd to register (``slurm.register_timeout`` after the play)."""
    kept, _, _ = asks_now(
        [want("node001", NOW - 30)],
        read(snode("node001", "idle", "powering_up")),
        [],
        resume_timeout=600,
        register_wait=120,
        partition_groups={},
        now=NOW,
    )
    assert [a.deadline for a in kept] == [NOW - 30 + 600 - 120]
    kept, _, _ = asks_now(
        [want("node001", NOW - 30)],
        read(snode("node001", "idle", "powering_up")),
        [],
        resume_timeout=None,
        register_wait=120,
        partition_groups={},
        now=NOW,
    )
    assert [a.deadline for a in kept] == [None]


def test_paused_every_ask_is_given_back_and_the_scheduler_s_releases_still_go() -> None:
    asks = [want("node002"), Ask("node001", AskKind.RELEASE, NOW)]
    orders = Orders(paused_since=NOW - 10, pause_reason="maintenance", kept=frozenset({"node001"}))
    p = plan_pass(_inputs(asks, [record("node001")], orders=orders), config(), Removes(), NOW)
    assert p.scaling is not None and p.scaling.add == 0
    assert [(d.node, d.reason) for d in p.declines] == [("node002", "scaling paused by an admin (maintenance)")]
    assert [r.node for r in p.scaling.remove] == ["node001"]  # Slurm is done with it: not the admin's keep


def test_a_pooled_node_slurm_asks_for_is_started_again_under_its_own_name() -> None:
    cfg = config(warm_pool={"max_nodes": 2})
    pooled = Node(
        "node003", NodeState.STOPPED, NOW - 900, instance_id="i-3", stopped_at=NOW - 60, private_ip="10.0.0.3"
    )
    other = Node("node004", NodeState.STOPPED, NOW - 900, instance_id="i-4", stopped_at=NOW - 30, private_ip="10.0.0.4")
    p = plan_pass(_inputs([want("node003"), want("node001")], [pooled, other]), cfg, Removes(), NOW)
    assert [r.node for r in p.pool.restarts] == ["node003"]
    assert p.scaling is not None and p.scaling.add_names == ("node001",)  # node004 is not what Slurm asked


def test_the_neutral_snapshot_counts_array_tasks_and_holds_jobs_that_are_not_demand() -> None:
    assert array_tasks("8_[6-100%5]") == 95 and array_tasks("8") == 1
    snap = snapshot(
        (sjob("8_[1-3]", "PENDING"), sjob("9", "PENDING", reason="Dependency"), sjob("7", nodes=("node001",))),
        (snode("node001", "mixed", alloc=1), snode("node002", "idle", "powered_down")),
        NOW,
    )
    assert [(j.job_id, j.state, j.phase, j.tasks) for j in snap.pending] == [(8, "PENDING", JobPhase.WAITING, 3)]
    assert [h.name for h in snap.hosts] == ["node001"]  # a powered-down node is no host


def test_a_job_slurm_holds_for_its_begin_time_is_not_yet_demand_until_then(tmp_path: Path) -> None:
    """A requeued job (a node given back or lost) waits for its begin time: elb reads when."""
    from dataclasses import replace

    from elb.schedulers.slurm.driver import Slurm
    from elb.service.journal import Journal
    from tests.unit.slurm_fakes import FakeSlurm

    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp_path / "state"),
            "slurm": {"requests": str(tmp_path / "requests")},
            "cloud": {"provider": "local"},
        }
    )
    fake = FakeSlurm()
    fake.jobs = [
        replace(sjob("5", "PENDING", reason="BeginTime"), started=NOW + 40),
        sjob("6", "PENDING", reason="Dependency"),
        sjob("7", "PENDING", reason="BeginTime"),  # its begin time passed: squeue shows N/A
    ]
    driver = Slurm(cfg, Journal(cfg.journal_path), fake)
    read = driver.read((), NOW)
    split = {nd.job.job_id: nd for nd in driver.demand(read, (), 2).not_demand}
    assert split[5].until == NOW + 40 and not split[5].held and "BeginTime" in split[5].reason
    assert split[6].until is None and split[6].held
    assert split[7].until == NOW and not split[7].held


def test_an_idle_node_is_kept_for_a_job_due_within_a_boot_and_removed_otherwise() -> None:
    """Slurm would start the requeued job on the idle node at its begin time: removing the node
    a second before means a launch and a boot for it."""
    from elb.core.demand import NotDemand
    from elb.core.model import Job

    job = Job(5, "j", "u", "PENDING", JobPhase.HELD, 2)
    records = [record("node001")]

    def removing(due_in: float) -> PassInputs:
        inputs = _inputs([], records)
        demand = DemandSplit(inputs.snapshot, (NotDemand(job, "Slurm holds it: BeginTime", until=NOW + due_in),))
        return dataclasses.replace(inputs, demand=demand)

    cfg = config(boot_time=120)
    p = plan_pass(removing(40), cfg, Removes("node001"), NOW)
    assert p.scaling is not None and p.scaling.remove == ()
    assert "kept node001 idle: job(s) 5 may start within 40 s" in p.scaling.reason
    p = plan_pass(removing(-3), cfg, Removes("node001"), NOW)  # due, not yet started by Slurm
    assert p.scaling is not None and p.scaling.remove == ()
    p = plan_pass(removing(600), cfg, Removes("node001"), NOW)
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node001"]
    # Due for longer than a boot and still not started: Slurm waits for something else (in the
    # soak, a job requeued again and again kept an idle node past the drain's limit).
    p = plan_pass(removing(-600), cfg, Removes("node001"), NOW)
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node001"]


def test_a_job_read_due_is_due_since_the_first_read_that_showed_it_due() -> None:
    """squeue shows N/A for a begin time that passed: the job is due since the first read that
    showed it so, not since each read's time (or it would be due 'within 0 s' for ever)."""
    from elb.schedulers.slurm.held import columns, held_answers

    due = sjob("7", "PENDING", reason="BeginTime")  # its begin time passed: squeue shows N/A
    since: dict[str, float] = {}
    (first,) = held_answers(columns(SlurmRead.of([due], ()).lines), NOW, since)
    (later,) = held_answers(columns(SlurmRead.of([due], ()).lines), NOW + 300, since)
    assert first.until == NOW and later.until == NOW and since == {"7": NOW}
    held_answers(columns(SlurmRead.of([sjob("8", "PENDING", reason="Dependency")], ()).lines), NOW + 310, since)
    assert since == {}  # a job no longer read due is forgotten


def test_an_ask_waiting_for_the_probe_says_so() -> None:
    probing = Backoff(1, NOW - 5, Cause.PROVISION, "node005: its slurmd did not register", probing=True)
    ask = want("node002", deadline=NOW + 1800)
    p = plan_pass(_inputs([ask], backoff=Backoffs(default=probing)), config(), Removes(), NOW)
    (w,) = p.waiting
    assert w.reason.startswith("launch waits for the probe on its way after 1 failed launch round(s)")


def test_a_node_ordered_out_is_removed_though_a_job_comes_due() -> None:
    """A removal the admin or a notice ordered (a spot interruption's node) is never kept for a
    job held until soon: only the cost rule's removals are."""
    from elb.core.demand import NotDemand
    from elb.core.model import Job

    job = Job(5, "j", "u", "PENDING", JobPhase.HELD, 2)
    orders = Orders(remove=frozenset({"node001"}), causes={"node001": ("spot-interruption", "2 min")})
    inputs = _inputs([], [record("node001")], orders=orders)
    demand = DemandSplit(inputs.snapshot, (NotDemand(job, "Slurm holds it: BeginTime", until=NOW + 10),))
    p = plan_pass(dataclasses.replace(inputs, demand=demand), config(boot_time=120), Removes(), NOW)
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node001"]


# The names Slurm may pick next: as many open as elb may launch, the rest held (drained).


def _holds(
    pool: NamePool,
    records: Sequence[Node] = (),
    asks: Sequence[Ask] = (),
    *,
    max_nodes: int = 3,
    group_max: dict[str, int] | None = None,
    afford: dict[str, int] | None = None,
) -> NameHolds:
    return plan_asks(
        asks,
        (),
        {},
        records,
        frozenset(),
        max_nodes=max_nodes,
        group_max=group_max or {"default": max_nodes},
        first_group="default",
        master="master",
        now=NOW,
        names=pool,
        afford=afford,
    ).holds


def _open(*names: str, group: str | None = None) -> tuple[PoolName, ...]:
    return tuple(PoolName(n, group) for n in names)


def test_at_max_nodes_every_name_slurm_may_pick_is_held() -> None:
    """The soak's churn: three nodes up at max_nodes 3, five names powered down; Slurm put the
    next job on one of them, elb gave it back, the job waited two minutes and went to another."""
    alive = [record(f"node00{i}") for i in (1, 2, 3)]
    h = _holds(NamePool(open=_open("node004", "node005", "node006", "node007", "node008")), alive)
    assert h.hold == ("node004", "node005", "node006", "node007", "node008") and h.reopen == ()
    assert h.reason == "no room within max_nodes 3"
    assert "hold node004 from the scheduler's asks: no room within max_nodes 3" in h.describe()


def test_as_many_names_stay_open_as_there_is_room_the_lowest_first() -> None:
    h = _holds(NamePool(open=_open("node005", "node002", "node004", "node003")), [record("node001")])
    assert h.hold == ("node004", "node005") and h.reopen == ()


def test_this_passes_launches_take_room_first() -> None:
    h = _holds(NamePool(open=_open("node003", "node004")), [record("node001")], [want("node002")])
    assert h.hold == ("node004",)


def test_held_names_are_reopened_when_room_frees_and_nothing_changes_when_it_fits() -> None:
    pool = NamePool(open=_open("node002"), held=_open("node005", "node003", "node004"))
    h = _holds(pool, [record("node001")])
    assert h.hold == () and h.reopen == ("node003",)
    assert _holds(NamePool(open=_open("node002", "node003"), held=_open("node004")), [record("node001")]) == NameHolds()


def test_a_warm_pool_nodes_name_stays_open_before_the_others() -> None:
    stopped = record("node006", NodeState.STOPPED)
    h = _holds(NamePool(open=_open("node004", "node005", "node006")), [record("node001"), record("node002"), stopped])
    assert h.hold == ("node004", "node005")


def test_each_group_keeps_open_only_what_its_own_max_nodes_leaves() -> None:
    cpu = dataclasses.replace(record("node001"), group="cpu")
    pool = NamePool(open=(*_open("node002", "node003", group="cpu"), *_open("gpu001", "gpu002", group="gpu")))
    h = _holds(pool, [cpu], max_nodes=4, group_max={"cpu": 2, "gpu": 1})
    assert h.hold == ("gpu002", "node003") and h.reason == "no room within its group's max_nodes"


def test_without_a_name_pool_nothing_is_held() -> None:
    p = plan_asks(
        [], (), {}, [record("node001")], frozenset(), max_nodes=1, group_max={"default": 1},
        first_group="default", master="master", now=NOW,
    )  # fmt: skip
    assert p.holds == NameHolds()


def test_the_pool_is_slurms_powered_down_cloud_nodes_an_admins_drain_left_alone() -> None:
    held = dataclasses.replace(snode("node003", "idle", "powered_down", "drain"), reason="elb: held: no room")
    admin = dataclasses.replace(snode("node004", "idle", "powered_down", "drain"), reason="disk check")
    nodes = (
        snode("node001", "idle"),  # up
        snode("node002", "idle", "powered_down", partition="gpu"),
        held,
        admin,
        snode("node005", "idle", "powering_up"),
        snode("node006", "down", "powered_down"),
        snode("node007", "idle", "powered_down"),  # elb's record is alive: gone, not free
        dataclasses.replace(snode("node008", "allocated", "drain"), reason="elb: held: no room"),
        SlurmNode("static1", "idle", frozenset(), 2, 0, ("cloud",), "none"),
    )
    pool = name_pool(read(*nodes), [record("node007"), record("node008")], {"gpu": "gpus"})
    assert pool == NamePool(
        open=(PoolName("node002", "gpus"),),
        held=(PoolName("node003", None, "no room"),),
        held_alive=("node008",),
        pending=("node005",),
    )


def test_a_name_still_powering_down_is_in_the_pool_and_held_when_there_is_no_room() -> None:
    """Seen in the soak: elb removed node002, Slurm powered it down for its SuspendTimeout; a pass
    used the last room and held the names open then, not node002, which came back to Slurm's
    pool two seconds later; Slurm asked for it and elb gave it back. slurmctld 22.05 drains a
    powering-down node (IDLE+CLOUD+DRAIN+POWERING_DOWN): such a name is in the pool, marked
    settling, and held like the others."""
    nodes = (
        snode("node002", "idle", "powering_down"),
        dataclasses.replace(
            snode("node003", "idle", "powering_down", "drain"), reason="elb: held: no room within max_nodes 3"
        ),
        snode("node004", "idle", "powered_down"),
    )
    pool = name_pool(read(*nodes), [], {})
    assert pool == NamePool(
        open=(PoolName("node002", None), PoolName("node004", None)),
        held=(PoolName("node003", None, "no room within max_nodes 3"),),
        settling=("node002", "node003"),
    )
    alive = [record(f"node00{i}") for i in (1, 5, 6)]
    h = _holds(pool, alive)
    assert h.hold == ("node002", "node004") and h.reopen == ()


def test_a_name_still_powering_down_is_kept_open_after_the_ones_slurm_can_power_up_now() -> None:
    h = _holds(NamePool(open=_open("node002", "node004"), settling=("node002",)), [record("node001")], max_nodes=2)
    assert h.hold == ("node002",)
    # and after a held one, which an undrain makes Slurm's at once
    h = _holds(
        NamePool(open=_open("node002"), held=_open("node005"), settling=("node002",)), [record("node001")], max_nodes=2
    )
    assert h.hold == ("node002",) and h.reopen == ("node005",)


def test_a_held_name_still_powering_down_is_reopened_only_once_it_is_down() -> None:
    """An undrain of a node that is powering down makes slurmctld 22.05 ask the node for its
    registration; Slurm could not use it before it is down anyway."""
    pool = NamePool(held=_open("node002", "node003"), settling=("node002",))
    assert _holds(pool, max_nodes=2) == NameHolds((), ("node003",), "")
    assert _holds(dataclasses.replace(pool, settling=()), max_nodes=2).reopen == ("node002", "node003")


def test_a_name_slurm_brings_up_before_elb_reads_its_ask_takes_room() -> None:
    """Seen on the real slurmctld: a job made Slurm power node001 up; elb's next pass read it
    powering up a pass before its resume request came, counted room for one more, reopened
    node002, Slurm put the second job there, and elb gave it back."""
    pool = NamePool(held=_open("node002", "node003"), pending=("node001",))
    assert _holds(pool, max_nodes=1) == NameHolds()
    for flags in (("powering_up",), ("power_up",), ("powered_down",)):  # the last: allocated, not yet powering up
        shown = name_pool(read(snode("node001", "allocated", *flags), snode("node002", "idle", "powered_down")), [], {})
        assert shown.pending == ("node001",) and [p.name for p in shown.open] == ["node002"], flags
    asked = _holds(pool, asks=[want("node001")], max_nodes=1)  # its ask read: launched, counted once
    assert asked == NameHolds()
    assert _holds(pool, max_nodes=2).reopen == ("node002",)


def test_a_held_name_whose_node_is_alive_is_reopened_whatever_the_room() -> None:
    """Slurm put a job on a name as elb held it, and elb launched it: the hold must not stay on a
    node elb has (it would read as an admin's drain)."""
    pool = NamePool(open=_open("node003"), held_alive=("node002",))
    h = _holds(pool, [record("node001"), record("node002")], max_nodes=2)
    assert h.hold == ("node003",) and h.reopen == ("node002",)
    orders = Orders(paused_since=NOW - 60, pause_reason="maintenance")
    inputs = dataclasses.replace(_inputs([], [record("node002")], orders=orders), names=pool)
    assert plan_pass(inputs, config(), Removes(), NOW).names.reopen == ("node002",)


def test_the_budget_keeps_open_only_the_names_it_affords_after_this_passs_launches() -> None:
    """With policy.budget, an ask the budget holds was given back (its job requeued behind
    Slurm's hold, then put on the next name): the names past what it affords are held too."""
    pool = NamePool(open=_open("node003", "node004", "node005"))
    h = _holds(pool, [record("node001")], [want("node002")], max_nodes=8, afford={"default": 2})
    assert h.hold == ("node004", "node005") and h.reason == "the budget affords no more node of its group now"
    broke = _holds(pool, [record("node001")], max_nodes=8, afford={"default": 0})
    assert broke.hold == ("node003", "node004", "node005")
    both = _holds(NamePool(open=_open("node003", "node004")), [record("node001")], max_nodes=1, afford={"default": 0})
    assert both.reason == "no room within max_nodes 1" and both.hold == ("node003", "node004")


def test_with_a_budget_whose_spend_is_not_read_the_names_stay_as_they_are() -> None:
    groups = [{"name": "default", "slots": 2, "max_nodes": 4, "price_per_hour": 1.0}]
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "policy": {"max_nodes": 4, "budget": {"amount": 100, "period": "day"}},
            "node_groups": groups,
        }
    )
    inputs = dataclasses.replace(_inputs([], [record("node001")]), names=NamePool(open=_open("node003", "node004")))
    assert inputs.spend is None
    assert plan_pass(inputs, cfg, Removes(), NOW).names == NameHolds()


def test_scaling_paused_by_an_admin_holds_every_name_slurm_may_pick() -> None:
    orders = Orders(paused_since=NOW - 60, pause_reason="maintenance")
    inputs = dataclasses.replace(
        _inputs([], [record("node001")], orders=orders), names=NamePool(open=_open("node003", "node002"))
    )
    h = plan_pass(inputs, config(), Removes(), NOW).names
    assert h.hold == ("node002", "node003") and h.reason == "scaling paused by an admin (maintenance)"


def test_a_name_a_waiting_job_asks_for_by_name_is_kept_open_before_the_others() -> None:
    """``sbatch -w node005`` while elb held node005: Slurm says ``ReqNodeNotAvail,
    UnavailableNodes:node005``; the name is reopened (another held in its place), not left
    held with its job waiting for ever."""
    nodes = [snode(f"node00{i}", "idle", "powered_down") for i in (2, 3)]
    nodes += [dataclasses.replace(snode("node005", "idle", "powered_down", "drain"), reason="elb: held: no room")]
    jobs = [sjob("9", "PENDING", reason="ReqNodeNotAvail, UnavailableNodes:node[005-006]"), sjob("10", "PENDING")]
    pool = name_pool(SlurmRead.of(jobs, nodes), [record("node001")], {})
    assert pool.wanted == ("node005", "node006")
    h = _holds(pool, [record("node001")], max_nodes=3)
    assert h.reopen == ("node005",) and h.hold == ("node003",)
    assert name_pool(SlurmRead.of(jobs, nodes[:2]), [], {}).wanted == ()  # nothing held: not read


def _held(name: str, reason: str | None) -> PoolName:
    return PoolName(name, None, reason)


def test_a_held_name_that_shows_another_reason_is_held_again_with_this_passes() -> None:
    """Paused, then resumed at max_nodes: the names still held must not go on saying "paused"
    (an admin reading ``sinfo -R`` would take elb for paused still)."""
    pool = NamePool(open=_open("node002"), held=(_held("node003", "scaling paused by an admin (maintenance)"),))
    h = _holds(pool, [record("node001")], max_nodes=2)
    assert h.hold == ("node003",) and h.reopen == () and h.reason == "no room within max_nodes 2"


def test_a_held_name_that_shows_this_passes_reason_as_slurm_cleans_it_is_left_as_it_is() -> None:
    """Slurm's reasons take no apostrophe (the driver writes a space): the same words are the
    same reason, so a steady pass holds nothing again."""
    cpu = dataclasses.replace(record("node001"), group="cpu")
    pool = NamePool(
        open=_open("node002", group="cpu"),
        held=(PoolName("node003", "cpu", "no room within its group s max_nodes"),),
    )
    assert _holds(pool, [cpu], max_nodes=4, group_max={"cpu": 2}) == NameHolds()


def test_a_held_name_whose_reason_is_not_known_is_left_as_it_is() -> None:
    pool = NamePool(open=_open("node002"), held=(_held("node003", None),))
    assert _holds(pool, [record("node001")], max_nodes=2) == NameHolds()


def test_the_names_still_held_when_scaling_is_paused_say_so() -> None:
    orders = Orders(paused_since=NOW - 60, pause_reason="maintenance")
    held = (_held("node003", "no room within max_nodes 2"), _held("node004", None))
    pool = NamePool(open=_open("node002"), held=held)
    inputs = dataclasses.replace(_inputs([], [record("node001")], orders=orders), names=pool)
    h = plan_pass(inputs, config(), Removes(), NOW).names
    assert h.hold == ("node002", "node003") and h.reason == "scaling paused by an admin (maintenance)"


def test_the_driver_reads_back_the_reason_of_each_name_it_held() -> None:
    drained = [snode(n, "idle", "powered_down", "drain") for n in ("node003", "node004")]
    nodes = [
        dataclasses.replace(drained[0], reason="elb: held: no room within max_nodes 2"),
        dataclasses.replace(drained[1], reason="elb: held: " + "x" * 189),
    ]
    pool = name_pool(SlurmRead.of([], nodes), [], {})
    # a reason Slurm shows cut at its length limit is not known in full: None
    assert [(p.name, p.reason) for p in pool.held] == [("node003", "no room within max_nodes 2"), ("node004", None)]


def _died_under_a_job(dead: str | None) -> PassInputs:
    """node001-node004 (max_nodes 4) ready; node004 died under job 7: Slurm still has it
    allocated and lists the job there, its instance is listed as ``dead`` (None: not listed).
    Slurm asks for node005."""
    records = [record(f"node00{i}") for i in range(1, 5)]
    nodes = [snode(f"node00{i}", "idle") for i in range(1, 4)] + [snode("node004", "allocated", alloc=2)]
    snap = snapshot((sjob("7", nodes=("node004",)),), nodes, NOW)
    instances = [Instance(f"i-{n.name}", n.name, "running", n.launched_at, n.private_ip) for n in records[:3]]
    if dead is not None:
        instances.append(Instance("i-node004", "node004", dead, NOW - 600, "10.0.0.5"))  # type: ignore[arg-type]
    return dataclasses.replace(
        _inputs([want("node005")], records), snapshot=snap, demand=DemandSplit(snap), instances=tuple(instances)
    )


def test_a_node_whose_instance_is_listed_stopped_under_a_job_takes_no_room_from_slurms_asks() -> None:
    p = plan_pass(_died_under_a_job("stopped"), config(), Removes(), NOW)
    assert [k.node for k in p.kept] == ["node004"] and "takes no place under max_nodes" in p.kept[0].reason
    assert p.scaling is not None and p.scaling.add_names == ("node005",) and p.declines == ()


def test_a_node_whose_instance_is_missing_keeps_its_room_under_slurms_asks() -> None:
    # Not listed: the listing may be hollow, no evidence the machine is down.
    p = plan_pass(_died_under_a_job(None), config(), Removes(), NOW)
    assert [k.node for k in p.kept] == ["node004"]
    assert [(d.node, d.reason) for d in p.declines] == [("node005", "max_nodes 4 reached")]


def test_an_open_name_slurm_cannot_use_after_a_restart_is_reopened() -> None:
    """Reproduced on the test cluster: slurmctld 22.05, restarted, brings back each powered-down
    cloud node elb had held and reopened since its last power-down as not responding, and puts
    no job on it until an update touches it (an undrain does; the flag stays until the node
    powers up). In an hour of the soak every job waited so for 15 minutes (``ReqNodeNotAvail,
    UnavailableNodes:node[001-008]``) on three names elb had left open. Such a name, while a job
    waits on the nodes' availability, is in the pool as held (no reason of elb's shown), so
    that room reopens it: an undrain."""
    stuck = snode("node003", "idle", "powered_down", "not_responding")
    fine = snode("node002", "idle", "powered_down")
    waits = [sjob("9", "PENDING", reason="ReqNodeNotAvail, UnavailableNodes:node[001-008]")]
    pool = name_pool(SlurmRead.of(waits, [fine, stuck]), [], {})
    assert pool.open == (PoolName("node002", None),) and pool.held == (PoolName("node003", None, None),)
    h = _holds(pool, [record("node001")], max_nodes=3)
    assert h.reopen == ("node003",) and h.hold == ()
    # The other words Slurm gives a job that names no node, for the same cause.
    other = [
        sjob(
            "9",
            "PENDING",
            reason="Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
        )
    ]
    assert name_pool(SlurmRead.of(other, [fine, stuck]), [], {}).held == (PoolName("node003", None, None),)
    # No job waiting on it: left open as it is (nothing touched every pass).
    idle = [sjob("10", "PENDING", reason="Dependency"), sjob("11", "PENDING", reason="BeginTime")]
    assert name_pool(SlurmRead.of(idle, [fine, stuck]), [], {}).open == (
        PoolName("node002", None),
        PoolName("node003", None),
    )
    # No room: held as it is, never drained (no reason of elb's to write on it).
    assert _holds(pool, [record("node001"), record("node004")], max_nodes=3) == NameHolds((), (), "")


def test_an_open_name_slurm_cannot_use_is_reopened_for_a_job_that_waits_for_resources() -> None:
    """Seen in an hour of the soak: after restarts, the one name elb left open (``node005``) came
    back powered down and not responding while two nodes ran jobs; a job of two nodes waited
    with the reason ``Resources`` (and the jobs behind it with ``Priority``), Slurm asked for no
    node, and the cluster served with two nodes of three for minutes. A job that waits for
    resources waits on the nodes Slurm can use as much as one Slurm tells is kept off them."""
    stuck = snode("node005", "idle", "powered_down", "not_responding")
    busy = [snode("node003", "allocated"), snode("node004", "allocated")]
    waits = [
        sjob("348", "PENDING", reason="Resources"),
        sjob("349_[1-3]", "PENDING", reason="Priority"),
        sjob("337", "RUNNING", nodes=("node003",)),
        sjob("344", "RUNNING", nodes=("node004",)),
    ]
    pool = name_pool(SlurmRead.of(waits, [*busy, stuck]), [record("node003"), record("node004")], {})
    assert pool.open == () and pool.held == (PoolName("node005", None, None),)
    h = _holds(pool, [record("node003"), record("node004")], max_nodes=3)
    assert h.reopen == ("node005",) and h.hold == ()
