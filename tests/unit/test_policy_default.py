"""The default policy's rules, each at its boundaries."""

from __future__ import annotations

import pytest

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.model import History, NodeState
from elb.core.policy import make_policy
from elb.core.policy.default import ElbPolicy
from elb.core.state import join
from tests.unit.factories import T0, host, node, pending, running, snap

MIN = 60.0


def policy(**kw: object) -> ElbPolicy:
    kw = {"grow": "wait_time", "shrink": "timer", **kw}  # the classic rules (forecast and cost are the default)
    p = make_policy(PolicyConfig(**kw), ClusterConfig())
    assert isinstance(p, ElbPolicy)
    return p


NONE = History()


# -- grow ---------------------------------------------------------------------------------------
def test_waiting_exactly_wait_time_does_not_add() -> None:
    plan = policy(max_nodes=10).decide(join([], (), snap([pending(1, 15 * MIN)]), now=T0), NONE)
    assert plan.add == 0
    assert "not adding yet" in plan.reason


def test_waiting_just_over_wait_time_adds_one_with_reason() -> None:
    s = snap([pending(1, 17 * MIN), pending(2, 3 * MIN), pending(3, 1)], [host("node001", used=8)])
    plan = policy(max_nodes=10).decide(join([node("node001", 600)], (), s, now=T0), NONE)
    assert plan.add == 1
    assert plan.add_names == ("node002",)
    assert plan.add_reason.startswith("3 jobs waiting")
    assert "oldest 17 min > 15 min" in plan.add_reason
    assert "(2/10)" in plan.add_reason


def test_oldest_is_by_submission_time_not_position() -> None:
    jobs = [pending(5, 1 * MIN), pending(2, 20 * MIN)]  # oldest listed last
    assert policy().decide(join([], (), snap(jobs), now=T0), NONE).add == 1


@pytest.mark.parametrize("state", ["hqw", "Eqw", "hRwq"])
def test_held_and_error_jobs_do_not_count(state: str) -> None:
    plan = policy().decide(join([], (), snap([pending(1, 60 * MIN, state=state)]), now=T0), NONE)
    assert plan.empty
    assert "no job waiting" in plan.reason


def test_exactly_max_nodes_does_not_add() -> None:
    hosts = [host(f"node00{i}", used=8) for i in (1, 2)]
    nodes = [node(f"node00{i}", 600) for i in (1, 2)]
    plan = policy(max_nodes=2).decide(join(nodes, (), snap([pending(1, 30 * MIN)], hosts), now=T0), NONE)
    assert plan.add == 0
    assert "max_nodes (2/2)" in plan.reason


def test_add_never_more_than_waiting_slots_need_nor_past_max() -> None:
    jobs = [pending(1, 30 * MIN, slots=1, tasks=20)]  # 20 slots = 3 nodes of 8
    many = {"add_nodes_per_iteration": 10, "slots_per_node": 8}
    assert policy(max_nodes=10, **many).decide(join([], (), snap(jobs), now=T0), NONE).add == 3
    assert policy(max_nodes=2, **many).decide(join([], (), snap(jobs), now=T0), NONE).add == 2


def test_slots_per_node_learned_from_hosts() -> None:
    jobs = [pending(1, 30 * MIN, slots=1, tasks=20)]
    hosts = [host("node001", slots=16, used=16)]
    plan = policy(add_nodes_per_iteration=10).decide(join([node("node001", 600)], (), snap(jobs, hosts), now=T0), NONE)
    assert plan.add == 2


def test_wide_pe_job_needs_whole_nodes() -> None:
    jobs = [pending(1, 30 * MIN, slots=17)]  # 17 slots on 8-slot nodes: 3 whole nodes
    p = policy(add_nodes_per_iteration=10, max_nodes=10, slots_per_node=8)
    assert p.decide(join([], (), snap(jobs), now=T0), NONE).add == 3


def test_booting_nodes_count_toward_capacity() -> None:
    jobs = [pending(1, 30 * MIN, slots=8)]
    booting = [node("node001", 120, state=NodeState.PROVISIONING)]
    plan = policy(slots_per_node=8).decide(join(booting, (), snap(jobs), now=T0), NONE)
    assert plan.add == 0
    assert "already booting" in plan.reason


def test_next_name_after_highest_in_use() -> None:
    hosts = [host(n, used=8) for n in ("node001", "node003", "node005")]
    plan = policy().decide(join([], (), snap([pending(1, 30 * MIN)], hosts), now=T0), NONE)
    assert plan.add_names == ("node006",)


def test_below_min_nodes_adds_up_to_it_even_while_stabilizing() -> None:
    plan = policy(min_nodes=3, max_nodes=5).decide(join([node("node001", 600)], (), snap(), now=T0), History(T0 - 10))
    assert plan.add == 2
    assert plan.add_names == ("node002", "node003")


def test_stabilization_blocks_changes() -> None:
    plan = policy().decide(join([], (), snap([pending(1, 30 * MIN)]), now=T0), History(last_change_at=T0 - 179))
    assert plan.empty
    assert "stabilizing" in plan.reason
    assert (
        policy().decide(join([], (), snap([pending(1, 30 * MIN)]), now=T0), History(last_change_at=T0 - 180)).add == 1
    )


# -- shrink -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("minute", "removed"), [(44, False), (45, True), (46, True), (104, False), (106, True)])
def test_hourly_billing_removes_only_near_end_of_paid_hour(minute: int, removed: bool) -> None:
    plan = policy().decide(join([node("node001", minute * MIN)], (), snap([], [host("node001")]), now=T0), NONE)
    assert bool(plan.remove) is removed


def test_host_busy_in_one_of_two_queues_is_kept() -> None:
    # "long.q" is no identifier, so it comes in a dict, which mypy checks against each keyword of host().
    s = snap([running(7, "node001", queue="long.q")], [host("node001", **{"long.q": 1})])  # type: ignore[arg-type]
    assert policy().decide(join([node("node001", 50 * MIN)], (), s, now=T0), NONE).remove == ()


def test_reserved_slot_keeps_node() -> None:
    s = snap([], [host("node001", reserved=2)])
    assert policy().decide(join([node("node001", 50 * MIN)], (), s, now=T0), NONE).remove == ()


def test_master_is_never_chosen() -> None:
    s = snap([], [host("master"), host("node001")])
    nodes = [node("master", 50 * MIN), node("node001", 50 * MIN)]
    plan = policy().decide(join(nodes, (), s, now=T0), NONE)
    assert [r.node for r in plan.remove] == ["node001"]


def test_unmanaged_hosts_are_never_removed() -> None:
    plan = policy().decide(join([], (), snap([], [host("static01")]), now=T0), NONE)
    assert plan.remove == ()


def test_every_qualifying_node_removed_in_one_pass_busy_one_kept() -> None:
    hosts = [host("node001", used=1), host("node002"), host("node003")]
    jobs = [running(1, "node001")]
    nodes = [node(n, 50 * MIN) for n in ("node001", "node002", "node003")]
    plan = policy().decide(join(nodes, (), snap(jobs, hosts), now=T0), NONE)
    assert sorted(r.node for r in plan.remove) == ["node002", "node003"]
    assert all("no job waiting" in r.reason for r in plan.remove)


def test_nothing_removed_while_a_job_waits() -> None:
    s = snap([pending(1, 1 * MIN)], [host("node001")])
    assert policy().decide(join([node("node001", 50 * MIN)], (), s, now=T0), NONE).remove == ()


def test_min_nodes_kept_and_paid_period_ending_first_goes_first() -> None:
    hosts = [host("node001"), host("node002")]
    nodes = [node("node001", 50 * MIN), node("node002", 58 * MIN)]
    plan = policy(min_nodes=1, max_nodes=4).decide(join(nodes, (), snap([], hosts), now=T0), NONE)
    assert [r.node for r in plan.remove] == ["node002"]


def test_static_cluster_only_replaces_lost_nodes() -> None:
    p = policy(min_nodes=2, max_nodes=2)
    hosts = [host("node001"), host("node002")]
    nodes = [node("node001", 50 * MIN), node("node002", 50 * MIN)]
    assert p.decide(join(nodes, (), snap([], hosts), now=T0), NONE).empty
    gone = node("node002", 50 * MIN, state=NodeState.TERMINATED)
    lost = p.decide(join([nodes[0], gone], (), snap([], hosts[:1]), now=T0), NONE)
    assert lost.add == 1
    assert lost.add_names == ("node003",)


@pytest.mark.parametrize(("idle_min", "removed"), [(9, False), (10, True)])
def test_per_second_billing_uses_idle_time(idle_min: int, removed: bool) -> None:
    n = node("node001", 50 * MIN, last_busy_at=T0 - idle_min * MIN)
    plan = policy(billing="second").decide(join([n], (), snap([], [host("node001")]), now=T0), NONE)
    assert bool(plan.remove) is removed


def test_draining_or_booting_node_not_removed_by_policy() -> None:
    s = snap([], [host("node001"), host("node002")])
    nodes = [
        node("node001", 50 * MIN, state=NodeState.DRAINING),
        node("node002", 50 * MIN, NodeState.RUNNING),
    ]
    assert policy().decide(join(nodes, (), s, now=T0), NONE).remove == ()


def test_unreachable_host_is_not_idle() -> None:
    s = snap([], [host("node001", states="au")])
    assert policy().decide(join([node("node001", 50 * MIN)], (), s, now=T0), NONE).remove == ()


def test_plan_describe_is_plain_words() -> None:
    s = snap([pending(1, 20 * MIN)])
    lines = policy().decide(join([], (), s, now=T0), NONE).describe()
    assert lines == ["add 1 (node001): 1 job waiting (1 slots), oldest 20 min > 15 min: adding 1 node (1/10)"]
