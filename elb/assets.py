"""Where the files elb ships beside its code are."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def systemd_unit() -> Path:
    """The shipped systemd unit."""
    return _ROOT / "systemd" / "elb.service"
