"""The joined cluster state: journal records, cloud instances and SGE joined once, every node
predicate in one place."""

from __future__ import annotations

import pytest

from elb.core.interfaces import Instance, InstanceState
from elb.core.model import ALIVE_STATES, Host, Job, JobPhase, Node, NodeState, QueueInstance, Snapshot
from elb.core.policy.view import host_facts, host_numbers
from elb.core.state import busy_hosts, jobs_started_on, join, started_host, started_on
from elb.schedulers.sge.states import job_phase, queue_flags
from tests.unit.factories import T0, running


def _host(name: str, used: int = 0, states: str = "") -> Host:
    return Host(name, (QueueInstance("all.q", name, 8, used, 0, queue_flags(states)),))


@pytest.mark.parametrize("state", list(NodeState))
def test_the_alive_states_are_the_states_alive_holds(state: NodeState) -> None:
    assert (state in ALIVE_STATES) is state.alive


def test_join_carries_every_predicate() -> None:
    records = [
        Node("node001", NodeState.READY, T0 - 900, "i-1", ready_at=T0 - 800, last_busy_at=T0 - 100),
        Node("node002", NodeState.READY, T0 - 900, "i-2", ready_at=T0 - 800),
        Node("node003", NodeState.PROVISIONING, T0 - 60, "i-3"),
        Node("node004", NodeState.READY, T0 - 900, "i-4", ready_at=T0 - 800, last_up_at=T0 - 300),
        Node("node005", NodeState.DRAINING, T0 - 900, "i-5", ready_at=T0 - 800),
        Node("node006", NodeState.FAILED, T0 - 900, "i-6"),
    ]
    instances = [
        Instance("i-1", "node001", "running", T0 - 900),
        Instance("i-2", "node002", "running", T0 - 900),
        Instance("i-3", "node003", "pending", T0 - 60),
        Instance("i-4", "node004", "stopped", T0 - 900),
        Instance("i-5", "node005", "gone", T0 - 900),
    ]
    snap = Snapshot(
        T0,
        (running(7, "node002"),),
        (_host("node001"), _host("node002", used=1), _host("node004", states="au")),
    )
    st = join(records, instances, snap, in_flight={"node003"})
    assert [n.name for n in st.nodes] == ["node001", "node002", "node003", "node004", "node005"]
    n1, n2, n3, n4, n5 = st.nodes
    assert n1.ready and not n1.busy and n1.idle_since == T0 - 100 and n1.lost_for() == 0
    assert n2.busy and n2.idle_since is None and [j.job_id for j in n2.jobs] == [7]
    assert n3.booting and n3.in_flight and n3.instance_state is InstanceState.PENDING
    assert n4.instance_state is InstanceState.STOPPED and not n4.reachable and n4.lost_for() == 300
    assert n4.lost_for(watched_since=T0 - 10) == 10
    assert n5.draining and n5.instance_gone
    assert st.booting == 1 and st.count(NodeState.READY) == 3


def test_a_record_without_instance_id_joins_the_live_instance_of_its_name() -> None:
    """A launch not yet journalled whole has no instance id: of two instances of its name (a
    stopped one listed first), it is the running one's."""
    record = Node("node001", NodeState.LAUNCHING, T0 - 60, None)
    instances = [Instance("i-1", "node001", "stopped", T0 - 900), Instance("i-2", "node001", "running", T0 - 60)]
    (m,) = join([record], instances, Snapshot(T0, (), ())).nodes
    assert m.instance is not None and m.instance.instance_id == "i-2" and m.instance_live


def test_join_at_a_given_time_and_keeps_the_cloud_instances() -> None:
    record = Node("node001", NodeState.READY, T0 - 900, "i-1", ready_at=T0 - 800, last_up_at=T0 - 100)
    orphan = Instance("i-9", "node009", "stopped", T0 - 900)
    gone = Instance("i-8", "node008", "gone", T0 - 900)
    st = join([record], [orphan, gone], Snapshot(T0, (), ()), now=T0 + 50)
    assert st.now == T0 + 50 and st.nodes[0].lost_for() == 150
    assert st.instances == (orphan,)


def test_started_on_files_every_job_as_started_host_does() -> None:
    """``started_on`` (the join's and the view's loop) and ``started_host`` (the tally's, per
    job) are one rule: every combination of state and queue files the same jobs under the same hosts."""
    jobs = [
        Job(k, "j", "u", state, job_phase(state), 1, queue=queue)
        for k, (state, queue) in enumerate(
            (s, q)
            for s in ("r", "qw", "hqw", "Eqw", "t", "Rr", "dr")
            for q in (None, "all.q@node001", "all.q@node002", "all.q", "")
        )
    ]
    expected: dict[str, list[Job]] = {}
    for j in jobs:
        h = started_host(j)
        if h is not None:
            expected.setdefault(h, []).append(j)
    assert started_on(jobs) == expected
    assert set(expected) == {"node001", "node002"}
    assert all(j.phase is JobPhase.RUNNING for js in expected.values() for j in js)


@pytest.mark.parametrize("busy", [None, 5.0, 10.0, 20.0])
@pytest.mark.parametrize("ready", [None, 10.0])
def test_quiet_since_is_the_later_of_busy_and_ready_else_launch(busy: float | None, ready: float | None) -> None:
    record = Node("node001", NodeState.READY, 1.0, ready_at=ready, last_busy_at=busy)
    seen = [t for t in (busy, ready) if t is not None]
    assert record.quiet_since == (max(seen) if seen else 1.0)


def test_the_jobs_started_on_each_host_are_worked_out_again_for_other_jobs() -> None:
    """``jobs_started_on`` (the joins' and the busy hosts'), asked of one tuple of jobs, then of
    another, then of the first again, and of a list changed in between, is ``started_on`` of
    each as it is then."""
    one = tuple(Job(k, "j", "u", "r", JobPhase.RUNNING, 1, queue=f"all.q@node00{k % 3}") for k in range(6))
    other = (*one[:2], Job(9, "j", "u", "r", JobPhase.RUNNING, 1, queue="all.q@node009"))
    for jobs in (one, one, other, one, other):
        assert jobs_started_on(jobs) == {h: tuple(js) for h, js in started_on(jobs).items()}
    changing = list(one)
    assert jobs_started_on(changing) == {h: tuple(js) for h, js in started_on(one).items()}  # type: ignore[arg-type]
    changing[:] = other
    assert jobs_started_on(changing) == {h: tuple(js) for h, js in started_on(other).items()}  # type: ignore[arg-type]
    snap = Snapshot(T0, one, ())
    assert join([], (), snap).jobs_on == join([], (), snap).jobs_on == jobs_started_on(one)
    assert busy_hosts(snap) == {"node000", "node001", "node002"}


@pytest.mark.parametrize(
    "h",
    [
        _host("node001"),
        _host("node001", used=1),
        Host("node001", (QueueInstance("all.q", "node001", 8, 0, 2),)),  # a reservation
        _host("node001", used=1, states="d"),  # disabled, still running one
        Host("node001", (QueueInstance("a.q", "node001", 8, 0, 0), QueueInstance("b.q", "node001", 8, 3, 0))),
        Host("node001", ()),
    ],
)
def test_a_policy_reads_a_host_busy_by_the_host_s_rule(h: Host) -> None:
    """``HostFacts.busy`` (the policies' and the tally's) is ``Host.busy``, whatever path finds it."""
    assert host_numbers(h)[3] is h.busy
    assert host_facts(h).busy is h.busy


@pytest.mark.parametrize("include_gone", [False, True])
def test_the_suspects_of_a_scan_are_the_joined_nodes_that_are_not_steady(include_gone: bool) -> None:
    """``ClusterState.suspects`` (without an index: the steady records read off their instance
    and host, only the others joined) is every joined node of ``nodes`` that is not ``steady``,
    in order, over every record state, an instance by id, by name, of another state or none,
    and a host up, unreachable or none."""
    records, instances, hosts = [], [], []
    kinds = [
        (s, i, h) for s in NodeState for i in ("id", "name", "stopped", "pending", None) for h in ("up", "au", None)
    ]
    for k, (state, inst, host) in enumerate(kinds):
        name = f"node{k:03d}"
        records.append(Node(name, state, T0 - 900, f"i-{k}" if inst != "name" else None))
        if inst is not None:
            word = InstanceState(inst) if inst in ("stopped", "pending") else InstanceState.RUNNING
            instances.append(Instance(f"i-{k}", name, word, T0 - 900))
        if host is not None:
            hosts.append(_host(name, states="" if host == "up" else host))
    st = join(records, instances, Snapshot(T0, (), tuple(hosts)), include_gone=include_gone)
    plain = join(records, instances, Snapshot(T0, (), tuple(hosts)), include_gone=include_gone)
    assert st.suspects == tuple(m for m in plain.nodes if not m.steady)
    assert 0 < len(st.suspects) < len(plain.nodes)
