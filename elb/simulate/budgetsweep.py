"""``elb simulate --budget-sweep``: a policy's replay without a budget, then with budgets of
shares of what it spent in its costliest period, each replay's cost, waits and launches held
(``elb.simulate.budget``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from elb.core.budget import Budget, Period
from elb.core.policy.base import Policy
from elb.simulate.budget import BudgetRun, costliest_period, period_spend
from elb.simulate.engine import SimOutcome, SimSettings
from elb.simulate.report import Billing, Metrics
from elb.simulate.runner import Prepared, replay


def budget_sweep(
    prepared: Prepared,
    policy: Policy,
    settings: SimSettings,
    *,
    billing: Billing,
    price: float,
    label: str,
    shares: Sequence[float],
    period: Period,
    horizon: float | None = None,
    free: tuple[Metrics, SimOutcome] | None = None,
    progress: Callable[[str], Callable[[float], None] | None] = lambda _: None,
) -> list[BudgetRun]:
    """``policy``'s replay without a budget (``free``: that replay, made already), then once
    per share (in %) of its costliest period's spend as the budget of each ``period``."""
    prices = {g.name: g.price_per_hour or price for g in prepared.groups.groups.groups}
    unpaced = dataclasses.replace(settings, budget=None, billing=billing)
    m, out = free or replay(
        prepared, policy, unpaced, billing=billing, price=price, label=label, progress=progress(label)
    )
    top = costliest_period(out, Budget(amount=1.0, period=period), billing, prices)
    runs = [BudgetRun(f"{label} unconstrained", None, None, m.cost, top, m.wait_mean, m.wait_p95, m.wait_max, 0, 0)]
    for share in shares:
        budget = Budget(amount=top * share / 100.0, period=period, horizon=horizon)
        shown = f"{label} {share:g}%"
        paced = dataclasses.replace(unpaced, budget=budget)
        m, out = replay(prepared, policy, paced, billing=billing, price=price, label=shown, progress=progress(shown))
        periods = period_spend(out, budget, billing, prices)
        spent = max((s for _, s in periods), default=0.0)
        runs.append(
            BudgetRun(
                shown,
                budget.amount,
                share,
                m.cost,
                spent,
                m.wait_mean,
                m.wait_p95,
                m.wait_max,
                out.budget_held,
                m.never_started,
                periods,
            )
        )
    return runs


__all__: Sequence[str] = ("budget_sweep",)
