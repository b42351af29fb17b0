"""What every scaling policy is: an object with a pure ``decide``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from elb.model import History, Node, Plan, Snapshot


class Policy(Protocol):
    """A scaling policy. ``decide`` must be pure: no I/O, no clock; ``now`` is passed in.

    The same object runs live (``elb run``), in ``elb once --dry-run`` and in ``elb simulate``.
    """

    @property
    def name(self) -> str: ...

    def decide(self, snapshot: Snapshot, nodes: Sequence[Node], history: History, now: float) -> Plan: ...


def minutes(seconds: float) -> str:
    """Human duration for reasons: '45 s', '17 min', '2.5 h'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
