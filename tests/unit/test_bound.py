"""The clairvoyant bound (``elb.simulate.bound``): known answers on hand-made logs, and no cheaper
than the cost floor nor dearer than a static cluster of the same placement."""

from __future__ import annotations

import random

import pytest

from elb.core.groups import NodeGroup, NodeGroups
from elb.simulate.bound import busy_periods, clairvoyant, stretches
from elb.simulate.engine import Placement, SimSettings
from elb.simulate.groups import SimGroups, SwfMapping, simulated_site
from elb.simulate.runner import SimError, build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload
from tests.unit.test_simulate_wakeup import random_log

BOOT = 300.0


def bound_of(jobs: list[SimJob], spn: int, cap: int, boot: float = BOOT, jitter: float = 0.0) -> tuple[float, float]:
    prepared = prepare(Workload("t", jobs), spn, cap)
    settings = SimSettings(slots_per_node=spn, max_nodes=cap, boot_time=boot, boot_jitter=jitter)
    b = clairvoyant(prepared, settings, price=1.0)
    return b.node_hours * 3600.0, b.wait_p95


def test_a_node_is_kept_through_a_gap_shorter_than_a_boot_and_relaunched_after_a_longer_one() -> None:
    # one 8-slot node: A [0, 1000), B [1100, 1600) (gap 100 < boot: kept), C [5000, 5200) (gap 3400: relaunched)
    jobs = [SimJob(1, 0.0, 1000.0, 8), SimJob(2, 1100.0, 500.0, 8), SimJob(3, 5000.0, 200.0, 8)]
    seconds, p95 = bound_of(jobs, 8, 1)
    assert seconds == (300 + 1600) + (300 + 200)
    assert p95 == 0.0


def test_jobs_that_overlap_take_the_nodes_first_fit_gives_them() -> None:
    # two whole-node jobs at once on two nodes, and a 2-slot job packed beside... nothing: both full
    jobs = [SimJob(1, 0.0, 600.0, 8), SimJob(2, 0.0, 600.0, 8), SimJob(3, 100.0, 100.0, 2)]
    seconds, _ = bound_of(jobs, 8, 3)
    assert seconds == 2 * (300 + 600) + (300 + 100)
    # a 16-slot job takes two whole nodes; a later 4-slot job comes within a boot of its end and
    # goes on the first of them (kept through the gap of 200 s)
    jobs = [SimJob(1, 0.0, 600.0, 16), SimJob(2, 800.0, 100.0, 4)]
    seconds, _ = bound_of(jobs, 8, 2)
    assert seconds == (300 + 900) + (300 + 600)


def test_the_mean_boot_and_the_billing_minimum() -> None:
    jobs = [SimJob(1, 0.0, 10.0, 1)]
    assert bound_of(jobs, 8, 1, jitter=100.0)[0] == 350 + 10  # the mean boot: 300 + 100 / 2
    assert bound_of(jobs, 8, 1, boot=0.0)[0] == 60.0  # EC2's minute


def test_a_full_cap_makes_jobs_wait_and_the_bound_says_so() -> None:
    jobs = [SimJob(1, 0.0, 1000.0, 8), SimJob(2, 0.0, 1000.0, 8)]
    seconds, p95 = bound_of(jobs, 8, 1)
    assert seconds == 300 + 2000  # one node, kept: the second job follows at once
    assert p95 == pytest.approx(950.0)  # numpy's linear p95 of the waits [0, 1000]


def test_periods_and_stretches() -> None:
    ps = [
        Placement(1, 0, 0, 100, 4, (("a", 4),)),
        Placement(2, 0, 50, 200, 4, (("a", 4),)),
        Placement(3, 0, 200, 250, 8, (("a", 4), ("b", 4))),
        Placement(4, 0, 900, 950, 1, (("a", 1),)),
    ]
    periods = busy_periods(ps)
    assert periods == {"a": [(0, 250), (900, 950)], "b": [(200, 250)]}
    assert stretches(periods["a"], 300.0) == [(-300.0, 250, 250.0), (600.0, 950, 50.0)]
    assert stretches(periods["a"], 700.0) == [(-700.0, 950, 300.0)]


@pytest.mark.parametrize("seed", range(5))
def test_between_the_cost_floor_and_a_static_cluster_of_the_same_placement(seed: int) -> None:
    rng = random.Random(seed)
    jobs = [j for j in random_log(rng, 60, overrun=0.2) if j.slots <= 32]
    prepared = prepare(Workload("t", jobs), 8, 4)
    settings = SimSettings(slots_per_node=8, max_nodes=4, boot_time=BOOT)
    b = clairvoyant(prepared, settings, price=2.0)
    static = build_policy("static", billing="second", slots_per_node=8, boot_time=BOOT, max_nodes=4)
    m, _ = replay(prepared, static, settings, billing="second", price=2.0)
    assert prepared.floors.floor_node_hours <= b.node_hours <= m.node_hours
    assert b.cost == pytest.approx(2.0 * b.node_hours)
    assert b.wait_p95 <= m.wait_p95  # the static cluster booted first; the bound's nodes are there in time


def test_node_groups_are_refused() -> None:
    groups = NodeGroups(groups=[NodeGroup(name="a", slots=8, max_nodes=2), NodeGroup(name="b", slots=16, max_nodes=2)])
    mapping = SwfMapping.model_validate({})
    two = SimGroups(groups, mapping, simulated_site(groups, mapping))
    prepared = prepare(Workload("t", [SimJob(1, 0.0, 10.0, 1)]), 8, None, groups=two)
    with pytest.raises(SimError, match="one node group"):
        clairvoyant(prepared, SimSettings(), price=1.0)
