"""Optional dependencies (pyproject's extras): whether one is installed, and how to get it."""

from __future__ import annotations

import importlib.util


def plot_missing() -> str | None:
    """Why elb cannot draw plots here (None: it can). Plotting is the extra ``elb[plot]``."""
    if importlib.util.find_spec("matplotlib") is not None:
        return None
    return "plotting needs matplotlib, which elb installs only with its plot extra: pip install 'elb[plot]'"
