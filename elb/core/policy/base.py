"""What every scaling policy is: an object with a pure ``decide``."""

from __future__ import annotations

from typing import Protocol

from elb.core.model import History, Plan
from elb.core.state import ClusterState


class Policy(Protocol):
    """A scaling policy. ``decide`` must be pure: no I/O, no clock; the time is the joined
    state's ``now``.

    The same object runs live (``elb run``), in ``elb once --dry-run`` and in ``elb simulate``.
    """

    @property
    def name(self) -> str: ...

    def decide(self, state: ClusterState, history: History) -> Plan: ...
