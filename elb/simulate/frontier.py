"""Each policy's frontier: what each p95 wait costs it, over its own knob; elb's against the peers'.

A replay is a point (p95 wait, cost). A policy's frontier is its points that no other point of
the same policy beats on both (a lower or equal p95 at a lower cost), in order of p95: the least a
wait costs with that policy, whichever knob value gives it. A replay whose queue never drains
(``Metrics.saturated``: jobs never start, or a backlog over a quarter of the replay) is shown but
is not on the frontier: its p95 counts only the jobs that started.

elb is "on or below" a peer's frontier at a peer's point when one of elb's replays has a p95 at
most the peer's and a cost at most the peer's; where elb has no replay that quick, or only dearer
ones, it is not, and ``compare`` says by how much.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elb.simulate.bound import Bound
from elb.simulate.report import Metrics, fmt_wait
from elb.simulate.sweep import RunSpec


@dataclass(frozen=True, slots=True)
class Point:
    policy: str
    knobs: str  # the swept values, "idle_factor=0.5 launch_delay=0"
    cost: float
    x_floor: float
    p95: float
    default: bool  # the policy's defaults
    drains: bool  # the queue drains: a point the frontier may take

    @classmethod
    def of(cls, spec: RunSpec, m: Metrics) -> Point:
        return cls(spec.policy, spec.knobs, m.cost, m.cost_over_floor, m.wait_p95, spec.default, not m.saturated)

    @property
    def name(self) -> str:
        return f"{self.policy} {self.knobs}".strip()

    def as_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "knobs": self.knobs,
            "cost": self.cost,
            "x_floor": self.x_floor,
            "p95": self.p95,
            "default": self.default,
            "drains": self.drains,
        }


def frontier(points: Sequence[Point]) -> list[Point]:
    """The points of one policy that no other beats on both p95 and cost, by p95 (see above)."""
    best = math.inf
    out: list[Point] = []
    for p in sorted((p for p in points if p.drains), key=lambda p: (p.p95, p.cost)):
        if p.cost < best:
            out.append(p)
            best = p.cost
    return out


def frontiers(points: Sequence[Point]) -> dict[str, list[Point]]:
    """Each policy's frontier, in the order the policies first come."""
    by: dict[str, list[Point]] = {}
    for p in points:
        by.setdefault(p.policy, []).append(p)
    return {name: frontier(ps) for name, ps in by.items()}


@dataclass(frozen=True, slots=True)
class Against:
    """elb's cheapest replay at most as slow as one point of a peer's frontier (``ours``), and
    at most ``slack`` seconds slower (``near``: a poll, the granularity of elb's decisions)."""

    peer: Point
    ours: Point | None  # None: no replay of elb's is that quick (and drains)
    near: Point | None
    slack: float
    quickest: Point | None  # elb's quickest point on its frontier, for the message

    @property
    def below(self) -> bool:
        return self.ours is not None and self.ours.cost <= self.peer.cost

    @property
    def below_near(self) -> bool:
        return self.near is not None and self.near.cost <= self.peer.cost

    def as_dict(self) -> dict[str, object]:
        return {
            "peer": self.peer.as_dict(),
            "elb": None if self.ours is None else self.ours.as_dict(),
            "on_or_below": self.below,
            "slack": self.slack,
            "elb_within_slack": None if self.near is None else self.near.as_dict(),
            "on_or_below_within_slack": self.below_near,
        }

    def _elb(self, p: Point | None, ok: bool) -> str:
        if p is None:
            least = f" (its quickest {fmt_wait(self.quickest.p95)})" if self.quickest is not None else ""
            return f"no elb replay this quick{least}: NOT on or below"
        change = (p.cost / self.peer.cost - 1) * 100 if self.peer.cost else 0.0
        return f"elb {p.knobs or '(defaults)'} p95 {fmt_wait(p.p95)} cost {p.cost:.0f} ({change:+.1f}%): " + (
            "on or below" if ok else "NOT on or below"
        )

    def describe(self) -> str:
        head = f"{self.peer.name} (p95 {fmt_wait(self.peer.p95)}, cost {self.peer.cost:.0f})"
        text = f"{head}: {self._elb(self.ours, self.below)}"
        if self.slack > 0 and self.near is not self.ours:
            text += f"; within {fmt_wait(self.slack)}: {self._elb(self.near, self.below_near)}"
        return text


def _cheapest(points: Sequence[Point], p95: float) -> Point | None:
    quick = [p for p in points if p.p95 <= p95]
    return min(quick, key=lambda p: (p.cost, p.p95)) if quick else None


def compare(fronts: dict[str, list[Point]], ours: str = "elb", slack: float = 0.0) -> list[Against]:
    """elb against every point of every other policy's frontier (see the module's description);
    ``slack``: also elb's cheapest replay at most this much slower than each point."""
    mine = fronts.get(ours)
    if mine is None:
        return []
    out: list[Against] = []
    for name, front in fronts.items():
        if name == ours:
            continue
        for peer in front:
            out.append(
                Against(
                    peer, _cheapest(mine, peer.p95), _cheapest(mine, peer.p95 + slack), slack, mine[0] if mine else None
                )
            )
    return out


def table(
    points: Sequence[Point], fronts: dict[str, list[Point]], bound: Bound | None = None, slack: float = 0.0
) -> str:
    """The points by policy and p95, those on the frontier marked, then elb against the peers."""
    on = {id(p) for front in fronts.values() for p in front}
    width = max([len(p.knobs) for p in points] + [5])
    head = f"{'policy':<16} {'knob':<{width}} {'cost':>9} {'x floor':>7} {'p95':>7}  frontier"
    lines = [
        "frontiers: cost against p95 wait over each policy's own knob "
        "(* the policy's defaults; never drains: not on a frontier)",
        head,
        "-" * len(head),
    ]
    for p in sorted(points, key=lambda p: (list(fronts).index(p.policy) if p.policy in fronts else 0, p.p95, p.cost)):
        mark = "yes" if id(p) in on else ("never drains" if not p.drains else "")
        knob = (p.knobs or "(defaults)") + ("*" if p.default else "")
        lines.append(f"{p.policy:<16} {knob:<{width}} {p.cost:>9.0f} {p.x_floor:>7.2f} {fmt_wait(p.p95):>7}  {mark}")
    if bound is not None:
        lines.append(
            f"{'clairvoyant':<16} {'(bound)':<{width}} {bound.cost:>9.0f} {bound.cost_over_floor:>7.2f} "
            f"{fmt_wait(bound.wait_p95):>7}"
        )
    against = compare(fronts, slack=slack)
    if against:
        lines.append("")
        lines.append("elb against each peer's frontier (elb's cheapest replay with a p95 at most the peer's):")
        lines.extend(f"  {a.describe()}" for a in against)
        lines.append("  " + verdict(against))
    if bound is not None:
        lines.append("")
        lines.append(bound_line(points, bound))
    return "\n".join(lines)


def verdict(against: Sequence[Against]) -> str:
    """One line: is elb on or below every peer's frontier, and within the slack?"""
    missed = sum(1 for a in against if not a.below)
    text = (
        "elb is on or below every peer's frontier at every p95 they reach"
        if not missed
        else f"elb is NOT on or below at {missed} of {len(against)} peer points"
    )
    if against and against[0].slack > 0:
        near = sum(1 for a in against if not a.below_near)
        text += f"; within {fmt_wait(against[0].slack)} of their p95: " + (
            "on or below at every one" if not near else f"NOT on or below at {near}"
        )
    return text


def bound_line(points: Sequence[Point], bound: Bound) -> str:
    """How far elb's defaults (and its cheapest draining replay) are from the clairvoyant bound."""
    text = (
        f"clairvoyant bound: cost {bound.cost:.0f} ({bound.cost_over_floor:.2f}x floor) at p95 "
        f"{fmt_wait(bound.wait_p95)}"
    )
    default = next((p for p in points if p.policy == "elb" and p.default), None)
    if default is not None:
        text += f"; elb's defaults {(default.cost / bound.cost - 1) * 100:+.1f}% above it (p95 {fmt_wait(default.p95)})"
    cheapest = min((p for p in points if p.policy == "elb" and p.drains), key=lambda p: p.cost, default=None)
    if cheapest is not None and cheapest is not default:
        text += (
            f", elb's cheapest ({cheapest.knobs}) {(cheapest.cost / bound.cost - 1) * 100:+.1f}% "
            f"(p95 {fmt_wait(cheapest.p95)})"
        )
    return text


_COLOURS = {"elb": "C0", "starcluster": "C1", "parallelcluster": "C2", "slurm": "C3", "static": "C4"}


def plot(points: Sequence[Point], path: Path, title: str, bound: Bound | None = None) -> None:
    """Cost (x floor) against p95 wait (minutes) over the waits of the replays whose queue drains:
    every replay a small dot, each policy's frontier a line (a step: the least cost at each wait),
    its defaults a star, the clairvoyant bound a black diamond. A point off that range (the bound's
    p95, usually 0; a queue that never drains, drawn as an x) sits at the edge with its p95 written
    beside it."""
    import matplotlib  # noqa: PLC0415 (matplotlib only when plotting)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    drained = [p.p95 / 60 for p in points if p.drains] or [p.p95 / 60 for p in points] or [0.0]
    pad = max(0.25, 0.08 * (max(drained) - min(drained)))
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    axes = _Axes(ax, min(drained) - pad, max(drained) + pad, pad)
    for name, front in frontiers(points).items():
        _draw_policy(axes, name, front, [p for p in points if p.policy == name])
    if bound is not None:
        axes.edge(bound.wait_p95, bound.cost_over_floor, "black", "D", "bound: ")
        ax.plot([], [], "D", color="black", label="clairvoyant bound")
    ax.set_xlim(axes.lo, axes.hi)
    ax.set_xlabel("p95 wait (minutes)")
    ax.set_ylabel("cost / cost floor")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.25)
    ax.plot([], [], "*", color="grey", markersize=12, markeredgecolor="black", label="default")
    if any(not p.drains for p in points):
        ax.plot([], [], "x", color="grey", label="queue never drains")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


@dataclass(frozen=True, slots=True)
class _Axes:
    """The plot's axes and its range of waits (minutes): ``lo`` to ``hi``, ``pad`` of it a margin."""

    ax: Any
    lo: float
    hi: float
    pad: float

    def x(self, minutes: float) -> float:
        """A wait as drawn: kept inside the range, off its edges by a third of the margin."""
        return min(max(minutes, self.lo + self.pad / 3), self.hi - self.pad / 3)

    def edge(self, p95: float, y: float, colour: str | None, marker: str, label: str) -> None:
        """A point at its wait; one clamped to an edge has its p95 written beside it."""
        at = self.x(p95 / 60)
        self.ax.plot(at, y, marker, color=colour, ms=9, markeredgecolor="black" if marker == "D" else None)
        if at != p95 / 60:
            right = p95 / 60 > at  # clamped at the right edge: the text goes left, into the axes
            self.ax.annotate(
                f"{label}p95 {fmt_wait(p95)}",
                (at, y),
                fontsize=7,
                xytext=(-6 if right else 6, 4),
                textcoords="offset points",
                ha="right" if right else "left",
            )


def _draw_policy(axes: _Axes, name: str, front: Sequence[Point], mine: Sequence[Point]) -> None:
    """One policy's replays (dots), its frontier (a step line), its defaults (a star) and the
    replays whose queue never drains (an x at the edge)."""
    ax, x, colour = axes.ax, axes.x, _COLOURS.get(name)
    ax.plot([x(p.p95 / 60) for p in mine if p.drains], [p.x_floor for p in mine if p.drains], ".", color=colour,
            alpha=0.35)  # fmt: skip
    ax.plot([x(p.p95 / 60) for p in front], [p.x_floor for p in front], "o-", color=colour, label=name,
            drawstyle="steps-post")  # fmt: skip
    for p in mine:
        if not p.drains:
            axes.edge(p.p95, p.x_floor, colour, "x", f"{name}{' (default)' if p.default else ''}: ")
        elif p.default:
            ax.plot(x(p.p95 / 60), p.x_floor, "*", color=colour, markersize=15, markeredgecolor="black")


__all__ = ("Against", "Point", "bound_line", "compare", "frontier", "frontiers", "plot", "table", "verdict")
