"""A pass's work and memory are bounded by the cluster and the cap, never by a job's task or slot count.

Each test decides on a job that asks for a billion tasks or slots and checks the result and the
peak of Python allocations (tracemalloc); the timeout is only a safety net.
"""

from __future__ import annotations

import functools
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

import pytest

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.model import History, Host, Job, Node, NodeState, Plan
from elb.core.policy import make_policy
from elb.core.policy.base import Policy
from elb.core.policy.forecast import forecast
from elb.core.policy.peers import Limits, ParallelclusterPolicy, SlurmPolicy, StarclusterPolicy
from elb.core.policy.view import cluster_view
from elb.core.state import join
from elb.schedulers.sge.parse import parse_qstat
from elb.schedulers.sge.states import job_phase
from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.runner import prepare
from elb.simulate.swf import SimJob, Workload
from tests.unit.factories import T0, host, node, snap

BILLION = 10**9
MAX_PEAK = 50 * 2**20  # bytes of Python allocations a pass may hold at once here
R = TypeVar("R")


def bounded(fn: Callable[[], R]) -> R:
    """Run ``fn`` and fail if its allocations peak above MAX_PEAK."""
    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK, f"peak {peak / 2**20:.0f} MiB"
    return result


def array(job_id: int, tasks: int, slots: int = 1, waited: float = 60.0) -> Job:
    return Job(
        job_id,
        f"a{job_id}",
        "u",
        "qw",
        job_phase("qw"),
        slots,
        submitted=T0 - waited,
        tasks=tasks,
        task_ids=f"1-{tasks}:1",
    )


def elb(max_nodes: int = 10, **kw: object) -> Policy:
    return make_policy(
        PolicyConfig(max_nodes=max_nodes, slots_per_node=8, boot_time=300, billing="second", **kw),
        ClusterConfig(),
    )


def decide(policy: Policy, jobs: list[Job], hosts: list[Host] | None = None, nodes: list[Node] | None = None) -> Plan:
    plan: Plan = policy.decide(join(tuple(nodes or ()), (), snap(jobs, hosts), now=T0), History())
    return plan


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tasks", [BILLION, 2**31])
def test_elb_decides_on_a_billion_task_array_within_the_cap(tasks: int) -> None:
    plan = bounded(lambda: decide(elb(), [array(1, tasks)]))
    assert plan.add == 10
    assert f"{tasks} slots" in plan.add_reason
    assert f"(capped at max_nodes; {tasks // 8} wanted)" in plan.add_reason  # counted arithmetically


@pytest.mark.timeout(60)
def test_elb_decides_on_a_billion_slot_pe_job_within_the_cap() -> None:
    job = Job(1, "mpi", "u", "qw", job_phase("qw"), BILLION, submitted=T0 - 60, pe="mpi", pe_range=str(BILLION))
    plan = bounded(lambda: decide(elb(), [job]))
    assert plan.add == 10
    assert "(capped at max_nodes; 125000000 wanted)" in plan.add_reason


@pytest.mark.timeout(60)
def test_huge_array_still_protects_every_idle_node_it_would_take() -> None:
    # Two idle ready nodes and one full one; the cluster is at the cap. The array would take both
    # idle nodes, so neither may go, however long they have idled.
    hosts = [host("node001", used=8), host("node002"), host("node003")]
    nodes = [node(n, 3000.0, last_busy_at=T0 - 2000) for n in ("node001", "node002", "node003")]
    jobs = [
        Job(9, "r", "u", "r", job_phase("r"), 8, submitted=T0 - 900, started=T0 - 800, queue="all.q@node001"),
        array(1, BILLION),
    ]
    plan = bounded(lambda: decide(elb(max_nodes=3), jobs, hosts, nodes))
    assert plan.add == 0
    assert plan.remove == ()
    assert "at max_nodes" in plan.reason
    view = cluster_view(join(nodes, (), snap(jobs, hosts), now=T0), "master", 8)
    fc = bounded(lambda: forecast(view, T0 + 300, limit=0))
    assert fc.assigned == frozenset({"node002", "node003"})
    assert (fc.new_nodes, fc.complete) == (BILLION // 8 - 2, True)


@pytest.mark.timeout(60)
def test_a_huge_job_first_does_not_hide_a_later_job_that_takes_an_idle_node() -> None:
    # Past the cap, later jobs are still placed on existing nodes: node002 stays protected.
    hosts = [host("node001", used=8), host("node002", used=4)]
    nodes = [node("node001", 3000.0, last_busy_at=T0), node("node002", 3000.0, last_busy_at=T0 - 2000)]
    jobs = [array(1, BILLION, slots=8, waited=100.0), array(2, 1, slots=4, waited=50.0)]
    view = cluster_view(join(nodes, (), snap(jobs, hosts), now=T0), "master", 8)
    fc = bounded(lambda: forecast(view, T0 + 300, limit=3))
    assert fc.assigned == frozenset({"node002"})
    assert not fc.complete
    assert fc.short_jobs == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("peer", [SlurmPolicy, ParallelclusterPolicy, StarclusterPolicy])
def test_peers_decide_on_a_billion_task_array_and_slot_job_within_the_cap(
    peer: type[SlurmPolicy | ParallelclusterPolicy | StarclusterPolicy],
) -> None:
    policy = peer(Limits(max_nodes=10, slots_per_node=8))
    huge_pe = Job(2, "mpi", "u", "qw", job_phase("qw"), BILLION, submitted=T0 - 60, pe="mpi", pe_range=str(BILLION))
    for jobs in ([array(1, BILLION, waited=1000.0)], [huge_pe]):
        plan = bounded(functools.partial(decide, policy, jobs))
        assert plan.add <= 10
        if peer is not StarclusterPolicy:
            assert plan.add == 10


@pytest.mark.timeout(60)
def test_slurm_says_at_least_when_it_stopped_counting_at_the_cap() -> None:
    policy = SlurmPolicy(Limits(max_nodes=1, slots_per_node=8))
    nodes = [node("node001", 3000.0, last_busy_at=T0)]
    jobs = [array(1, BILLION, waited=100.0), array(2, 8, waited=50.0)]
    plan = bounded(lambda: decide(policy, jobs, [host("node001", used=8)], nodes))
    assert plan.add == 0
    assert "at least 125000000 more nodes wanted but at max_nodes (1/1)" in plan.reason


@pytest.mark.timeout(60)
def test_parser_counts_a_huge_task_range_without_expanding_it() -> None:
    xml = (
        b"<?xml version='1.0'?>\n<job_info><queue_info/><job_info>"
        b'<job_list state="pending"><JB_job_number>7</JB_job_number><JAT_prio>0.5</JAT_prio>'
        b"<JB_name>a</JB_name><JB_owner>u</JB_owner><state>qw</state>"
        b"<JB_submission_time>2026-11-22T04:05:06</JB_submission_time><slots>1</slots>"
        b"<tasks>1-2147483648:1,5-1000000000:3</tasks></job_list></job_info></job_info>"
    )
    (job,) = bounded(lambda: parse_qstat(xml).jobs)
    assert job.tasks == 2**31 + (1_000_000_000 - 5) // 3 + 1


@pytest.mark.timeout(60)
def test_simulator_keeps_a_job_wider_than_the_cap_unservable_without_building_it() -> None:
    wl = Workload("hand", [SimJob(1, 0, 100, 4), SimJob(2, 10, 100, BILLION)])
    prepared = bounded(lambda: prepare(wl, 8, 10))
    assert [(j.job_id, "more than the" in why) for j, why in prepared.unservable] == [(2, True)]
    jobs = [SimJob(1, 0, 100, 4), SimJob(2, 0, 100, BILLION)]
    sim = Simulator(jobs, SlurmPolicy(Limits(max_nodes=2, slots_per_node=8)), SimSettings(max_nodes=2))
    out = bounded(sim.run)
    assert [j.job_id for j, _ in out.unservable] == [2] and out.never_started == 0 and len(out.waits) == 1


def test_booting_node_of_a_policy_counts_as_capacity() -> None:
    # a sanity check of the helpers: one booting node takes an 8-slot job, no launch
    booting = Node("node001", NodeState.PROVISIONING, launched_at=T0 - 60, slots=8)
    plan = decide(elb(), [array(1, 1, slots=8)], [], [booting])
    assert plan.add == 0
