"""The forecast and cost rules of the elb policy (grow=forecast, shrink=cost, the defaults), each at its boundaries."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.model import History, Job, Node, NodeState
from elb.core.policy import default, make_policy
from elb.core.policy.default import ElbPolicy
from elb.core.policy.forecast import forecast
from elb.core.policy.view import cluster_view
from elb.core.state import join
from elb.schedulers.sge.states import job_phase
from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.swf import SimJob
from tests.unit.factories import T0, host, node, pending, snap

MIN = 60.0
BOOT = 300.0
NONE = History()


def policy(**kw: object) -> ElbPolicy:
    base: dict[str, object] = {"max_nodes": 10, "slots_per_node": 8, "boot_time": BOOT}
    p = make_policy(PolicyConfig(**{**base, **kw}), ClusterConfig())
    assert isinstance(p, ElbPolicy)
    return p


def running(job_id: int, on: str, slots: int = 8, started_ago: float = 600.0, h_rt: float | None = None) -> Job:
    return Job(
        job_id,
        f"job{job_id}",
        "sgeuser",
        "r",
        job_phase("r"),
        slots,
        submitted=T0 - started_ago - 10,
        started=T0 - started_ago,
        queue=f"all.q@{on}",
        hard_runtime=h_rt,
    )


def busy_node(name: str = "node001", age: float = 3000.0) -> Node:
    return node(name, age, last_busy_at=T0)


# -- defaults -------------------------------------------------------------------------------------
def test_new_rules_are_the_default() -> None:
    cfg = PolicyConfig()
    assert (cfg.grow, cfg.shrink) == ("forecast", "cost")
    assert cfg.idle_factor == 0.5
    assert cfg.launch_delay == 0.0


# -- grow: forecast -------------------------------------------------------------------------------
def test_launches_at_once_for_a_job_nothing_can_run_with_a_plain_reason() -> None:
    plan = policy().decide(join([], (), snap([pending(1, 0.0, slots=4)]), now=T0), NONE)
    assert plan.add == 1
    assert plan.add_names == ("node001",)
    assert plan.add_reason == (
        "1 job (4 slots) can't start within a boot time (5 min) on 0 ready + 0 booting nodes: adding 1 node (1/10)"
    )


def test_no_launch_when_free_slots_take_the_job() -> None:
    s = snap([pending(1, 0.0, slots=4)], [host("node001", used=4)])
    plan = policy().decide(join([busy_node()], (), s, now=T0), NONE)
    assert plan.add == 0
    assert "all can start within a boot time" in plan.reason


def test_booting_nodes_count_so_the_same_jobs_do_not_launch_twice() -> None:
    booting = node("node001", 60.0, state=NodeState.PROVISIONING)
    jobs = [pending(1, 60.0, slots=8), pending(2, 60.0, slots=8)]
    plan = policy().decide(join([booting], (), snap(jobs), now=T0), NONE)
    assert plan.add == 1
    assert "on 0 ready + 1 booting nodes" in plan.add_reason


@pytest.mark.parametrize(("h_rt", "adds"), [(600.0 + BOOT, 0), (600.0 + BOOT + 1, 1), (None, 1)])
def test_slots_a_running_job_frees_by_its_h_rt_within_a_boot_time(h_rt: float | None, adds: int) -> None:
    """Running 600 s: h_rt = 600 + boot frees its slots exactly at the horizon; one second more does not."""
    s = snap([pending(1, 0.0, slots=8), running(2, "node001", h_rt=h_rt)], [host("node001", used=8)])
    plan = policy().decide(join([busy_node()], (), s, now=T0), NONE)
    assert plan.add == adds
    if not adds:
        assert "8 slots running jobs free by their run time limit or age" in plan.reason


@pytest.mark.parametrize(
    ("h_rt", "adds"),
    [
        (600.0 - 60, 0),  # its h_rt passed a minute ago: SGE is about to end it, its slots are about to free
        (600.0 - 121, 1),  # past its h_rt by more than the grace: it runs on (h_rt not enforced), frees nothing
        (600.0 - 3 * 3600, 1),  # hours overdue: runs on
    ],
)
def test_a_job_past_its_requested_end_runs_on_and_frees_nothing(h_rt: float, adds: int) -> None:
    """A job that ran past its h_rt (not enforced: a log replay, s_rt, a suspended job, qalter)
    holds its slots: counting them as about to free would keep the jobs behind it waiting."""
    s = snap([pending(1, 0.0, slots=8), running(2, "node001", h_rt=h_rt)], [host("node001", used=8)])
    plan = policy().decide(join([busy_node()], (), s, now=T0), NONE)
    assert plan.add == adds


@pytest.mark.parametrize(("age", "adds"), [(60.0, 0), (BOOT, 0), (BOOT + 1, 1), (4 * 3600.0, 1)])
def test_a_running_job_without_h_rt_frees_its_slots_while_it_is_younger_than_a_boot(age: float, adds: int) -> None:
    """Without h_rt a job is expected to run as long again as it has run: one that started at most a
    boot time ago is expected to end before a node launched now is ready; an older one runs on."""
    s = snap([pending(1, 0.0, slots=8), running(2, "node001", started_ago=age)], [host("node001", used=8)])
    plan = policy().decide(join([busy_node()], (), s, now=T0), NONE)
    assert plan.add == adds
    if not adds:
        assert "8 slots running jobs free by their run time limit or age" in plan.reason


def test_a_wide_job_without_h_rt_that_just_started_frees_its_nodes() -> None:
    """A 16-slot job started a minute ago frees two whole nodes for a 16-slot job waiting."""
    s = snap(
        [pending(1, 0.0, slots=16), running(2, "node001", slots=16, started_ago=MIN)],
        [host("node001", used=8), host("node002", used=8)],
    )
    plan = policy().decide(join([busy_node("node001"), busy_node("node002")], (), s, now=T0), NONE)
    assert plan.add == 0


def test_quiet_until_is_when_a_job_without_h_rt_grows_older_than_a_boot() -> None:
    """While it is young its slots count as about to free; a boot time after its start they no
    longer do and the waiting job wants a node: the fast-forward stops there."""
    s = snap([pending(1, 0.0, slots=8), running(2, "node001", started_ago=100.0)], [host("node001", used=8)])
    p = policy()
    assert p.decide(join([busy_node()], (), s, now=T0), NONE).add == 0
    until = p.quiet_until(join([busy_node()], (), s, now=T0), NONE)
    assert until == T0 - 100.0 + BOOT
    later = until + 1
    assert p.decide(join([busy_node()], (), snap(list(s.jobs), list(s.hosts), now=later), now=later), NONE).add == 1


def test_replay_launches_no_node_for_a_job_a_short_running_one_makes_room_for() -> None:
    """Job 1 (8 slots, no requested time) runs 100 s on the one node from 300 s; job 2 arrives at
    330 s. Counting job 1 as running on would launch a second node at the 360 s poll that is ready
    at 660 s and runs nothing (job 2 starts on the first node at 400 s); expecting it to end, the
    replay launches one node in all and job 2 waits 70 s."""
    jobs = [SimJob(1, 0.0, 100.0, 8, None), SimJob(2, 330.0, 100.0, 8, None)]
    settings = SimSettings(slots_per_node=8, max_nodes=4, boot_time=BOOT, record=True)
    out = Simulator(jobs, policy(max_nodes=4), settings).run()
    assert out.launches == 1
    assert all(n.busy_seconds > 0 for n in out.nodes)
    assert sorted(out.waits) == [70.0, 300.0]


def test_wide_job_takes_whole_nodes_and_uses_the_idle_one() -> None:
    """17 slots on 8-slot nodes: 3 whole nodes; one is idle and ready, so 2 are launched."""
    idle = node("node001", 3000.0, last_busy_at=T0 - 10 * MIN)
    s = snap([pending(1, 0.0, slots=17)], [host("node001")])
    plan = policy(billing="second").decide(join([idle], (), s, now=T0), NONE)
    assert plan.add == 2
    assert plan.add_names == ("node002", "node003")
    assert not plan.remove  # the idle node is given to the waiting job: never removed (idle 10 min > due)


def test_array_job_tasks_pack_into_whole_nodes() -> None:
    plan = policy().decide(join([], (), snap([pending(1, 0.0, slots=1, tasks=20)]), now=T0), NONE)
    assert plan.add == 3


@pytest.mark.parametrize(("max_nodes", "adds"), [(2, 2), (3, 3), (10, 3)])
def test_never_past_max_nodes(max_nodes: int, adds: int) -> None:
    plan = policy(max_nodes=max_nodes).decide(join([], (), snap([pending(1, 0.0, slots=24)]), now=T0), NONE)
    assert plan.add == adds
    if adds < 3:
        assert "capped at max_nodes; 3 wanted" in plan.add_reason


def test_at_max_nodes_says_so() -> None:
    s = snap([pending(1, 0.0, slots=8)], [host("node001", used=8)])
    plan = policy(max_nodes=1).decide(join([busy_node()], (), s, now=T0), NONE)
    assert plan.empty
    assert "at max_nodes (1/1)" in plan.reason


@pytest.mark.parametrize(("waited", "adds"), [(59.0, 0), (60.0, 1)])
def test_launch_delay_boundary(waited: float, adds: int) -> None:
    plan = policy(launch_delay=60.0).decide(join([], (), snap([pending(1, waited)]), now=T0), NONE)
    assert plan.add == adds


def test_stabilization_does_not_hold_back_a_forecast_launch() -> None:
    recent = History(last_change_at=T0 - 10.0)
    assert policy().decide(join([], (), snap([pending(1, 0.0)]), now=T0), recent).add == 1


def test_held_jobs_are_no_demand() -> None:
    plan = policy().decide(join([], (), snap([pending(1, 60 * MIN, state="hqw")]), now=T0), NONE)
    assert plan.empty


# -- shrink: per-hour billing ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("into", "removed"),
    [
        (58 * MIN, False),  # 2 min left: the next poll (1 min left) is still in time
        (59 * MIN, True),  # 1 min left = removal_lead: the last poll before the next hour
        (59.5 * MIN, False),  # 30 s left < removal_lead: too late, the next hour is as good as paid
        (119 * MIN, True),  # the same in the second hour
    ],
)
def test_idle_node_goes_at_the_last_poll_before_its_next_hour(into: float, removed: bool) -> None:
    idle = node("node001", into, last_busy_at=T0 - into + 120)
    plan = policy(billing="hour").decide(join([idle], (), snap([], [host("node001")]), now=T0), NONE)
    assert (plan.remove != ()) == removed
    if removed:
        assert plan.remove[0].node == "node001"
        assert "the last poll before the next period" in plan.remove[0].reason


def test_busy_node_is_never_removed_at_its_window() -> None:
    s = snap([running(1, "node001", slots=1)], [host("node001", used=1)])
    plan = policy(billing="hour").decide(join([node("node001", 59 * MIN, last_busy_at=T0)], (), s, now=T0), NONE)
    assert not plan.remove


def test_unmanaged_hosts_and_the_master_are_never_removed() -> None:
    s = snap([], [host("master"), host("other01")])
    plan = policy(billing="hour").decide(join([], (), s, now=T0), NONE)
    assert plan.empty


def test_the_node_whose_paid_period_ends_first_goes_first_under_min_nodes() -> None:
    nodes = [node("node001", 59 * MIN + 30), node("node002", 59 * MIN)]
    s = snap([], [host("node001"), host("node002")])
    p = policy(billing="hour", min_nodes=1, removal_lead=0.0)
    plan = p.decide(join(nodes, (), s, now=T0), NONE)
    assert [r.node for r in plan.remove] == ["node001"]  # 30 s left before 60 s left


def test_node_a_waiting_job_would_take_is_kept_even_at_its_window() -> None:
    """A 16-slot job waits for a second node to boot: the idle ready node belongs to it."""
    nodes = [node("node001", 59 * MIN), node("node002", 60.0, state=NodeState.PROVISIONING)]
    s = snap([pending(1, 60.0, slots=16)], [host("node001")])
    plan = policy(billing="hour").decide(join(nodes, (), s, now=T0), NONE)
    assert plan.empty
    assert "waiting jobs would be placed on them" in plan.reason


def test_node_no_waiting_job_fits_on_may_go_while_jobs_wait() -> None:
    """A 4-slot node cannot take a waiting 6-slot job; it is not capacity that job could use."""
    small = node("node001", 59 * MIN)
    s = snap([pending(1, 0.0, slots=6)], [host("node001", slots=4)])
    plan = policy(billing="hour").decide(join([small], (), s, now=T0), NONE)
    assert [r.node for r in plan.remove] == ["node001"]
    assert plan.add == 1


# -- shrink: per-second billing -----------------------------------------------------------------
@pytest.mark.parametrize(("idle_for", "removed"), [(149.0, False), (150.0, True)])
def test_idle_node_goes_after_idle_factor_boot_times(idle_for: float, removed: bool) -> None:
    idle = node("node001", 3000.0, last_busy_at=T0 - idle_for)
    plan = policy(billing="second").decide(join([idle], (), snap([], [host("node001")]), now=T0), NONE)
    assert (plan.remove != ()) == removed
    if removed:
        assert ">= 0.5 x boot time" in plan.remove[0].reason


def test_never_below_min_nodes() -> None:
    idle = node("node001", 3000.0, last_busy_at=T0 - 3000.0)
    plan = policy(billing="second", min_nodes=1).decide(join([idle], (), snap([], [host("node001")]), now=T0), NONE)
    assert plan.empty
    assert "min_nodes 1" in plan.reason


# -- quiet_until -------------------------------------------------------------------------------
def test_quiet_until_is_the_opening_of_the_removal_window() -> None:
    idle = node("node001", 30 * MIN, last_busy_at=T0 - 20 * MIN)
    p = policy(billing="hour")
    s = snap([], [host("node001")])
    until = p.quiet_until(join([idle], (), s, now=T0), NONE)
    assert until == T0 + 28 * MIN  # the window opens when 2 min (lead + poll) are left
    assert p.decide(join([idle], (), snap([], [host("node001")], now=until), now=until), NONE).empty
    later = until + MIN
    assert [
        r.node for r in p.decide(join([idle], (), snap([], [host("node001")], now=later), now=later), NONE).remove
    ] == ["node001"]


def test_quiet_until_is_now_while_demand_wants_nodes_or_with_issue_2_rules() -> None:
    s = snap([pending(1, 0.0)])
    assert policy().quiet_until(join([], (), s, now=T0), NONE) == T0
    assert policy(grow="wait_time", shrink="timer").quiet_until(join([], (), snap(), now=T0), NONE) == T0


def test_quiet_until_waits_for_launch_delay() -> None:
    booting_full = snap([pending(1, 10.0)])
    assert policy(launch_delay=60.0).quiet_until(join([], (), booting_full, now=T0), NONE) == T0 + 50.0


# -- forecast placement ----------------------------------------------------------------------------
def test_forecast_places_fifo_and_reports_assigned_workers() -> None:
    s = snap(
        [pending(1, 30.0, slots=6), pending(2, 20.0, slots=4), pending(3, 10.0, slots=2)],
        [host("node001", used=2), host("node002", used=0)],
    )
    nodes = [busy_node("node001"), node("node002", 3000.0)]
    view = cluster_view(join(nodes, (), s, now=T0), "master", 8)
    fc = forecast(view, T0 + BOOT, limit=10)
    # job 1 (6) first-fits node001 (6 free); job 2 (4) then node002; job 3 (2) fits node002's 4 left.
    assert fc.new_nodes == 0
    assert fc.assigned == frozenset({"node001", "node002"})
    assert fc.complete


def test_forecast_stops_counting_past_the_limit_and_says_so() -> None:
    jobs = [pending(i, 100.0 - i, slots=8) for i in range(1, 11)]  # 10 nodes' worth
    view = cluster_view(join([], (), snap(jobs), now=T0), "master", 8)
    fc = forecast(view, T0 + BOOT, limit=3)
    assert (fc.new_nodes, fc.complete) == (4, False)  # stopped once past 3
    assert forecast(view, T0 + BOOT, limit=10).new_nodes == 10
    plan = policy(max_nodes=3).decide(join([], (), snap(jobs), now=T0), NONE)
    assert plan.add == 3
    assert "(capped at max_nodes; at least 4 wanted)" in plan.add_reason


def test_decide_reads_the_forecast_the_quiet_hint_made_for_a_limit_above_256(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forecast is worked out once per state and limit, whatever the limit's size (two equal
    ints above 256 are two objects), and one of another limit is not taken for it."""
    made: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs["limit"])
        return forecast(*args, **kwargs)

    monkeypatch.setattr(default, "forecast", counted)
    jobs = [pending(i, 100.0 - i, slots=8) for i in range(1, 4)]
    state = join([], (), snap(jobs), now=T0)
    p = policy(max_nodes=1000)
    assert p.quiet_until(state, NONE) == T0
    plan = p.decide(state, NONE)
    assert made == [1000]  # the hint's, read by decide
    assert plan == policy(max_nodes=1000).decide(state, NONE)
    few = p._forecast(p._view(state), state, p._view(state).pending, 1)
    assert made[-1] == 1 and (few.new_nodes, few.complete) == (2, False)  # stopped once past 1


# -- a replay: fast-forward gives the same result as polling every interval ---------------------
@pytest.mark.parametrize("billing", ["second", "hour"])
def test_replay_with_and_without_fast_forward_is_identical(billing: str) -> None:
    jobs = [SimJob(i, i * 400.0 + (i % 3) * 50, 300.0 + 97 * (i % 5), 1 + (i * 7) % 20, 1200.0) for i in range(60)]
    p = policy(billing=billing, max_nodes=6)
    outs = []
    for ff in (True, False):
        settings = SimSettings(slots_per_node=8, max_nodes=6, boot_time=BOOT, record=True, fast_forward=ff)
        outs.append(Simulator(jobs, p, settings).run())
    fast, slow = outs
    assert fast.decisions < slow.decisions
    assert fast.placements == slow.placements
    assert fast.nodes == slow.nodes


def test_a_job_packed_on_a_node_launched_for_another_counts_as_short_too() -> None:
    plan = policy().decide(join([], (), snap([pending(1, 20.0, slots=6), pending(2, 10.0, slots=1)]), now=T0), NONE)
    assert plan.add == 1
    assert plan.add_reason.startswith("2 jobs (7 slots) can't start within a boot time")


def test_removal_lead_must_fit_in_the_billing_period() -> None:
    with pytest.raises(ValueError, match="removal_lead"):
        PolicyConfig(removal_lead=3600.0)
    assert PolicyConfig(removal_lead=3599.0).removal_lead == 3599.0


def test_forecast_uses_the_dispatchers_first_fit_so_it_launches_when_a_job_would_wait() -> None:
    # node001 has 3 free slots, node002 has 2; a 2-slot job then a 3-slot job wait. The dispatcher
    # (first fit in host order) puts the 2-slot job on node001, so the 3-slot job fits nowhere:
    # the forecast must see the same and launch, not pack the 2-slot job on node002 (best fit).
    s = snap([pending(1, 30.0, slots=2), pending(2, 20.0, slots=3)], [host("node001", used=5), host("node002", used=6)])
    nodes = [busy_node("node001"), busy_node("node002")]
    view = cluster_view(join(nodes, (), s, now=T0), "master", 8)
    fc = forecast(view, T0 + BOOT, limit=10)
    assert (fc.new_nodes, fc.short_jobs, fc.assigned) == (1, 1, frozenset({"node001"}))
    assert policy().decide(join(nodes, (), s, now=T0), NONE).add == 1


def test_overrun_perturbation_is_seeded_and_only_lengthens_jobs_past_their_request() -> None:
    from elb.simulate.swf import Workload, overrun

    jobs = [SimJob(n, float(n), 100.0, 1, 200.0 if n % 2 else None) for n in range(1000)]
    wl = Workload("t", jobs)
    a, b = overrun(wl, 0.1, max_hours=2.0, seed=7), overrun(wl, 0.1, max_hours=2.0, seed=7)
    assert [j.run for j in a.jobs] == [j.run for j in b.jobs]
    changed = [(old, new) for old, new in zip(wl.jobs, a.jobs, strict=True) if new.run != old.run]
    assert len(changed) == a.overrun and 25 < a.overrun < 80  # about 10% of the 500 with a request
    assert all(o.requested is not None and o.requested + 60 <= n.run <= o.requested + 7200 for o, n in changed)
    assert overrun(wl, 0.0) is wl


def test_replay_with_overruns_the_forecast_launches_for_jobs_behind_an_overdue_one() -> None:
    """One 8-slot node busy with a job that requested 10 min and runs 5 h; an 8-slot job waits
    behind it. Counting the overdue job's slots as about to free, elb would never launch for it."""
    jobs = [SimJob(1, 0.0, 5 * 3600.0, 8, 600.0), SimJob(2, 1800.0, 600.0, 8, 600.0)]
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=BOOT, poll_interval=MIN)
    result = Simulator(jobs, policy(max_nodes=2), settings).run()
    assert len(result.waits) == 2
    assert max(result.waits) < 2 * BOOT  # a second node came for job 2; it did not wait 3.5 h for the first


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from((1, 1, 2, 8, 12, 0)), st.sampled_from((1, 3, 0))), max_size=40),
    st.lists(st.sampled_from((0, 7, 8)), max_size=3),
    st.integers(0, 2),
)
def test_a_forecast_of_the_views_own_waiting_jobs_is_the_forecast_of_all_of_them(
    sizes: list[tuple[int, int]], used: list[int], limit: int
) -> None:
    """The view's very tuple of waiting jobs, handed as ``counted`` (as ``decide`` does when no
    launch_delay holds any back), is forecast as when none is handed: past saturation both count
    the rest from the view's totals (or, with a job of no slot or task, one by one)."""
    jobs = [pending(i, 100.0 - i, slots=s, tasks=t) for i, (s, t) in enumerate(sizes, 1)]
    hosts = [host(f"node{i:03d}", used=u) for i, u in enumerate(used, 1)]
    nodes = [node(h.name, 3000.0) for h in hosts]
    view = cluster_view(join(nodes, (), snap(jobs, hosts), now=T0), "master", 8)
    assert forecast(view, T0 + BOOT, view.pending, limit=limit) == forecast(view, T0 + BOOT, limit=limit)
    assert forecast(view, T0 + BOOT, tuple(list(view.pending)), limit=limit) == forecast(view, T0 + BOOT, limit=limit)
