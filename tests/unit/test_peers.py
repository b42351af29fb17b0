"""The peers' policies on hand-built snapshots, and ``quiet_until`` checked against ``decide``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.model import History, Node, NodeState
from elb.core.policy import POLICIES, make_policy
from elb.core.policy.peers import (
    Limits,
    ParallelclusterPolicy,
    SlurmPolicy,
    StarclusterParams,
    StarclusterPolicy,
    StaticPolicy,
)
from elb.core.state import join
from tests.unit.factories import T0, host, node, pending, running, snap

LIM = Limits(max_nodes=10, slots_per_node=8)


def test_every_peer_is_registered_and_built_from_config() -> None:
    for name, cls in [
        ("starcluster", StarclusterPolicy),
        ("parallelcluster", ParallelclusterPolicy),
        ("slurm", SlurmPolicy),
        ("static", StaticPolicy),
    ]:
        assert name in POLICIES
        p = make_policy(PolicyConfig(name=name, max_nodes=7, slots_per_node=4), ClusterConfig(node_prefix="w"))
        assert isinstance(p, cls)
        assert p.name == name
        assert getattr(p, "limits") == Limits(0, 7, 4, "master", "w", 3)  # noqa: B009


# -- StarCluster ------------------------------------------------------------------------------------


def test_starcluster_adds_when_more_jobs_queue_than_the_cluster_has_slots_and_the_oldest_waited() -> None:
    """StarCluster compares the number of queued jobs with the cluster's total slots."""
    p = StarclusterPolicy(LIM)
    nodes = [node("node001", 4000)]
    full = [host("node001", used=8)]
    nine = [pending(1, 901), *(pending(i, 10) for i in range(2, 10))]
    plan = p.decide(join(nodes, (), snap(nine, full), now=T0), History())
    assert plan.add == 1
    assert plan.add_names == ("node002",)
    assert "9 jobs queued, 8 slots" in plan.add_reason
    # eight queued jobs do not exceed 8 slots, however many slots they ask for
    eight = [pending(1, 5000, slots=8), *(pending(i, 10, slots=8) for i in range(2, 9))]
    assert p.decide(join(nodes, (), snap(eight, full), now=T0), History()).empty
    # not before wait_time
    late = [pending(1, 900), *(pending(i, 10) for i in range(2, 10))]
    assert p.decide(join(nodes, (), snap(late, full), now=T0), History()).empty
    # not within the stabilization time
    assert p.decide(join(nodes, (), snap(nine, full), now=T0), History(last_change_at=T0 - 179)).empty
    assert p.decide(join(nodes, (), snap(nine, full), now=T0), History(last_change_at=T0 - 180)).add == 1


def test_starcluster_s_quiet_hint_ends_at_the_stabilization_time_even_where_floats_round() -> None:
    """``last + stabilization_time`` minus ``last`` is a hair under the stabilization time for
    some times (76.4 + 180 - 76.4 < 180 in floating point): the hint, asked at the end of the
    stabilization, must find it over there, not ask itself again for ever."""
    last = 76.4
    assert (last + 180.0) - last < 180.0  # the rounding the rule must not trip on
    p = StarclusterPolicy(LIM)
    nodes = [node("node001", 50 * 60, now=last + 60)]
    idle = join(nodes, (), snap([], [host("node001")], now=last + 60), now=last + 60)
    until = p.quiet_until(idle, History(last_change_at=last))
    assert until == last + 180.0  # the node, idle 52 min into its hour, goes once the cluster is stable
    assert [r.node for r in p.decide(idle.at(until), History(last_change_at=last)).remove] == ["node001"]


def test_starcluster_adds_a_node_at_once_when_the_cluster_has_no_slot() -> None:
    plan = StarclusterPolicy(LIM).decide(join([], (), snap([pending(1, 0)]), now=T0), History(last_change_at=T0 - 1))
    assert plan.add == 1 and "no slot" in plan.add_reason


def test_starcluster_removes_idle_nodes_only_late_in_their_hour_and_when_nothing_waits() -> None:
    p = StarclusterPolicy(LIM)
    hosts = [host("node001"), host("node002"), host("node003", used=1)]
    jobs = [running(1, "node003")]
    nodes = [node("node001", 3600 + 45 * 60), node("node002", 44 * 60), node("node003", 50 * 60)]
    plan = p.decide(join(nodes, (), snap(jobs, hosts), now=T0), History())
    assert [r.node for r in plan.remove] == ["node001"]
    waiting = snap([*jobs, pending(2, 10, slots=1)], hosts)
    assert p.decide(join(nodes, (), waiting, now=T0), History()).empty


def test_starcluster_skips_a_pass_while_a_node_comes_up() -> None:
    s = snap([pending(i, 5000) for i in range(1, 20)], [host("node001", used=8)])
    nodes = [node("node001", 4000), node("node002", 10, NodeState.PROVISIONING)]
    assert "to come up" in StarclusterPolicy(LIM).decide(join(nodes, (), s, now=T0), History()).reason
    unblocked = StarclusterPolicy(LIM, StarclusterParams(block_while_booting=False))
    assert unblocked.decide(join(nodes, (), s, now=T0), History()).add == 1


# -- ParallelCluster --------------------------------------------------------------------------------


def test_parallelcluster_counts_booting_nodes_as_busy_and_asks_again() -> None:
    p = ParallelclusterPolicy(LIM)
    s = snap([pending(1, 10, slots=8), pending(2, 10, slots=4)])
    assert p.decide(join([], (), s, now=T0), History()).add == 2  # ceil(12 / 8)
    booting = [node("node001", 60, NodeState.PROVISIONING), node("node002", 60, NodeState.PROVISIONING)]
    plan = p.decide(join(booting, (), s, now=T0), History())
    assert plan.add == 2  # desired 2 busy + 2 = 4 > 2
    assert plan.add_names == ("node003", "node004")
    many = [node(f"node{i:03d}", 60, NodeState.PROVISIONING) for i in range(1, 10)]
    assert p.decide(join(many, (), s, now=T0), History()).add == 1  # capped at max_nodes 10


def test_parallelcluster_terminates_nodes_idle_ten_minutes_when_nothing_is_pending() -> None:
    p = ParallelclusterPolicy(LIM)
    hosts = [host("node001"), host("node002")]
    nodes = [node("node001", 5000, last_busy_at=T0 - 600), node("node002", 5000, last_busy_at=T0 - 599)]
    plan = p.decide(join(nodes, (), snap([], hosts), now=T0), History())
    assert [r.node for r in plan.remove] == ["node001"]
    assert p.quiet_until(join([nodes[1]], (), snap([], hosts), now=T0), History()) == T0 + 1


def test_parallelcluster_removes_the_nodes_idle_long_enough_by_name_and_wakes_for_the_one_idle_longest() -> None:
    """Idle since in another order than the names: the removals by name, the quiet hint at the
    first of the others to be idle ten minutes (the tally keeps them by idle since)."""
    idle_for = {"node001": 100.0, "node002": 700.0, "node003": 900.0, "node004": 300.0}
    hosts = [host(n) for n in idle_for]
    nodes = [node(n, 5000, last_busy_at=T0 - f) for n, f in idle_for.items()]
    for incremental in (True, False):
        p = ParallelclusterPolicy(LIM, incremental=incremental)
        plan = p.decide(join(nodes, (), snap([], hosts), now=T0), History())
        assert [r.node for r in plan.remove] == ["node002", "node003"]
        left = [nodes[0], nodes[3]]
        assert p.quiet_until(join(left, (), snap([], hosts), now=T0), History()) == T0 + 300  # node004's


# -- Slurm ------------------------------------------------------------------------------------------


def test_slurm_powers_up_exactly_for_jobs_that_fit_nowhere() -> None:
    p = SlurmPolicy(LIM)
    hosts = [host("node001", used=6)]
    nodes = [node("node001", 5000), node("node002", 60, NodeState.PROVISIONING)]
    # 2 fit on node001, 8 on booting node002, 5 + 3 on one new node, the 16-slot job on 2 more
    jobs = [pending(1, 10, 2), pending(2, 10, 8), pending(3, 10, 5), pending(4, 10, 3), pending(5, 10, 16)]
    plan = p.decide(join(nodes, (), snap(jobs, hosts), now=T0), History())
    assert plan.add == 3
    assert not plan.remove


def test_slurm_keeps_a_ready_node_a_waiting_wide_job_was_given() -> None:
    p = SlurmPolicy(LIM)
    hosts = [host("node001")]
    nodes = [node("node001", 5000, last_busy_at=T0 - 1000), node("node002", 60, NodeState.PROVISIONING)]
    wide = [pending(1, 120, 16)]  # node001 + booting node002
    plan = p.decide(join(nodes, (), snap(wide, hosts), now=T0), History())
    assert plan.empty
    # without the job node001 is idle past SuspendTime and goes
    plan = p.decide(join(nodes, (), snap([], hosts), now=T0), History())
    assert [r.node for r in plan.remove] == ["node001"]


def test_slurm_powers_down_the_nodes_idle_long_enough_by_name_and_wakes_for_the_next_one() -> None:
    """Idle since in another order than the names: the removals by name, the quiet hint at the
    first of the others to be idle ``suspend_time`` (the tally keeps them by idle since)."""
    idle_for = {"node001": 100.0, "node002": 500.0, "node003": 900.0, "node004": 250.0}
    hosts = [host(n) for n in idle_for]
    nodes = [node(n, 5000, last_busy_at=T0 - f) for n, f in idle_for.items()]
    for incremental in (True, False):
        p = SlurmPolicy(LIM, incremental=incremental)
        plan = p.decide(join(nodes, (), snap([], hosts), now=T0), History())
        assert [r.node for r in plan.remove] == ["node002", "node003"]
        left = [nodes[0], nodes[3]]
        assert p.quiet_until(join(left, (), snap([], hosts), now=T0), History()) == T0 + 50  # node004's


# -- static -----------------------------------------------------------------------------------------


def test_static_replaces_lost_nodes_and_never_shrinks() -> None:
    p = StaticPolicy(Limits(max_nodes=3, slots_per_node=8))
    assert p.initial_nodes == 3
    hosts = [host("node001"), host("node003")]
    nodes = [node("node001", 9000), node("node003", 9000)]
    plan = p.decide(join(nodes, (), snap([], hosts), now=T0), History())
    assert plan.add == 1
    assert plan.add_names == ("node004",)
    full = [*nodes, node("node004", 10)]
    assert p.decide(join(full, (), snap([], [*hosts, host("node004")]), now=T0), History()).empty


# -- quiet_until against decide ---------------------------------------------------------------------

cluster_states = st.fixed_dictionaries(
    {
        "ready": st.lists(st.tuples(st.integers(0, 8), st.floats(0, 7200), st.floats(0, 3000)), min_size=0, max_size=5),
        "booting": st.integers(0, 3),
        "waiting": st.lists(st.tuples(st.integers(1, 24), st.floats(0, 2000)), max_size=5),
        "last_change": st.one_of(st.none(), st.floats(0, 400)),
    }
)


@settings(max_examples=150, deadline=None)
@given(state=cluster_states, name=st.sampled_from(["starcluster", "parallelcluster", "slurm", "static"]))
def test_quiet_until_is_never_later_than_the_next_non_empty_plan(state: dict[str, object], name: str) -> None:
    """For an unchanged cluster, decide stays empty at every poll before quiet_until; a decide
    that acts now has a quiet_until of now (the simulator asks the hint before a pass)."""
    policy = make_policy(PolicyConfig(name=name, max_nodes=8, slots_per_node=8), ClusterConfig())
    hosts, nodes, jobs = [], [], []
    ready = state["ready"]
    assert isinstance(ready, list)
    for i, (used, age, idle_for) in enumerate(ready, 1):
        name_i = f"node{i:03d}"
        hosts.append(host(name_i, used=used))
        nodes.append(node(name_i, age + 60, last_busy_at=T0 - min(idle_for, age)))
        if used:
            jobs.append(running(1000 + i, name_i, slots=used))
    booting = state["booting"]
    assert isinstance(booting, int)
    nodes += [node(f"node{len(ready) + j:03d}", 30, NodeState.PROVISIONING) for j in range(1, booting + 1)]
    waiting = state["waiting"]
    assert isinstance(waiting, list)
    jobs += [pending(j, waited, slots) for j, (slots, waited) in enumerate(waiting, 1)]
    s = snap(jobs, hosts)
    last = state["last_change"]
    assert last is None or isinstance(last, float)
    history = History(last_change_at=None if last is None else T0 - last)
    records: tuple[Node, ...] = tuple(nodes)
    until = policy.quiet_until(join(records, (), s, now=T0), history)  # type: ignore[attr-defined]
    if not policy.decide(join(records, (), s, now=T0), history).empty:
        assert until <= T0, (name, until - T0)
        return
    assert until >= T0
    t = T0
    while t < min(until, T0 + 4 * 3600):
        assert policy.decide(join(records, (), s, now=t), history).empty, (name, t - T0, until - T0)
        t += 30
    if until < T0 + 4 * 3600:
        # and it is tight enough to be useful: something happens within a poll of it
        later = [policy.decide(join(records, (), s, now=until + d), history) for d in (0, 30, 60)]
        assert any(not p.empty for p in later), (name, until - T0)
