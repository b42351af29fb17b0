"""``elb plot``: waiting jobs, running jobs and nodes over time from the stats file, scale events marked."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import matplotlib.dates as mdates
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from elb.stats import StatsRow


def plot_stats(rows: Sequence[StatsRow], out: Path, title: str = "elb") -> None:
    """Draw the rows into a PNG at ``out``. Raises ValueError with no rows."""
    if not rows:
        raise ValueError("no stats rows to plot")
    t = [datetime.fromtimestamp(r.time).astimezone() for r in rows]
    fig = Figure(figsize=(10, 6), layout="constrained")  # no pyplot: no global state, no display
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    ax1.step(t, [r.pending_jobs for r in rows], where="post", label="waiting jobs", color="tab:orange")
    ax1.step(t, [r.running_jobs for r in rows], where="post", label="running jobs", color="tab:blue")
    ax1.set_ylabel("jobs")
    ax1.legend(loc="upper left")
    ax1.set_title(title)
    nodes = [r.nodes_ready + r.nodes_booting + r.nodes_draining for r in rows]
    ax2.step(t, nodes, where="post", label="nodes (all states)", color="tab:green")
    ax2.step(t, [r.nodes_ready for r in rows], where="post", label="nodes ready", color="tab:olive")
    for when, r in zip(t, rows, strict=True):
        if r.added:
            ax2.axvline(when, color="tab:green", alpha=0.4, linestyle="--")
        if r.removed:
            ax2.axvline(when, color="tab:red", alpha=0.4, linestyle=":")
        if not r.ok:
            ax2.axvline(when, color="black", alpha=0.3, linewidth=0.5)
    ax2.plot([], [], color="tab:green", linestyle="--", label="node added")
    ax2.plot([], [], color="tab:red", linestyle=":", label="node removed")
    ax2.set_ylabel("nodes")
    ax1.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.legend(loc="upper left")
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax2.xaxis.set_major_locator(locator)
    ax2.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
