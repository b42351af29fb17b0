"""`elb plot` reads at a glance: its legends sit beside the panels (covering no data), a scale
event's line stands out, and the time axis reads as clock times at every span (never a bare
"30" for half a minute)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg

from elb.cli.plot import ADDED, stats_figure
from tests.unit.test_stats_plot import row

T0 = 1_800_000_000.0


def rows(span: float, step: float) -> list:  # type: ignore[type-arg]
    out = []
    n = int(span / step)
    for k in range(n):
        t = T0 + k * step
        out.append(
            row(
                t,
                running_jobs=3 + k % 4,
                pending_jobs=k % 3,
                nodes_ready=2,
                nodes_booting=k % 2,
                added=int(k == n // 3),
            )
        )
    return out


@pytest.mark.parametrize(("span", "step"), [(150.0, 5.0), (6 * 3600.0, 60.0), (9 * 86400.0, 3600.0)])
def test_the_legends_cover_no_data_and_the_ticks_read_as_times(span: float, step: float) -> None:
    fig = stats_figure(rows(span, step), "demo")
    FigureCanvasAgg(fig).draw()  # type: ignore[no-untyped-call]  # matplotlib's stubs leave draw untyped
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        box, panel = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert box.x0 >= panel.x1, (box, panel)  # beside the panel, not on it
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels() if t.get_text()]
    assert labels
    if span < 86400:
        assert all(re.fullmatch(r"\d{2}:\d{2}(:\d{2})?", text) for text in labels), labels


def test_a_scale_events_line_stands_out() -> None:
    fig = stats_figure(rows(150.0, 5.0), "demo")
    added = [line for line in fig.axes[1].get_lines() if line.get_color() == ADDED and len(line.get_xdata()) > 0]  # type: ignore[arg-type]
    assert added
    assert all(line.get_linewidth() >= 1.5 and (line.get_alpha() or 1.0) >= 0.85 for line in added)
