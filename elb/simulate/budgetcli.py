"""``elb simulate``'s budget options: ``--budget AMOUNT/PERIOD`` (every replay paced by it),
``--budget-sweep`` (each policy without a budget, then with shares of its costliest period's
spend; a table and ``--budget-plot``) and ``--spend-by`` (who spent each replay's money).
docs/simulate.md ("Budget") and docs/results/budget.md."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from elb.core.budget import Budget
from elb.core.durations import argument as duration
from elb.core.durations import minutes
from elb.core.extras import plot_missing
from elb.core.policy.base import Policy
from elb.simulate.budget import (
    BudgetRun,
    anchored,
    budget_plot,
    budget_table,
    log_users,
    parse_budget,
    period_lines,
    period_spend,
    replay_split,
    split_table,
)
from elb.simulate.budgetsweep import budget_sweep
from elb.simulate.engine import SimOutcome, SimSettings
from elb.simulate.report import Metrics
from elb.simulate.runner import Prepared, SimError


def add_budget_options(p: Any) -> None:
    p.add_argument(
        "--budget",
        default=None,
        metavar="AMOUNT/PERIOD",
        help="pace every replay's launches to this budget (500/week; day, week or month), as policy.budget does; "
        "the replay starts at a period's start",
    )
    p.add_argument(
        "--budget-sweep",
        default=None,
        metavar="P1,P2,...",
        help="replay each policy without a budget, then with budgets of these percentages of what it spent in its "
        "costliest --budget-period (e.g. 50,75,90): cost, waits and launches held",
    )
    p.add_argument("--budget-period", choices=("day", "week", "month"), default="month", help="--budget-sweep's period")
    p.add_argument(
        "--budget-horizon",
        type=duration,
        default=None,
        metavar="DURATION",
        help="the budget's horizon (policy.budget.horizon; default none: to the period's end)",
    )
    p.add_argument("--budget-plot", default=None, metavar="FILE.png", help="--budget-sweep: cost and waits, drawn")
    p.add_argument(
        "--spend-by",
        choices=("group", "user"),
        default=None,
        help="who spent each replay's money: its billed node-hours to the jobs by their slots (by node group, "
        "or by the log's user), the rest to booting, idle and the bill's minimum",
    )


def budget_of(args: argparse.Namespace) -> Budget | None:
    """The ``--budget`` asked for (and the options checked), or None."""
    if (args.budget_sweep or args.spend_by) and args.json:
        raise SimError("--budget-sweep and --spend-by print tables: not with --json")
    if args.budget_sweep is not None:
        _shares(args.budget_sweep)  # refused before any replay
    if args.budget_plot is not None and not args.budget_sweep:
        raise SimError("--budget-plot draws --budget-sweep's replays: give --budget-sweep")
    if args.budget_plot is not None and (missing := plot_missing()) is not None:
        raise SimError(f"--budget-plot: {missing}")
    if args.budget is None:
        return None
    try:
        return parse_budget(args.budget).model_copy(update={"horizon": args.budget_horizon})
    except ValueError as err:
        raise SimError(str(err)) from None


def budget_json(budget: Budget | None) -> dict[str, object] | None:
    """The replay's budget in ``--json``'s settings (None: no budget)."""
    if budget is None:
        return None
    return {"amount": budget.amount, "period": budget.period, "horizon": budget.horizon}


def _shares(text: str) -> list[float]:
    try:
        shares = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        shares = []
    if not shares or any(not 0 < s <= 1000 for s in shares):
        raise SimError(f"--budget-sweep wants percentages above 0, separated by commas (50,75,90), got {text!r}")
    return shares


def report_budget(
    args: argparse.Namespace,
    prepared: Prepared,
    runs: Sequence[tuple[Policy, str, tuple[Metrics, SimOutcome]]],
    settings: SimSettings,
    *,
    replays: tuple[Sequence[Metrics], Sequence[SimOutcome]],
    tty: bool,
) -> None:
    """Print who spent each replay's money (``--spend-by``), and run and print the budget sweep
    (``runs``: each policy and label with its replay, the sweep's unconstrained one when it had
    no budget)."""
    results, outs = replays
    prices = {g.name: g.price_per_hour or args.price for g in prepared.groups.groups.groups}
    if args.spend_by is not None:
        users = log_users(args.log) if args.spend_by == "user" else None
        for m, out in zip(results, outs, strict=True):
            split = replay_split(out, prepared.jobs, args.spend_by, billing=args.billing, prices=prices, users=users)
            print()
            print(split_table(split, m.label))
    if settings.budget is not None and not args.json:  # each period's spend against the budget
        for _, label, (_, out) in runs:
            print()
            print(
                "\n".join(
                    period_lines(label, settings.budget, period_spend(out, settings.budget, args.billing, prices))
                )
            )
    if not args.budget_sweep:
        return
    shares = _shares(args.budget_sweep)
    swept: list[BudgetRun] = []
    for policy, label, replayed in runs:
        swept += budget_sweep(
            prepared,
            policy,
            settings,
            free=replayed if settings.budget is None else None,
            billing=args.billing,
            price=args.price,
            label=label,
            shares=shares,
            period=args.budget_period,
            horizon=args.budget_horizon,
            progress=_progress(tty),
        )
    print()
    print(f"budget sweep: budgets a {args.budget_period} of {', '.join(f'{s:g}%' for s in shares)} of the costliest")
    print(f"{args.budget_period}'s spend without a budget; the replay starts at a {args.budget_period}'s start", end="")
    print(
        f"; paced {minutes(args.budget_horizon)} ahead"
        if args.budget_horizon
        else "; paced to the period's end and the next period's budget"
    )
    print(budget_table(swept, args.budget_period))
    for run in swept:
        if run.amount is not None:
            print()
            print("\n".join(period_lines(run.label, Budget(amount=run.amount, period=args.budget_period), run.periods)))
    if args.budget_plot is not None:
        title = f"{args.log.name}: budgets a {args.budget_period}, per {args.billing} billing"
        budget_plot(swept, args.budget_plot, title)
        print(f"plot: {args.budget_plot}")


def _progress(tty: bool) -> Callable[[str], Callable[[float], None] | None]:
    def make(label: str) -> Callable[[float], None] | None:
        if not tty:
            return None

        def show(fraction: float) -> None:
            done = int(fraction * 30)
            sys.stderr.write(f"\r{label:<24} [{'#' * done}{'.' * (30 - done)}] {fraction * 100:5.1f}%")
            if fraction >= 1.0:
                sys.stderr.write("\n")

        return show

    return make


__all__: Sequence[str] = ("add_budget_options", "anchored", "budget_json", "budget_of", "report_budget")
