"""What every scaling policy is: an object with a pure ``decide``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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


@runtime_checkable
class QuietHint(Protocol):
    """Optional for a policy: until when ``decide`` returns an empty plan for an unchanged
    cluster, so a simulator may skip the polls before it. A policy without it is asked at every
    poll."""

    def quiet_until(self, state: ClusterState, history: History) -> float: ...
