"""Nodes kept on their own word, held out of the drain for a while.

A node the scheduler showed busy and now shows idle is asked itself before it goes
(``planner.witness_verdict``); one that says it runs job processes is kept, enabled again. Left
at that, every pass that plans its removal again would disable it, find it busy and enable it
again: the node flaps in the scheduler, and a job the scheduler would place there meanwhile
waits. So a node kept on its own word is held: no pass drains it again (it stays enabled, kept,
said and counted failed each pass) until the scheduler's view of it changes (a read shows a job
or a reservation on it: its ``last_busy_at`` moves) or ``WITNESS_HOLD`` seconds have passed,
whichever comes first; it is then asked again. The holds live in the daemon's memory: a
restart asks again at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from elb.core.durations import minutes
from elb.core.model import Node

WITNESS_HOLD = 30 * 60.0  # seconds a node kept on its own word is not drained again


@dataclass(frozen=True, slots=True)
class _Hold:
    kept_at: float
    busy_at: float | None  # the node's last_busy_at when it was kept
    why: str


class WitnessHolds:
    """The nodes kept on their own word, each with when, why and the scheduler's view then.
    Shared by a pass and the removals it runs in the background: guarded by a lock."""

    def __init__(self, hold: float = WITNESS_HOLD) -> None:
        self.hold = hold
        self._held: dict[str, _Hold] = {}
        self._lock = threading.Lock()

    def keep(self, node: Node, why: str, now: float) -> None:
        """``node`` was kept at ``now`` because it says it runs job processes (``why``)."""
        with self._lock:
            self._held[node.name] = _Hold(now, node.last_busy_at, why)

    def held(self, node: Node, now: float) -> str | None:
        """Why ``node`` (its record as the journal has it now) is not drained this pass, or None
        when it is not held: never kept, its hold over, or the scheduler's view of it changed."""
        with self._lock:
            h = self._held.get(node.name)
            if h is None:
                return None
            if node.last_busy_at != h.busy_at or not h.kept_at <= now < h.kept_at + self.hold:
                del self._held[node.name]
                return None
        left = h.kept_at + self.hold - now
        return f"{h.why}; not drained again for {minutes(left)} unless the scheduler shows it busy again"


__all__: Sequence[str] = ("WITNESS_HOLD", "WitnessHolds")
