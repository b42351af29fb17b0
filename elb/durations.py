"""Durations in the plain words elb's reasons and reports use."""

from __future__ import annotations


def minutes(seconds: float) -> str:
    """Human duration for reasons: '45 s', '17 min', '2.5 h'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
