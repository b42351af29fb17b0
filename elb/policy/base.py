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
