"""A budget holds every period, not only the first: a node launched late in a period keeps
running into the next one (elb stops no busy node, and a job that waits takes the node the last
one freed), so a launch must also fit in what the next period can pay for the nodes up then."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from elb.core.budget import Budget, Launch, Spend, pace, room
from elb.simulate.budget import ANCHOR
from elb.simulate.engine import SimOutcome, SimSettings
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_launch_late_in_the_period_must_fit_in_what_the_next_period_can_pay() -> None:
    """A day of 24 at 1 an hour, an hour left, nothing spent: to the period's end each node adds
    1, but whatever runs at midnight runs on while jobs wait: the next day pays 24 a node."""
    late = ts("2027-01-16T23:00")
    check = pace(Budget(amount=24.0, period="day"), Spend(0.0, 0.0), [Launch(f"n{i}", 1.0) for i in range(5)], late)
    assert check.allowed == ("n0",) and check.held == ("n1", "n2", "n3", "n4")
    assert "next day" in check.reason
    assert room(Budget(amount=24.0, period="day"), Spend(0.0, 0.0), {"small": 1.0}, late) == {"small": 1}
    # 12 an hour runs now: the next day is paid for in full, nothing more goes.
    assert pace(Budget(amount=288.0, period="day"), Spend(100.0, 12.0), [Launch("x", 1.0)], late).held == ("x",)


def test_a_week_late_in_its_period_is_bounded_by_the_next_week_too() -> None:
    sunday = ts("2027-01-17T12:00")  # a Sunday: 12 h of the week left
    check = pace(Budget(amount=168.0, period="week"), Spend(0.0, 0.0), [Launch(f"n{i}", 1.0) for i in range(3)], sunday)
    assert check.allowed == ("n0",)  # the next week pays 168 for each node up at its start


def steady(days: int) -> list[SimJob]:
    """One 8-slot job of 24 hours every 20 minutes: 72 nodes' worth of work a day."""
    return [SimJob(i + 1, ANCHOR + i * 1200.0, 86400.0, 8, requested=86400.0) for i in range(days * 72)]


def per_day(out: SimOutcome, days: int) -> list[float]:
    return [
        sum(
            max(0.0, min(n.terminated_at, ANCHOR + (k + 1) * 86400) - max(n.launched_at, ANCHOR + k * 86400))
            for n in out.nodes
        )
        / 3600.0
        for k in range(days)
    ]


def test_a_steady_queue_spends_its_daily_budget_every_day_not_only_the_first() -> None:
    """Half of what a steady queue of day-long jobs needs: day 1 launched 64 nodes by its end (each
    cheap to the day's end) and they stayed busy, 178% of the budget every day after."""
    jobs = steady(4)
    prepared = prepare(Workload("steady", jobs), 8, 200)
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=200)
    budget = Budget(amount=864.0, period="day")
    settings = SimSettings(max_nodes=200, budget=budget, billing="second")
    _, out = replay(prepared, policy, settings, billing="second", price=1.0)
    days = per_day(out, 4)
    assert days[0] <= budget.amount + 0.01
    for k in (1, 2, 3):
        assert days[k] <= budget.amount * 1.02, (k, days)
    assert days[1] >= budget.amount * 0.9, days  # the budget is spent, not starved


@pytest.mark.parametrize("amount", [10.0, 1e6])
def test_no_launch_no_change(amount: float) -> None:
    check = pace(Budget(amount=amount, period="day"), Spend(0.0, 0.0), (), ts("2027-01-16T23:00"))
    assert check.allowed == () and check.held == ()
