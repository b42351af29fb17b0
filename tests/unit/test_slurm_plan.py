"""The pure planner of elb's pass behind Slurm's power saving (elb.slurm.plan), on values."""

from __future__ import annotations

from collections.abc import Sequence

from elb.backoff import Backoff, Cause
from elb.config import Config, parse_config
from elb.interfaces import Instance
from elb.journal import SlurmRequestRecord
from elb.model import History, Node, NodeState, Plan, Removal, Snapshot
from elb.slurm.commands import SlurmRead
from elb.slurm.parse import SlurmJob, SlurmNode
from elb.slurm.plan import LAUNCH_GRACE, SlurmInputs, plan
from elb.slurm.view import array_tasks, snapshot
from elb.state import ClusterState

NOW = 1_000_000.0


class Removes:
    """A policy that removes the nodes it is given (the planner's filter is under test)."""

    name = "removes"

    def __init__(self, *names: str) -> None:
        self.names = names
        self.seen: Snapshot | None = None

    def decide(self, state: ClusterState, history: History) -> Plan:
        snapshot = state.snapshot
        self.seen = snapshot
        return Plan(remove=tuple(Removal(n, "idle too long") for n in self.names))


def config(**policy: object) -> Config:
    return parse_config({"policy": {"max_nodes": 4, **policy}, "slurm": {"partition_groups": {}}})


def snode(name: str, state: str = "idle", *flags: str, alloc: int = 0) -> SlurmNode:
    return SlurmNode(name, state, frozenset(("cloud", *flags)), 2, alloc, ("cloud",), "none")


def job(job_id: str, state: str = "RUNNING", nodes: tuple[str, ...] = (), reason: str = "None") -> SlurmJob:
    return SlurmJob(job_id, "cloud", state, reason, max(1, len(nodes)), 2, nodes, NOW - 60, None, None, "u", "j")


def record(name: str, state: NodeState = NodeState.READY, *, at: float = NOW - 600, **kw: object) -> Node:
    return Node(name, state, launched_at=at, updated_at=at, instance_id=f"i-{name}", private_ip="10.0.0.5", **kw)  # type: ignore[arg-type]


def request(rid: int, kind: str, nodes: str, at: float = NOW - 30) -> SlurmRequestRecord:
    return SlurmRequestRecord(rid, at, kind, nodes, at, None, None)


def inputs(
    *,
    nodes: Sequence[SlurmNode] = (),
    jobs: Sequence[SlurmJob] = (),
    records: Sequence[Node] = (),
    instances: Sequence[Instance] = (),
    requests: Sequence[SlurmRequestRecord] = (),
    backoff: Backoff | None = None,
    in_flight: frozenset[str] = frozenset(),
    watched_since: float | None = None,
) -> SlurmInputs:
    all_nodes = tuple(nodes) or tuple(snode(f"node00{i}", "idle", "powered_down") for i in range(1, 5))
    return SlurmInputs(
        read=SlurmRead(tuple(jobs), all_nodes),
        nodes=tuple(records),
        instances=tuple(instances),
        requests=tuple(requests),
        history=History(),
        backoff=backoff or Backoff(),
        in_flight=in_flight,
        watched_since=watched_since,
    )


def test_a_resume_request_launches_the_nodes_slurm_named() -> None:
    p = plan(inputs(requests=[request(1, "resume", "node[001-002]")]), config(), Removes(), NOW)
    assert p.launch == ("node001", "node002") and "Slurm asked for node001, node002" in p.launch_reason
    assert p.give_back == () and p.close == ()


def test_launches_beyond_max_nodes_are_given_back_to_slurm() -> None:
    recs = [record("node003"), record("node004")]
    p = plan(
        inputs(records=recs, requests=[request(1, "resume", "node[001-002]")]), config(max_nodes=3), Removes(), NOW
    )
    assert p.launch == ("node001",)
    assert [(g.node, g.reason) for g in p.give_back] == [("node002", "max_nodes 3 reached")]
    assert p.close == ()  # node001 is not ready yet


def test_a_backed_off_launch_is_given_back_with_why_and_the_request_closed() -> None:
    held = Backoff(
        rounds=2, next_launch_at=NOW + 300, cause=Cause.PROVISION, last_failure="node001: provisioning failed"
    )
    p = plan(inputs(requests=[request(7, "resume", "node001")], backoff=held), config(), Removes(), NOW)
    assert p.launch == ()
    (given,) = p.give_back
    assert given.node == "node001" and "backed off for 5 min more" in given.reason
    assert p.close == ((7, "given back: node001"),)


def test_a_node_elb_already_brings_up_is_not_launched_twice() -> None:
    recs = [record("node001", NodeState.PROVISIONING, at=NOW - 5)]
    p = plan(
        inputs(records=recs, requests=[request(1, "resume", "node001")], in_flight=frozenset({"node001"})),
        config(),
        Removes(),
        NOW,
    )
    assert p.launch == () and p.give_back == () and p.boot == () and p.close == ()


def test_a_resume_request_closes_once_its_nodes_are_ready() -> None:
    p = plan(inputs(records=[record("node001")], requests=[request(3, "resume", "node001")]), config(), Removes(), NOW)
    assert p.close == ((3, "ready"),)


def test_a_suspend_request_removes_the_node_and_closes_when_it_is_gone() -> None:
    req = [request(4, "suspend", "node001")]
    p = plan(inputs(records=[record("node001")], requests=req), config(), Removes(), NOW)
    assert [(r.node, r.reason) for r in p.remove] == [("node001", "Slurm powered it down (its SuspendProgram)")]
    assert p.close == ()
    gone = plan(inputs(records=[record("node001", NodeState.TERMINATED)], requests=req), config(), Removes(), NOW)
    assert gone.remove == () and gone.close == ((4, "done"),)


def test_a_resume_slurm_gave_up_on_removes_the_node_and_powers_it_down() -> None:
    nodes = [snode("node001", "down", "powered_down"), snode("node002", "idle", "powered_down")]
    p = plan(
        inputs(nodes=nodes, records=[record("node001")], requests=[request(5, "resume-fail", "node001")]),
        config(),
        Removes(),
        NOW,
    )
    assert [r.node for r in p.remove] == ["node001"]
    assert [g.node for g in p.give_back] == ["node001"]


def test_the_cost_rule_drains_only_ready_idle_nodes_slurm_has_up() -> None:
    nodes = [
        snode("node001"),  # idle, up
        snode("node002", "allocated", alloc=2),  # busy
        snode("node003", "idle", "powering_up"),  # not up yet
        snode("node004"),  # up, but a job was just allocated on it
    ]
    recs = [record(n) for n in ("node001", "node002", "node003", "node004")]
    policy = Removes("node001", "node002", "node003", "node004")
    p = plan(inputs(nodes=nodes, records=recs, jobs=[job("9", "CONFIGURING", ("node004",))]), config(), policy, NOW)
    assert [(d.node, d.reason) for d in p.drain] == [("node001", "idle too long")]
    assert policy.seen is not None and {h.name for h in policy.seen.hosts} == {"node001", "node002", "node004"}


def test_a_drain_cut_short_goes_on_and_a_powered_down_drained_node_is_removed() -> None:
    nodes = [snode("node001", "idle", "drain"), snode("node002", "idle", "drain", "powered_down")]
    recs = [record("node001", NodeState.DRAINING), record("node002", NodeState.DRAINING)]
    p = plan(inputs(nodes=nodes, records=recs), config(), Removes(), NOW)
    assert [d.node for d in p.drain] == ["node001"]
    assert [r.node for r in p.remove] == ["node002"]


def test_a_ready_node_slurm_lost_is_taken_out_unless_a_job_runs_there() -> None:
    # Slurm stopped hearing from these nodes' slurmd 11 min ago (unreachable_timeout: 10 min).
    lost = NOW - 660
    records = [record(f"node00{i}", at=NOW - 3600, last_up_at=lost) for i in range(1, 6)]
    nodes = [
        snode("node001", "idle", "not_responding"),  # slurmd gone, nothing on it
        snode("node002", "down", "not_responding", alloc=2),  # a job runs there
        snode("node003", "alloc", "not_responding", alloc=2),  # a job waits for it to configure
        snode("node004", "down"),  # an admin set it down; its slurmd answers
        snode("node005", "idle", "powering_up"),  # its slurmd never registered
    ]
    jobs = [job("7", "RUNNING", ("node002",)), job("8", "CONFIGURING", ("node003",))]
    p = plan(inputs(nodes=nodes, jobs=jobs, records=records), config(), Removes("node001"), NOW)
    assert [r.node for r in p.lost] == ["node001", "node003", "node005"]
    assert "Slurm has not had it up for 11 min (idle+cloud+not_responding" in p.lost[0].reason
    assert "unreachable_timeout 10 min), no job running there" in p.lost[0].reason
    assert any(n.startswith("node002: ") and "job 7 runs there; kept" in n for n in p.notes)
    assert p.drain == () and p.give_back == () and p.remove == ()  # taken out, not drained as well
    assert "take out node001: Slurm has not had it up" in "\n".join(p.describe())


def test_a_node_slurm_lost_recently_or_found_lost_at_a_restart_gets_the_whole_time_out() -> None:
    nodes = [snode("node001", "idle", "not_responding")]
    recent = [record("node001", last_up_at=NOW - 300)]
    assert plan(inputs(nodes=nodes, records=recent), config(), Removes(), NOW).lost == ()
    long_ago = [record("node001", at=NOW - 9000, last_up_at=NOW - 7200)]
    assert plan(inputs(nodes=nodes, records=long_ago, watched_since=NOW - 60), config(), Removes(), NOW).lost == ()
    assert [r.node for r in plan(inputs(nodes=nodes, records=long_ago), config(), Removes(), NOW).lost] == ["node001"]
    busy = plan(inputs(nodes=nodes, records=long_ago, in_flight=frozenset({"node001"})), config(), Removes(), NOW)
    assert busy.lost == ()  # an operation of elb on it goes first


def test_after_a_restart_booting_nodes_are_taken_up_or_given_up() -> None:
    inst = Instance("i-1", "node001", "running", NOW - 50, private_ip="10.77.0.9")
    recs = [
        record("node001", NodeState.LAUNCHING, at=NOW - 50),
        record("node002", NodeState.LAUNCHING, at=NOW - LAUNCH_GRACE - 1),
        record("node003", NodeState.LAUNCHING, at=NOW - 10),  # the cloud may list it soon
        record("node004", NodeState.REQUESTED, at=NOW - 5),  # the cloud was never asked
    ]
    req = [request(1, "resume", "node[001-004]")]
    p = plan(inputs(records=recs, instances=[inst], requests=req), config(), Removes(), NOW)
    assert [(b.node, b.instance.instance_id) for b in p.boot] == [("node001", "i-1")]
    assert [(f.node, f.reason) for f in p.forget] == [
        ("node002", "launching for 2 min with no instance"),
        ("node004", "requested, never launched"),
    ]
    assert p.launch == ("node002", "node004")  # given up, so launched again for Slurm's request


def test_orphans_are_instances_no_live_record_accounts_for() -> None:
    old = Instance("i-9", "node009", "running", NOW - 3600)
    young = Instance("i-8", "node008", "running", NOW - 10)
    mine = Instance("i-node001", "node001", "running", NOW - 3600)
    p = plan(inputs(records=[record("node001")], instances=[old, young, mine]), config(), Removes(), NOW)
    assert [i.instance_id for i in p.orphans] == ["i-9"]


def test_the_neutral_snapshot_counts_array_tasks_and_holds_jobs_that_are_not_demand() -> None:
    assert array_tasks("8_[6-100%5]") == 95 and array_tasks("8_3") == 1 and array_tasks("12") == 1
    snap = snapshot(
        [job("8_[1-4]", "PENDING", reason="Resources"), job("9", "PENDING", reason="Dependency")],
        [snode("node001")],
        NOW,
    )
    states = sorted((j.job_id, j.state, j.tasks) for j in snap.jobs)
    assert states == [(8, "qw", 4), (9, "hqw", 1)]
