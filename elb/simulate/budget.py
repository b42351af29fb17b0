"""A budget in a replay (``elb simulate --budget``, ``--budget-sweep``), and who spent the
replay's money (``--spend-by``).

- ``BudgetMeter``: what the replay's period has cost so far and the rate it spends at now, the
  figures the live pass reads from its journal (``elb.core.spend.read_spend``), kept from the
  simulated nodes: the lives that ended (taken in as they end), the nodes up now at their
  groups' prices, the warm pools' volumes. The planner paces the launches on them as live
  (``elb.core.planner.pace_launches``).
- ``anchored``: the log's jobs moved in time so that the replay starts at the start of a budget
  period (a log's clock is its own; a budget's periods are calendar days, weeks and months).
- ``replay_split``: every billed node-second of a replay attributed as ``elb spend`` does
  (``elb.core.attribution``): the jobs by their slots (by node group, or by the log's user), the rest
  to booting, idle and the bill's minimum; the warm pools' volumes apart. It adds up to the
  replay's bill.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from elb.core.attribution import Attribution, By, JobUse, Part, attribute
from elb.core.budget import Budget, period_bounds, when
from elb.core.spend import Billing, Life, billed_seconds, overlap
from elb.schedulers.sge.accounting import AccountingError, read_lines
from elb.simulate.swf import SimJob, SwfError, Workload, open_lines

if TYPE_CHECKING:
    from elb.simulate.engine import SimOutcome

# Replays with a budget start here: a Monday, the first of a month, midnight UTC.
ANCHOR = datetime(2024, 1, 1, tzinfo=UTC).timestamp()


def parse_budget(text: str) -> Budget:
    """``AMOUNT/PERIOD`` (``500/week``) as a budget (US dollars, or the replay's ``--price`` money)."""
    amount, sep, period = text.partition("/")
    try:
        value = float(amount)
    except ValueError:
        value = math.nan
    if not sep or period not in ("day", "week", "month") or not (math.isfinite(value) and value > 0):
        raise ValueError(f"--budget wants AMOUNT/PERIOD with a period of day, week or month (500/week), got {text!r}")
    return Budget(amount=value, period=period)


def anchored(wl: Workload) -> Workload:
    """``wl`` with its jobs moved so that the first one is submitted at ``ANCHOR`` (a period's
    start whatever the period); waits and run times are the same."""
    if not wl.jobs:
        return wl
    shift = ANCHOR - wl.jobs[0].submit
    jobs = [replace(j, submit=j.submit + shift) for j in wl.jobs]
    return Workload(wl.source, jobs, dict(wl.header), dict(wl.skipped), wl.overrun)


def period_spend(
    out: SimOutcome, budget: Budget, billing: Billing, prices: Mapping[str, float]
) -> tuple[tuple[float, float], ...]:
    """What a replay spent in each of ``budget``'s periods it billed in, by the period's start, in
    order (compute only: the nodes' billed time, at their groups' prices)."""
    per: dict[float, float] = {}
    for life in out.nodes:
        billed = billed_seconds(life.terminated_at - life.launched_at, billing)
        a, b = life.launched_at, life.launched_at + billed
        t = a
        while t < b:
            start, end = period_bounds(budget, t)
            per[start] = per.get(start, 0.0) + overlap(a, b, start, end) * prices.get(life.group, 0.0) / 3600.0
            t = end
    return tuple(sorted(per.items()))


def costliest_period(out: SimOutcome, budget: Budget, billing: Billing, prices: Mapping[str, float]) -> float:
    """The most a replay spent in one of ``budget``'s periods (``period_spend``)."""
    return max((spent for _, spent in period_spend(out, budget, billing, prices)), default=0.0)


SHOWN_PERIODS = 40  # a replay with more periods lists only those over its budget


def period_lines(label: str, budget: Budget, spent: Sequence[tuple[float, float]]) -> list[str]:
    """A budgeted replay's spend in each period against its budget, the periods over it flagged
    (reporting only: the pacing is the planner's)."""
    over = [(start, s) for start, s in spent if _over(s, budget.amount)]
    rows = spent if len(spent) <= SHOWN_PERIODS else over[:SHOWN_PERIODS]
    lines = [
        f"{label}: spend a {budget.period} against the budget of {budget.amount:,.2f}",
        f"  {'period from':<18} {'spent':>12} {'of budget':>10}",
    ]
    for start, s in rows:
        flag = f"  over budget ({_over(s, budget.amount)})" if (start, s) in over else ""
        lines.append(f"  {when(budget, start)[:16]:<18} {s:>12,.2f} {s / budget.amount * 100:>9.0f}%{flag}")
    if len(rows) < len(spent):
        lines.append(f"  ({len(spent) - len(rows)} more period(s) not listed: only those over the budget are)")
    if over:
        top_start, top = max(over, key=lambda p: p[1])
        lines.append(
            f"  over budget in {len(over)} of {len(spent)} {budget.period}s; the most: {when(budget, top_start)[:16]}, "
            f"{top:,.2f} ({_over(top, budget.amount)})"
        )
    else:
        lines.append(f"  within the budget in every one of {len(spent)} {budget.period}s")
    return lines


@dataclass(frozen=True, slots=True)
class BudgetRun:
    """One replay of the budget sweep: the budget (None: unconstrained), its cost and waits."""

    label: str
    amount: float | None
    share: float | None  # of the unconstrained replay's costliest period
    cost: float
    costliest_period: float  # the most spent in one period
    wait_mean: float
    wait_p95: float
    wait_max: float
    held: int  # passes at which the budget held a launch
    never_started: int
    periods: tuple[tuple[float, float], ...] = ()  # each period's start and what was spent in it


def budget_table(runs: Sequence[BudgetRun], period: str) -> str:
    """The sweep's replays, one a line; "over budget": how far a budgeted replay's costliest
    period went past its budget (blank when every period held)."""
    head = (
        f"{'budget':<24} {'a ' + period:>12} {'cost':>10} {'costliest':>10} {'mean wait':>10} {'p95 wait':>10} "
        f"{'max wait':>10} {'held':>7} {'over budget':>11}"  # held: passes
    )
    lines = [head, "-" * len(head)]
    for r in runs:
        amount = "none" if r.amount is None else f"{r.amount:.0f}"
        over = _over(r.costliest_period, r.amount)
        lines.append(
            f"{r.label:<24} {amount:>12} {r.cost:>10.0f} {r.costliest_period:>10.0f} {_h(r.wait_mean):>10} "
            f"{_h(r.wait_p95):>10} {_h(r.wait_max):>10} {r.held:>7} {over:>11}".rstrip()
        )
    return "\n".join(lines)


def _over(spent: float, amount: float | None) -> str:
    """``+N%`` when ``spent`` is past the budget ``amount``, else blank (as ``period_lines`` flags)."""
    if amount is None or spent <= amount * (1 + 1e-9):
        return ""
    return f"+{(spent / amount - 1) * 100:.0f}%"


def _h(seconds: float) -> str:
    return f"{seconds / 60:.1f}m" if seconds < 3 * 3600 else f"{seconds / 3600:.1f}h"


def budget_plot(runs: Sequence[BudgetRun], path: Path, title: str) -> None:
    """Cost and waits against the budget: bars of the cost (the budget's line on each), and the
    mean and p95 waits."""
    import matplotlib  # noqa: PLC0415 (matplotlib only when plotting)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    labels = [r.label for r in runs]
    xs = list(range(len(runs)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5))
    left.bar(xs, [r.costliest_period for r in runs], color="tab:blue", label="spent in the costliest period")
    for x, r in zip(xs, runs, strict=True):
        if r.amount is not None:
            left.hlines(r.amount, x - 0.4, x + 0.4, colors="tab:red", linestyles="--")
    left.plot([], [], "r--", label="the budget")
    left.set_xticks(xs, labels, rotation=15, fontsize=8)
    left.set_ylabel("cost in a period (price units)")
    left.legend(fontsize=8)
    left.grid(True, axis="y", alpha=0.3)
    right.plot(xs, [r.wait_mean / 3600 for r in runs], "o-", label="mean wait")
    right.plot(xs, [r.wait_p95 / 3600 for r in runs], "s-", label="p95 wait")
    right.set_xticks(xs, labels, rotation=15, fontsize=8)
    right.set_ylabel("hours")
    right.legend(fontsize=8)
    right.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- who spent it ------------------------------------------------------------------------------


def log_users(path: Path) -> dict[int, str]:
    """Each job's user in a replayed log, by the replay's job id: SWF's field 12 (a number, -1:
    not known), or Grid Engine's accounting file's owner."""
    users: dict[int, str] = {}
    lines = open_lines(path)
    first = ""
    for line in lines:
        if line.strip():
            first = line
            break
    if first.startswith("#") or (not first.startswith(";") and ":" in first):
        try:
            for rec in read_lines([first, *lines], str(path)):
                users[rec.job_number * 100_000 + rec.task_number] = rec.owner
        except AccountingError as err:
            raise SwfError(str(err)) from None
        return users
    for line in [first, *lines]:
        fields = line.split()
        if len(fields) > 11 and not line.lstrip().startswith(";"):
            try:
                job, user = int(fields[0]), int(float(fields[11]))
            except ValueError:
                continue
            users[job] = f"user{user}" if user >= 0 else ""
    return users


def replay_split(
    out: SimOutcome,
    jobs: Sequence[SimJob],
    by: By,
    *,
    billing: Billing,
    prices: Mapping[str, float],
    users: Mapping[int, str] | None = None,
) -> Attribution:
    """A replay's bill attributed (``elb.core.attribution``): its nodes' lives, the jobs where they
    ran (``out.placements``: a replay with ``record``), the warm pools' volumes apart."""
    found = [
        Life(
            n.name,
            n.group,
            n.launched_at,
            n.terminated_at,
            ((n.launched_at, "booting"), (n.ready_at, "idle")),
            n.slots or None,
            prices.get(n.group, 0.0),
        )
        for n in out.nodes
    ]
    known = {j.job_id for j in jobs}
    uses = [
        JobUse(str(p.job_id), node, p.start, p.end, float(used), (users or {}).get(p.job_id, ""))
        for p in out.placements
        if p.job_id in known
        for node, used in p.nodes
    ]
    since = min((n.launched_at for n in out.nodes), default=0.0)
    until = max(
        (n.launched_at + billed_seconds(n.terminated_at - n.launched_at, billing) for n in out.nodes), default=0
    )
    result = attribute((found, []), uses, by=by, since=since, until=until + 1.0, billing=billing)
    volumes = [Part(g if by == "group" else "", "volumes", 0.0, cost) for g, cost in out.pool_cost.items() if cost]
    billed = replace(result.billed, volume_money=sum(out.pool_cost.values()))
    return replace(result, parts=(*result.parts, *volumes), billed=billed)


def split_table(split: Attribution, label: str) -> str:
    """A replay's split: the jobs' parts, the cost of elasticity, the total beside the bill."""
    lines = [f"{label}: who spent it, by {split.by}", f"  {split.by:<22} {'jobs':>7} {'node-h':>10} {'cost':>10}"]
    for p in split.parts:
        name = p.key if p.kind == "jobs" else f"({p.kind}{' ' + p.key if p.key else ''})"
        lines.append(f"  {name[:22]:<22} {p.jobs or '':>7} {p.node_hours:>10.1f} {p.money:>10.2f}")
    b = split.billed
    lines.append(
        f"  {'total':<22} {'':>7} {split.node_seconds / 3600:>10.1f} {split.money:>10.2f}"
        f"  (billed: {b.node_seconds / 3600:.1f} node-h, {b.money + b.volume_money:.2f})"
    )
    return "\n".join(lines)


__all__: Sequence[str] = (
    "ANCHOR",
    "BudgetRun",
    "anchored",
    "budget_plot",
    "budget_table",
    "costliest_period",
    "log_users",
    "parse_budget",
    "period_lines",
    "period_spend",
    "replay_split",
    "split_table",
)
