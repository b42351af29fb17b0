"""The budget's rules (``elb.core.budget``) and the pass that applies them (``plan_pass``): a period's
bounds, the projection, launches held so that the period does not overrun (restarts too), never a
removal or a kill, Slurm's named asks given back, and the config that turns it on."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from elb.core.backoff import Backoff, Backoffs, Cause
from elb.core.budget import Budget, Launch, Spend, holding_now, pace, period_bounds, room, status_lines
from elb.core.config import Config, ConfigError, parse_config
from elb.core.demand import DemandSplit
from elb.core.interfaces import Instance
from elb.core.model import History, Node, NodeState, Snapshot
from elb.core.orders import Orders
from elb.core.planner import PassInputs, PassPlan, plan_pass
from elb.core.policy.grouped import policy_for
from elb.core.scheduler import Ask, AskKind
from tests.unit.factories import EC2, T0, host, node, pending, running, snap

# T0 is 2027-01-15 08:00 UTC, a Friday.
JAN_16_DAYS_16_HOURS = (16 * 24 + 16) * 3600.0


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# -- the period ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "offset", "start", "end"),
    [
        ("day", "+00:00", "2027-01-15T00:00", "2027-01-16T00:00"),
        ("week", "+00:00", "2027-01-11T00:00", "2027-01-18T00:00"),  # Monday to Monday
        ("month", "+00:00", "2027-01-01T00:00", "2027-02-01T00:00"),
        ("day", "+10:00", "2027-01-14T14:00", "2027-01-15T14:00"),  # 08:00 UTC is 18:00 there
        ("day", "-09:30", "2027-01-14T09:30", "2027-01-15T09:30"),  # 08:00 UTC is 22:30 the day before
    ],
)
def test_a_period_starts_at_midnight_at_the_offset(period: str, offset: str, start: str, end: str) -> None:
    b = Budget(amount=10.0, period=period, utc_offset=offset)
    assert period_bounds(b, T0) == (ts(start), ts(end))


def test_december_s_month_ends_with_the_year() -> None:
    b = Budget(amount=10.0, period="month")
    assert period_bounds(b, ts("2026-12-31T23:59")) == (ts("2026-12-01T00:00"), ts("2027-01-01T00:00"))


# -- the rule --------------------------------------------------------------------------------


def test_launches_go_while_the_projection_to_the_period_s_end_stays_within_the_amount() -> None:
    b = Budget(amount=100.0, period="day")  # 16 h left at T0
    # 52 spent, nothing up now: 52 projected; each launch at 1/h adds 16 (and 24 to the next day:
    # four would fit in it, not the bound here).
    check = pace(b, Spend(52.0, 0.0), [Launch(f"n{i}", 1.0) for i in range(5)], T0)
    assert check.projected == pytest.approx(52.0)
    assert check.allowed == ("n0", "n1", "n2") and check.held == ("n3", "n4")
    assert check.after == pytest.approx(100.0)  # the amount exactly: allowed
    assert check.holding and "holding 2 of 5 launch(es)" in check.reason and "52.00 projected" in check.reason


def test_once_a_launch_is_held_every_later_one_is_too_even_a_cheaper_one() -> None:
    b = Budget(amount=100.0, period="day")
    check = pace(b, Spend(0.0, 0.0), [Launch("big", 10.0), Launch("small", 0.5)], T0)
    assert check.allowed == () and check.held == ("big", "small")  # a wide job's nodes go together or not at all


def test_nothing_wanted_is_nothing_held_and_the_figures_are_still_given() -> None:
    check = pace(Budget(amount=500.0), Spend(100.0, 1.0), (), T0)
    assert not check.holding and check.reason == ""
    assert check.projected == pytest.approx(100.0 + JAN_16_DAYS_16_HOURS / 3600.0)
    assert "no launch held" in check.describe()


def test_over_the_amount_already_every_launch_is_held() -> None:
    check = pace(Budget(amount=50.0, period="day"), Spend(60.0, 0.0), [Launch("n1", 0.01)], T0)
    assert check.held == ("n1",)


def test_with_a_horizon_a_burst_may_spend_what_quiet_times_left() -> None:
    """A month of 744 dollars (1 an hour on average), 400 hours left at T0, 100 spent: to the
    period's end, one node fits; paced a day ahead, the amount accrued by tomorrow 08:00 (368
    hours: 368 dollars) is what it may reach, eleven nodes for a day."""
    spend = Spend(100.0, 0.0)
    guaranteed = pace(Budget(amount=744.0), spend, [Launch(f"n{i}", 1.0) for i in range(30)], T0)
    assert len(guaranteed.allowed) == 1  # 100 + 400 h x 1 node = 500; a second node would be 900
    burst = pace(Budget(amount=744.0, horizon=86400.0), spend, [Launch(f"n{i}", 1.0) for i in range(30)], T0)
    assert burst.limit == pytest.approx(368.0) and len(burst.allowed) == 11  # (368 - 100) / 24
    assert (
        "paced 24.0 h ahead: 368.00 by then); the next adds 24.00 over the next 24.0 h"
        in pace(Budget(amount=744.0, horizon=86400.0), Spend(400.0, 0.0), [Launch("x", 1)], T0).reason
    )
    # The last day: the horizon reaches past the end, and the whole amount is the bound again.
    late = ts("2027-01-31T12:00")
    assert pace(Budget(amount=744.0, horizon=86400.0), Spend(700.0, 0.0), [Launch("x", 4.0)], late).held == ("x",)
    assert pace(Budget(amount=744.0, horizon=86400.0), Spend(700.0, 0.0), [Launch("x", 3.0)], late).allowed == ("x",)


def test_room_and_holding_say_how_many_more_nodes_of_each_group_fit() -> None:
    b = Budget(amount=100.0, period="day")
    spend = Spend(36.0, 1.0)  # 52 projected, 48 of headroom over 16 h: 3/h (the next day: 76 of 100 free)
    assert room(b, spend, {"small": 0.5, "big": 2.0}, T0) == {"small": 6, "big": 1}
    assert not holding_now(b, spend, {"small": 0.5, "big": 2.0}, T0)
    assert holding_now(b, Spend(99.0, 0.0), {"small": 0.5, "big": 2.0}, T0)
    lines = status_lines(b, Spend(99.0, 0.0), {"small": 0.5}, T0)
    assert "99.00 of 100.00 US dollars spent this day" in lines[0] and "HOLDING" in lines[1]


def test_paced_launches_never_overrun_the_period_whatever_the_demand() -> None:
    """A day of random demand, per-second billing, nodes removed when idle at random: the money
    billed in the period, launches paced at every minute, never passes the amount."""
    rng = random.Random(7)
    b = Budget(amount=40.0, period="day")
    start, end = period_bounds(b, T0)
    price = {"a": 1.0, "b": 3.0}
    up: list[tuple[str, float]] = []  # (group, since)
    spent = 0.0
    t = start
    while t < end:
        rate = sum(price[g] for g, _ in up)
        wanted = [Launch(f"x{i}", price[rng.choice("ab")]) for i in range(rng.randint(0, 6))]
        check = pace(b, Spend(spent, rate), wanted, t)
        for w in wanted:
            if w.name in check.allowed:
                up.append(("a" if w.per_hour == 1.0 else "b", t))
        up = [u for u in up if rng.random() > 0.05]  # idle ones go (the policy's removals)
        spent += sum(price[g] for g, _ in up) * 60 / 3600.0
        t += 60
    assert spent <= b.amount + 1e-6


# -- the config ------------------------------------------------------------------------------


PRICED = [
    {"name": "small", "slots": 8, "max_nodes": 4, "price_per_hour": 1.0},
    {"name": "big", "slots": 8, "max_nodes": 4, "price_per_hour": 4.0},
]


def config(tmp_path: Path, budget: dict[str, Any] | None = None, **extra: Any) -> Config:
    policy: dict[str, Any] = {"shrink": "timer", "add_nodes_per_iteration": 4}
    if budget is not None:
        policy["budget"] = budget
    return parse_config({"state_dir": str(tmp_path), "policy": policy, "node_groups": PRICED, **extra})


def test_a_budget_needs_the_groups_prices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"policy\.budget: a budget needs the nodes' prices"):
        parse_config({"policy": {"budget": {"amount": 10}}})
    assert config(tmp_path, {"amount": 100, "period": "week"}).policy.budget == Budget(amount=100.0, period="week")


@pytest.mark.parametrize(
    "bad",
    [{"amount": 0}, {"amount": -5}, {"amount": 10, "period": "year"}, {"amount": 10, "utc_offset": "+15:00"}, {}],
)
def test_a_budget_that_is_no_budget_is_refused(tmp_path: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"policy\.budget"):
        config(tmp_path, bad)


# -- the pass --------------------------------------------------------------------------------


def inputs(snapshot: Snapshot, nodes: tuple[Node, ...] = (), **kw: Any) -> PassInputs:
    instances = tuple(
        Instance(f"i-{n.name}", n.name, "stopped" if n.state.pooled else "running", n.launched_at, "10.0.0.9")
        for n in nodes
    )
    values: dict[str, Any] = {
        "snapshot": snapshot,
        "nodes": nodes,
        "instances": instances,
        "demand": DemandSplit(snapshot),
        "history": History(),
        "orders": Orders(),
        "backoff": Backoffs(),
        "scheduler": "SGE",
        "cloud": EC2,
    }
    values.update(kw)
    return PassInputs(**values)


WAITING = snap([pending(i, 900, slots=8) for i in range(1, 4)])  # three nodes' worth, of group small


def plan(cfg: Config, spend: Spend | None, snapshot: Snapshot = WAITING, **kw: Any) -> PassPlan:
    return plan_pass(inputs(snapshot, spend=spend, **kw), cfg, policy_for(cfg), T0)


def test_without_a_budget_the_pass_is_what_it_was(tmp_path: Path) -> None:
    with_spend = plan(config(tmp_path), Spend(1e6, 1e6))  # a spend but no budget: not read
    assert with_spend.scaling is not None and with_spend.scaling.add == 3 and with_spend.budget is None


def test_the_budget_holds_the_launches_that_would_overrun_and_says_so(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"amount": 48.0, "period": "day"})  # 16 h left: 40 affords 2 small nodes
    p = plan(cfg, Spend(8.0, 0.0))  # and the next day pays 24 for each
    assert p.scaling is not None and p.scaling.add_names == ("node001", "node002")
    assert p.budget is not None and p.budget.held == ("node003",)
    assert "budget: holding 1 of 3 launch(es)" in p.scaling.reason
    assert p.wanted == 3 and p.launches_held == 0  # the back-off held none
    assert any(line.startswith("budget: 8.00 of 48.00") and "holding 1" in line for line in p.describe())


def test_the_budget_never_removes_a_node_nor_kills_a_job(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"amount": 10.0, "period": "day"})
    busy = node("node001", 7200, instance_id="i-node001", group="big")
    snapshot = snap([running(9, "node001", slots=8), *WAITING.jobs], [host("node001", used=8)])
    p = plan(cfg, Spend(50.0, 4.0), snapshot, nodes=(busy,))  # far over the amount already
    assert p.scaling is not None and p.scaling.add == 0 and p.scaling.remove == ()
    assert p.budget is not None and len(p.budget.held) == 3 and p.repairs == ()


def test_an_idle_node_still_goes_while_launches_are_held(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"amount": 10.0, "period": "day"})
    idle = node("node001", 3500, instance_id="i-node001", group="small")
    p = plan(cfg, Spend(50.0, 1.0), snap(hosts=[host("node001")]), nodes=(idle,))
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node001"]


def test_the_budget_cuts_after_the_back_off(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"amount": 100.0, "period": "day"})
    backoff = Backoffs(
        default=Backoff(2, T0 - 1, Cause.PROVISION, "node009: provisioning failed")
    )  # a probe: one launch
    p = plan(cfg, Spend(90.0, 0.0), backoff=backoff)  # 10 left: no 16-dollar launch fits
    assert p.scaling is not None and p.scaling.add == 0
    assert p.wanted == 3 and p.launches_held == 2  # two by the back-off, one by the budget
    assert p.budget is not None and len(p.budget.held) == 1


def test_a_restart_from_the_warm_pool_counts_as_a_launch(tmp_path: Path) -> None:
    groups = [{**PRICED[0], "warm_pool": {"max_nodes": 2, "volume_price_per_hour": 0.25}}, PRICED[1]]
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "policy": {"shrink": "timer", "add_nodes_per_iteration": 4, "budget": {"amount": 30.0, "period": "day"}},
            "node_groups": groups,
        }
    )
    pooled = node("node007", 86400, state=NodeState.STOPPED, stopped_at=T0 - 60, instance_id="i-node007", group="small")
    # 0.25/h of volumes already counted: a restart adds 0.75/h (12 to the end), a launch 1/h (16).
    p = plan(cfg, Spend(0.0, 0.25), nodes=(pooled,))
    assert [r.node for r in p.pool.restarts] == ["node007"]
    assert p.scaling is not None and p.scaling.add == 0
    assert p.budget is not None and p.budget.allowed == ("node007",) and len(p.budget.held) == 2
    tight = plan(cfg, Spend(20.0, 0.25), nodes=(pooled,))  # 24 projected: no room for 12 more
    assert tight.pool.restarts == () and tight.budget is not None and tight.budget.restarts_held == 1
    assert tight.launches_held == 0


def test_slurm_s_named_asks_the_budget_holds_are_given_back(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "scheduler": "slurm",
            "policy": {"budget": {"amount": 30.0, "period": "day"}},
            "node_groups": PRICED,
        }
    )
    asks = tuple(Ask(n, AskKind.WANT, T0 - 30) for n in ("node001", "node002"))
    p = plan_pass(inputs(snap(), asks=asks, spend=Spend(10.0, 0.0)), cfg, policy_for(cfg), T0)
    assert p.scaling is not None and p.scaling.add_names == ("node001",)
    [given_back] = p.declines
    assert given_back.node == "node002" and given_back.reason.startswith("budget: holding 1 of 2")


def test_a_job_wider_than_the_budget_lets_its_group_have_is_not_demand(tmp_path: Path) -> None:
    """One job of three nodes and a node up idle: with no room for more, no node is launched for
    it, the idle node is not kept for it, and the plan says why; with room for two, both go."""
    cfg = config(tmp_path, {"amount": 20.0, "period": "day"})  # 16 h left: a small node costs 16
    idle = node("node001", 3500, instance_id="i-node001", group="small")
    wide = snap([pending(1, 900, slots=24)], [host("node001")])
    p = plan(cfg, Spend(0.0, 1.0), wide, nodes=(idle,))  # 16 projected: no room at all
    assert p.scaling is not None and p.scaling.add == 0
    assert [r.node for r in p.scaling.remove] == ["node001"]  # no job waits for it now
    assert p.budget is not None and p.budget.too_wide == 1
    assert "1 job(s) wider than the budget lets their group have wait" in p.budget.describe()
    roomy = plan(config(tmp_path, {"amount": 100.0, "period": "day"}), Spend(0.0, 1.0), wide, nodes=(idle,))
    assert roomy.scaling is not None and roomy.scaling.add == 2 and roomy.scaling.remove == ()
