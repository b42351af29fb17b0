"""A budget: at most an amount of US dollars a day, week or month (``policy.budget``), and the
pure rule that paces the launches so that every period holds it, not only the first.

The rule (``pace``) reads the money billed so far in the period (``Spend.spent``: the journal's
nodes at their groups' ``price_per_hour`` by EC2's billing rule, the warm pools' volumes too;
``elb.core.spend.period_spend``), the rate the cluster spends at now (``Spend.per_hour``: the nodes up
at their prices, the stopped nodes' volumes) and ``now``. Its projection assumes that whatever
runs now runs to the period's end: ``projected = spent + per_hour x hours left``. A launch adds
its group's price for the hours left (a restart from a warm pool its price less the volumes
already counted).

What runs at the period's end does not stop there: elb stops no busy node, and while jobs wait
(the only time a launch is wanted) a job the scheduler starts takes the node the last one freed,
so a node up at midnight is busy into the next period for as long as the queue lasts. The rule
therefore counts what a node commits into the next period plainly: **a node up at the period's
end is paid for the whole next period** (``committed = per_hour x the next period's hours``,
the launch's price for as long), and the next period's amount must pay for it. Not the job's
end (its ``h_rt``): the jobs that wait behind it take the node on, and those that have not
arrived yet are not in any pass's demand (a steady queue of day-long jobs at half what it needs,
priced to the period's end only, held day 1 and paid 178% of the amount every day after; the
launches' job ends would have held nothing either: docs/results/budget-holds.md).

So a launch goes only if the projection with it stays within the amount *and* the next period's
committed money with it stays within the next period's amount; the launches the pass wants go in
the pass's order while both hold, and the first that does not fit and every one after it are
held. Nothing else is touched: no removal, no kill; a held launch is asked for again at the next
pass, and both figures fall as idle nodes go. Since the projection never grows without a launch
(every second billed was in it), a period's spend stays within the amount, unless what runs at
its start, run to its end, costs more: and what runs at a period's start was paid for by that
period's amount when it was launched (the committed check), so that happens only when the
amount is below what must run anyway (``min_nodes``, a budget lowered, a cluster that was over
it before the budget was set): then nothing is launched until enough of it goes.

With a ``horizon`` (a burst may spend what quiet times left) the committed check is not made:
that mode is no bound (see ``reach``).

Periods start at midnight (a week on Monday, a month on its first day) at ``utc_offset`` from
UTC. Pure: time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from elb.core.durations import PositiveSeconds, minutes

Period = Literal["day", "week", "month"]
Money = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
_EPS = 1e-9  # money: a launch that brings the projection to the amount exactly is allowed


class Budget(BaseModel):
    """``policy.budget``: at most ``amount`` US dollars each ``period`` (starting at midnight at
    ``utc_offset``, a week on Monday, a month on its first day)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    amount: Money
    period: Period = "month"
    utc_offset: str = Field("+00:00", pattern=r"^[+-]\d{2}:\d{2}$")
    # None: the projection runs what runs now to the period's end, against the whole amount, and
    # what runs at the end is paid for the whole next period against its amount (every period
    # holds, see the module's docstring). A time: it looks this far ahead only, against the amount's share
    # accrued by then (a burst may spend what quiet times left; no longer a bound at the end).
    horizon: PositiveSeconds | None = None

    @field_validator("utc_offset")
    @classmethod
    def _offset(cls, text: str) -> str:
        hours, minutes = int(text[1:3]), int(text[4:6])
        if minutes >= 60 or hours * 60 + minutes > 14 * 60:
            raise ValueError(f"{text!r} is not an offset from UTC (-14:00 to +14:00)")
        return text

    @property
    def tz(self) -> timezone:
        sign = -1 if self.utc_offset.startswith("-") else 1
        return timezone(sign * timedelta(hours=int(self.utc_offset[1:3]), minutes=int(self.utc_offset[4:6])))


def period_bounds(budget: Budget, now: float) -> tuple[float, float]:
    """The start and the end (POSIX seconds) of the budget's period that holds ``now``."""
    local = datetime.fromtimestamp(now, tz=budget.tz)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if budget.period == "day":
        start, end = day, day + timedelta(days=1)
    elif budget.period == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    else:
        start = day.replace(day=1)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start.timestamp(), end.timestamp()


def when(budget: Budget, t: float) -> str:
    """``t`` as the budget's clock shows it: ``2026-12-01 00:00 +00:00``."""
    return datetime.fromtimestamp(t, tz=budget.tz).strftime("%Y-%m-%d %H:%M ") + budget.utc_offset


@dataclass(frozen=True, slots=True)
class Spend:
    """What the period has cost so far and the rate the cluster spends at now (US dollars)."""

    spent: float  # billed in the period so far: the nodes' compute and the warm pools' volumes
    per_hour: float  # the nodes up now at their prices, and the stopped nodes' volumes


@dataclass(frozen=True, slots=True)
class Launch:
    """A launch the pass wants: a node's name and what it adds to the rate (US dollars an hour)."""

    name: str
    per_hour: float


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """The budget's verdict on one pass's launches, with the figures it read."""

    amount: float
    period: Period
    start: float
    end: float
    spent: float
    per_hour: float
    projected: float  # spent + per_hour x hours left: what runs now, run to the period's end
    allowed: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    after: float = 0.0  # the projection with the allowed launches
    next_cost: float | None = None  # what the first held launch would have added
    utc_offset: str = "+00:00"
    restarts_held: int = 0  # of ``held``: restarts from a warm pool (the rest are launches)
    horizon: float | None = None  # the check looked this far ahead (None: to the period's end)
    limit: float = 0.0  # the most it let the period spend by then
    too_wide: int = 0  # waiting jobs wider than the budget lets their group have: not demand
    committed: float = 0.0  # the next period's money committed by what runs now (per_hour x its hours)
    next_after: float = 0.0  # that with the allowed launches
    next_limit: float | None = None  # the next period's amount (None: no committed check, a horizon)
    held_for_next: bool = False  # the first held launch fit this period, not what the next can pay

    @property
    def holding(self) -> bool:
        return bool(self.held)

    @property
    def reason(self) -> str:
        """Why the launches are held (empty when none is)."""
        if not self.held:
            return ""
        wanted = len(self.allowed) + len(self.held)
        until = "to the period's end" if self.horizon is None else f"over the next {minutes(self.horizon)}"
        cost = f"; the next adds {self.next_cost:.2f} {until}" if self.next_cost is not None else ""
        paced = "" if self.horizon is None else f" (paced {minutes(self.horizon)} ahead: {self.limit:.2f} by then)"
        if self.held_for_next and self.next_limit is not None:
            cost = (
                f"; the next {self.period} pays {self.next_after:.2f} of {self.next_limit:.2f} for what runs at "
                f"its start, the next launch would add {self.next_cost or 0.0:.2f} more"
            )
        return (
            f"budget: holding {len(self.held)} of {wanted} launch(es): {self.spent:.2f} of {self.amount:.2f} "
            f"US dollars spent this {self.period}, {self.projected:.2f} projected at {self.per_hour:.2f}/h"
            f"{paced}{cost}"
        )

    def describe(self) -> str:
        """One line for the dry run and the pass's plan."""
        head = (
            f"budget: {self.spent:.2f} of {self.amount:.2f} US dollars spent this {self.period} "
            f"(to {_when(self.end, self.utc_offset)}), {self.projected:.2f} projected at {self.per_hour:.2f}/h"
        )
        wide = f"; {self.too_wide} job(s) wider than the budget lets their group have wait" if self.too_wide else ""
        if self.held:
            return f"{head}: holding {len(self.held)} launch(es) ({', '.join(self.held)}){wide}"
        if self.allowed:
            return f"{head}: {len(self.allowed)} launch(es) within it ({self.after:.2f} projected with them){wide}"
        return f"{head}: no launch held{wide}"

    def as_json(self) -> dict[str, object]:
        return {
            "amount": self.amount,
            "period": self.period,
            "start": self.start,
            "end": self.end,
            "spent": self.spent,
            "per_hour": self.per_hour,
            "projected": self.projected,
            "holding": self.holding,
            "allowed": list(self.allowed),
            "held": list(self.held),
            "too_wide": self.too_wide,
            "reason": self.reason,
        }


def _when(t: float, offset: str) -> str:
    return when(Budget(amount=1.0, utc_offset=offset), t)


def reach(budget: Budget, now: float) -> tuple[float, float]:
    """How far the check looks ahead (hours) and the most it may have spent by then: to the
    period's end and the whole amount; with a ``horizon`` shorter than what is left, that far and
    the amount's share accrued by then (the period's elapsed share, the horizon's included)."""
    start, end = period_bounds(budget, now)
    left = max(0.0, end - now)
    if budget.horizon is None or budget.horizon >= left:
        return left / 3600.0, budget.amount
    return budget.horizon / 3600.0, budget.amount * (now + budget.horizon - start) / (end - start)


def carried_hours(budget: Budget, now: float) -> float | None:
    """The hours of the period after ``now``'s: what a node up at this period's end is paid for
    in it (elb stops no busy node, and waiting jobs keep it busy); None with a horizon (no
    committed check: that mode is no bound)."""
    if budget.horizon is not None:
        return None
    _, end = period_bounds(budget, now)
    after, following = period_bounds(budget, end)
    return (following - after) / 3600.0


def pace(budget: Budget, spend: Spend, launches: Sequence[Launch], now: float) -> BudgetCheck:
    """Which of ``launches`` (in order) the pass may start without the projection (``reach``:
    to the period's end unless a horizon is set) passing the amount (its share accrued by the
    horizon's end), nor (without a horizon) the next period's committed money (``carried_hours``:
    what runs at this period's end, paid for the whole next period) passing the next period's
    amount; the first that does not fit and every one after it are held (a wide job's nodes are
    launched together or not at all, as the back-off cuts them)."""
    start, end = period_bounds(budget, now)
    projected = spend.spent + spend.per_hour * max(0.0, end - now) / 3600.0
    hours, limit = reach(budget, now)
    total = spend.spent + spend.per_hour * hours
    carried = carried_hours(budget, now)
    committed = spend.per_hour * (carried or 0.0)
    next_total = committed
    allowed: list[str] = []
    held: list[str] = []
    next_cost = None
    held_for_next = False
    for launch in launches:
        rate = max(0.0, launch.per_hour)
        cost = rate * hours
        carry = rate * (carried or 0.0)
        fits = total + cost <= limit + _EPS
        fits_next = carried is None or next_total + carry <= budget.amount + _EPS
        if not held and fits and fits_next:
            total += cost
            next_total += carry
            allowed.append(launch.name)
        else:
            if not held:
                held_for_next = fits
                next_cost = carry if fits else cost
            held.append(launch.name)
    return BudgetCheck(
        amount=budget.amount,
        period=budget.period,
        start=start,
        end=end,
        spent=spend.spent,
        per_hour=spend.per_hour,
        projected=projected,
        allowed=tuple(allowed),
        held=tuple(held),
        after=total,
        next_cost=next_cost,
        utc_offset=budget.utc_offset,
        horizon=budget.horizon if budget.horizon is not None and budget.horizon < end - now else None,
        limit=limit,
        committed=committed,
        next_after=next_total,
        next_limit=None if carried is None else budget.amount,
        held_for_next=held_for_next,
    )


def room(budget: Budget, spend: Spend, prices: Mapping[str, float], now: float) -> dict[str, int]:
    """How many more nodes of each group (alone) the budget allows now: the headroom of the
    projection (``reach``) over a node's price for as long, and (``carried_hours``) of the next
    period's amount over what runs now and a node's price for the whole next period (``elb status``)."""
    hours, limit = reach(budget, now)
    headroom = limit - (spend.spent + spend.per_hour * hours)
    carried = carried_hours(budget, now)
    next_room = None if carried is None else budget.amount - spend.per_hour * carried
    out: dict[str, int] = {}
    for group, price in prices.items():
        cost = price * hours
        if headroom < -_EPS:
            out[group] = 0
        elif cost <= 0:
            out[group] = 10**9  # no time left in the period: nothing more is billed in it
        else:
            out[group] = max(0, math.floor((headroom + _EPS) / cost))
        if next_room is not None and carried is not None and price > 0:
            out[group] = min(out[group], max(0, math.floor((next_room + _EPS) / (price * carried))))
    return out


def status_lines(budget: Budget, spend: Spend, prices: Mapping[str, float], now: float) -> list[str]:
    """``elb status``'s lines: the spend so far, the projection, and whether the budget holds
    launches back now (no room for one more node of the cheapest group)."""
    check = pace(budget, spend, (), now)
    lines = [
        f"budget: {check.spent:.2f} of {check.amount:.2f} US dollars spent this {check.period} "
        f"(since {when(budget, check.start)}), {check.projected:.2f} projected to {when(budget, check.end)} "
        f"at {check.per_hour:.2f}/h now"
    ]
    more = room(budget, spend, prices, now)
    if more and all(n == 0 for n in more.values()):
        lines.append("budget: HOLDING launches: one more node of any group would pass the amount")
    elif more:
        lines.append(
            "budget: not holding launches; room for "
            + ", ".join(f"{'many' if n >= 10**9 else n} more node(s) of group {g}" for g, n in more.items())
        )
    return lines


def holding_now(budget: Budget, spend: Spend, prices: Mapping[str, float], now: float) -> bool:
    """Whether the budget holds any launch now (``elb_budget_holding``): no group has room for one more node."""
    more = room(budget, spend, prices, now)
    return bool(more) and all(n == 0 for n in more.values())


__all__: Sequence[str] = (
    "Budget",
    "BudgetCheck",
    "Launch",
    "Period",
    "Spend",
    "carried_hours",
    "holding_now",
    "pace",
    "period_bounds",
    "reach",
    "room",
    "status_lines",
    "when",
)
