"""``elb plot``: jobs and nodes over time from the stats file, scale events marked.

Two panels, each a stack that adds up to the whole: jobs running, waiting, held and in error;
nodes ready, booting and draining. A marker sits where an action finished (the end of the
pass that added or removed nodes), so it lines up with the step it caused. A long stats file
is read for a window only and resampled to at most ``MAX_POINTS`` points, so a year plots in
seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from elb.service.stats import StatsRow, read_all, resample, time_span

MAX_POINTS = 2000


def _stack(ax: Axes, t: Sequence[datetime], layers: Sequence[tuple[str, str, Sequence[int]]]) -> None:
    x = mdates.date2num(t)  # type: ignore[no-untyped-call]
    base = [0] * len(t)
    for label, color, values in layers:
        top = [b + v for b, v in zip(base, values, strict=True)]
        ax.fill_between(x, base, top, step="post", color=color, alpha=0.7, linewidth=0, label=label)
        base = top
    ax.step(x, base, where="post", color="black", linewidth=0.8)
    ax.xaxis_date()
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    _legend_beside(ax)


def _legend_beside(ax: Axes) -> None:
    """The panel's legend to the right of it, where it covers no data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")


# Tick labels at each level a span may need (years .. seconds): a clock time whole at every
# level below a day, never a bare "30" for half a minute.
_FORMATS = ["%Y", "%b", "%d", "%H:%M", "%H:%M", "%H:%M:%S"]
_ZERO_FORMATS = ["", "%Y", "%b", "%b-%d", "%H:%M", "%H:%M:%S"]
_OFFSET_FORMATS = ["", "%Y", "%Y-%b", "%Y-%b-%d", "%Y-%b-%d", "%Y-%b-%d"]
ADDED, REMOVED = "darkgreen", "firebrick"  # the scale events' lines: strong against the stacks' fills


def plot_stats(rows: Sequence[StatsRow], out: Path, title: str = "elb") -> None:
    """Draw the rows into a PNG at ``out``. Raises ValueError with no rows."""
    fig = stats_figure(rows, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)


def stats_figure(rows: Sequence[StatsRow], title: str = "elb") -> Figure:
    """The two panels of ``rows``. Raises ValueError with no rows."""
    if not rows:
        raise ValueError("no stats rows to plot")
    t = [datetime.fromtimestamp(r.time).astimezone() for r in rows]
    fig = Figure(figsize=(10, 6.5), layout="constrained")  # no pyplot: no global state, no display
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    _stack(
        ax1,
        t,
        [
            ("running", "tab:blue", [r.running_jobs for r in rows]),
            ("waiting", "tab:orange", [r.pending_jobs for r in rows]),
            ("held", "tab:gray", [r.held_jobs for r in rows]),
            ("in error", "tab:red", [r.error_jobs for r in rows]),
        ],
    )
    ax1.set_ylabel("jobs")
    ax1.set_title(title)
    _stack(
        ax2,
        t,
        [
            ("ready", "tab:green", [r.nodes_ready for r in rows]),
            ("booting", "yellowgreen", [r.nodes_booting for r in rows]),
            ("draining", "tab:purple", [r.nodes_draining for r in rows]),
        ],
    )
    ax2.set_ylabel("nodes")
    for r in rows:
        done = datetime.fromtimestamp(r.done_at).astimezone()
        if r.added:
            ax2.axvline(done, color=ADDED, alpha=0.9, linestyle="--", linewidth=1.6)
        if r.removed:
            ax2.axvline(done, color=REMOVED, alpha=0.9, linestyle=":", linewidth=1.8)
    failed = [when for when, r in zip(t, rows, strict=True) if not r.ok]
    if failed:
        ax2.plot(failed, [0] * len(failed), "kx", markersize=5, label="failed pass", clip_on=False)
    ax2.plot([], [], color=ADDED, linestyle="--", linewidth=1.6, label="nodes added")
    ax2.plot([], [], color=REMOVED, linestyle=":", linewidth=1.8, label="nodes removed")
    _legend_beside(ax2)
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax2.xaxis.set_major_locator(locator)
    ax2.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(  # type: ignore[no-untyped-call]
            locator, formats=_FORMATS, zero_formats=_ZERO_FORMATS, offset_formats=_OFFSET_FORMATS
        )
    )
    ax2.set_xlabel(f"time ({t[0].strftime('%Z') or t[0].strftime('UTC%z')})")
    return fig


def plot_file(
    path: Path, out: Path, *, title: str, since: float = -math.inf, until: float = math.inf, points: int = MAX_POINTS
) -> int:
    """Plot the stats file (and its rotated predecessors) for [since, until]; returns the number
    of points drawn. Raises ValueError when the window holds no row."""
    span = time_span(path, since=since, until=until)
    if span is None:
        raise ValueError(f"no stats rows in {path} for the window asked")
    rows = resample(read_all(path, since=since, until=until), points, *span)
    plot_stats(rows, out, title=title)
    return len(rows)
