"""Back-off of launches after failed bring-ups, computed purely from the journal's events.

A bring-up is a node's way from ``requested`` to ``ready``. It fails when the node reaches
``failed``, or ``draining`` (its cleanup), first: a launch the cloud refused, an instance that
never ran, a provisioning play that failed or timed out. Failed bring-ups come in rounds: a launch of seven nodes whose
playbook fails makes seven failures at once. A failure counts as a new round only once the
wait the previous round set has passed; each round doubles the wait, from ``initial`` up to
``max``. A node that becomes ready ends the streak; so does the probe's instance running when
the last round was launches the cloud refused (no capacity, throttling): the cloud launching
again is all the probe had to show, and the batch need not wait for the probe's boot and play.

Each node group has its own streak (``by_group``): a group whose nodes never come up holds back
its own launches, not another group's.

While the streak lasts, launching waits until ``next_launch_at``, and then launches a single
node (a probe) rather than a whole batch, and no other while that probe is on its way, so with
provisioning failing for good elb launches a handful of nodes an hour, not one batch a pass.

The state survives a restart: it is rebuilt from the journal every pass.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from elb.core.frozen import quick_init
from elb.core.model import Event, NodeState

PROBE_NODES = 1  # nodes a launch round may start while backing off


class Cause(enum.StrEnum):
    LAUNCH = "launch"  # the cloud gave no running instance
    PROVISION = "provision"  # the instance ran, the node never became ready


@quick_init
@dataclass(frozen=True, slots=True)
class Backoff:
    """Where the back-off stands at one instant."""

    rounds: int = 0  # failed rounds in a row (0: no back-off)
    next_launch_at: float | None = None  # no launch before this
    cause: Cause | None = None  # of the last failed round
    last_failure: str = ""  # "node007: provisioning failed at ..." of the last failed round
    probing: bool = False  # a node requested after the wait is still on its way: no other launch

    def waiting(self, now: float) -> float:
        """Seconds launching must still wait at ``now`` (0: may launch)."""
        if self.next_launch_at is None:
            return 0.0
        return max(0.0, self.next_launch_at - now)

    @property
    def active(self) -> bool:
        return self.rounds > 0

    def cap(self, wanted: int, now: float) -> int:
        """How many of ``wanted`` new nodes may be launched at ``now``."""
        if not self.active:
            return wanted
        if self.waiting(now) > 0 or self.probing:
            return 0
        return min(wanted, PROBE_NODES)


def _cause(detail: str | None) -> Cause:
    text = (detail or "").removeprefix("cleanup: ")
    return Cause.LAUNCH if text.startswith(("launch failed", "no instance")) else Cause.PROVISION


class Tracker:
    """The back-off folded over bring-up events one at a time (``add``), for a producer that sees
    them as they happen (the simulator); ``compute`` folds a journal's events with it."""

    def __init__(self, *, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum
        self._bringing_up: dict[str, float] = {}  # node -> when it was requested
        self._state = Backoff()

    def add(self, e: Event) -> None:
        if e.state is NodeState.REQUESTED:
            self._bringing_up[e.node] = e.time
        elif e.state is NodeState.READY:
            if e.node in self._bringing_up:
                self._state = Backoff()  # a node became ready: launching works again
            self._bringing_up.pop(e.node, None)
        elif e.state is NodeState.RUNNING and self._answers_refusals(e.node):
            # the cloud launched the probe after refused launches: that was the question
            self._state = Backoff()
        elif e.state is NodeState.TERMINATED:
            # ended without becoming ready and without failing (a launch elb's stop cut short):
            # no failure, and no probe on its way
            self._bringing_up.pop(e.node, None)
        elif e.state in (NodeState.FAILED, NodeState.DRAINING) and e.node in self._bringing_up:
            # a node that never became ready is drained only by its cleanup
            del self._bringing_up[e.node]
            state = self._state
            if state.next_launch_at is not None and e.time < state.next_launch_at:
                return  # the same round (launched before the wait began)
            rounds = state.rounds + 1
            wait = min(self.initial * 2.0 ** min(rounds - 1, 64), self.maximum)
            self._state = Backoff(rounds, e.time + wait, _cause(e.detail), f"{e.node}: {e.detail or 'failed'}")

    def _answers_refusals(self, node: str) -> bool:
        """Whether ``node`` running ends the streak: the streak's last round was launches the
        cloud refused, and the node was requested after its wait (the probe, not a node of the
        refused round that ran anyway)."""
        state, asked = self._state, self._bringing_up.get(node)
        if state.cause is not Cause.LAUNCH or state.next_launch_at is None or asked is None:
            return False
        return asked >= state.next_launch_at

    @property
    def state(self) -> Backoff:
        """The back-off after the events added so far."""
        state = self._state
        if state.next_launch_at is not None:
            after = state.next_launch_at
            state = dataclasses.replace(state, probing=any(t >= after for t in self._bringing_up.values()))
        return state


@dataclass(frozen=True, slots=True)
class Backoffs:
    """The launch back-off of each node group: one group's failed bring-ups (a bad AMI, a launch
    template no instance boots from) hold back that group's launches only. ``default``: the
    back-off of a group with no entry (no bring-up of its own has failed: none)."""

    groups: tuple[tuple[str, Backoff], ...] = ()
    default: Backoff = Backoff()

    def of(self, group: str) -> Backoff:
        for name, b in self.groups:
            if name == group:
                return b
        return self.default

    @property
    def rounds(self) -> int:
        return max((b.rounds for _g, b in self.groups), default=self.default.rounds)

    @property
    def active(self) -> bool:
        return self.default.active or any(b.active for _g, b in self.groups)

    def waiting(self, now: float) -> float:
        """Seconds the longest-held group must still wait at ``now``."""
        return max((b.waiting(now) for _g, b in self.groups), default=self.default.waiting(now))

    def next_end(self, now: float) -> float | None:
        """The soonest instant after ``now`` at which a group's wait ends (None: none waits)."""
        ends = [b.next_launch_at for _g, b in self.groups if b.next_launch_at is not None and b.next_launch_at > now]
        if self.default.next_launch_at is not None and self.default.next_launch_at > now:
            ends.append(self.default.next_launch_at)
        return min(ends, default=None)


class GroupTrackers:
    """The back-off of each node group folded over bring-up events one at a time (``add``, with
    the event's node group), for a producer that sees them as they happen (the simulator)."""

    def __init__(self, *, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum
        self._trackers: dict[str, Tracker] = {}
        self._state: Backoffs | None = None  # ``state`` since the last event (None: to work out)

    def add(self, e: Event, group: str) -> None:
        self._state = None
        tracker = self._trackers.get(group)
        if tracker is None:
            tracker = self._trackers[group] = Tracker(initial=self.initial, maximum=self.maximum)
        tracker.add(e)

    @property
    def state(self) -> Backoffs:
        """Each group's back-off after the events added so far (only the groups backed off); the
        same value until the next event."""
        if self._state is None:
            found = ((g, t.state) for g, t in sorted(self._trackers.items()))
            self._state = Backoffs(groups=tuple((g, b) for g, b in found if b.active))
        return self._state


def by_group(events: Iterable[Event], group_of: Callable[[str], str], *, initial: float, maximum: float) -> Backoffs:
    """The back-off of each node group after ``events``, each event counted for the group of its
    node (``group_of``: a node's name -> its group)."""
    trackers = GroupTrackers(initial=initial, maximum=maximum)
    for e in events:
        trackers.add(e, group_of(e.node))
    return trackers.state


def compute(events: Iterable[Event], *, initial: float, maximum: float) -> Backoff:
    """The back-off after ``events`` (journal events in the order they were recorded)."""
    tracker = Tracker(initial=initial, maximum=maximum)
    for e in events:
        tracker.add(e)
    return tracker.state
