"""Back-off of launches after failed bring-ups, computed purely from the journal's events.

A bring-up is a node's way from ``requested`` to ``ready``. It fails when the node reaches
``failed``, or ``draining`` (its cleanup), first: a launch the cloud refused, an instance that
never ran, a provisioning play that failed or timed out. Failed bring-ups come in rounds: a launch of seven nodes whose
playbook fails makes seven failures at once. A failure counts as a new round only once the
wait the previous round set has passed; each round doubles the wait, from ``initial`` up to
``max``. A node that becomes ready ends the streak; so does the probe's instance running when
the last round was launches the cloud refused (no capacity): the cloud launching
again is all the probe had to show, and the batch need not wait for the probe's boot and play.
Such a round (``Cause.LAUNCH``) costs no money, only an API call, while a capacity shortage
can end at any moment: its wait stops doubling at ``REFUSED_MAX_FACTOR`` (4) times ``initial``
(the daemon's default: 4 minutes), not at ``max``, so a probe finds capacity back within minutes.

Each node group has its own streak (``by_group``): a group whose nodes never come up holds back
its own launches, not another group's.

A node whose play failed (or that never became ready) after its instance ran, while another node
of its group became ready after it was requested, failed for its own reasons: the group's image,
play and cloud worked at the same time. Such a failure starts no round and is replaced at once.
Each node that became ready excuses one such failure at most, so a group that fails more often
than it works still backs off, and a forgiven failure never costs more launches than the group's
good ones.

While the streak lasts, launching waits until ``next_launch_at``, and then launches a single
node (a probe) rather than a whole batch, and no other while that probe is on its way, so with
provisioning failing for good elb launches a handful of nodes an hour, not one batch a pass.

A launch the cloud refused for the account's API request rate (EC2's ``RequestLimitExceeded``,
``Throttling``, still so after botocore's retries; the event's ``Cause.THROTTLED``) is no round:
it says nothing of the group's capacity or its nodes, and every group shares the account's rate.
It pauses the group's launches instead, ``THROTTLE_INITIAL`` (5 s) after the first throttled
launch and doubling with each one in a row up to ``THROTTLE_MAX`` (2 minutes); after the pause
the whole batch may launch (no probe). The pause's streak ends when a node becomes ready or the
cloud answers a launch otherwise (a node it launched fails, or it has no capacity); it neither
starts nor lengthens the streak of failed rounds, which goes on where it stood.

A failure's cause is the one its event was recorded with (``Event.cause``); an event of an older
journal, recorded without one, is classified by its detail (a launch's "launch failed ...").

The state survives a restart: it is rebuilt from the journal every pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from elb.core.frozen import quick_init
from elb.core.model import Cause, Event, NodeState

__all__ = ["Backoff", "Backoffs", "Cause", "GroupTrackers", "Tracker", "by_group", "compute"]

PROBE_NODES = 1  # nodes a launch round may start while backing off
THROTTLE_INITIAL = 5.0  # seconds of the first pause after a launch the cloud throttled
THROTTLE_MAX = 120.0  # the longest such pause, however many throttled rounds in a row
REFUSED_MAX_FACTOR = 4.0  # a round of launches the cloud refused waits at most this many ``initial`` waits


@quick_init
@dataclass(frozen=True, slots=True)
class Backoff:
    """Where the back-off stands at one instant."""

    rounds: int = 0  # failed rounds in a row (0: no back-off)
    next_launch_at: float | None = None  # no launch before this
    cause: Cause | None = None  # of the last failed round (throttled or not)
    last_failure: str = ""  # "node007: provisioning failed at ..." of the last failed round
    probing: bool = False  # a node requested after the wait is still on its way: no other launch
    throttled: int = 0  # throttled launch rounds in a row (0: no pause)
    paused_until: float | None = None  # no launch before this either: the pause after throttling

    @property
    def until(self) -> float | None:
        """The instant launching may start again (None: no wait was set)."""
        ends = [t for t in (self.next_launch_at, self.paused_until) if t is not None]
        return max(ends, default=None)

    def waiting(self, now: float) -> float:
        """Seconds launching must still wait at ``now`` (0: may launch)."""
        until = self.until
        return 0.0 if until is None else max(0.0, until - now)

    @property
    def active(self) -> bool:
        return self.rounds > 0 or self.throttled > 0

    def cap(self, wanted: int, now: float) -> int:
        """How many of ``wanted`` new nodes may be launched at ``now``: none while waiting or a
        probe is on its way; a probe after failed rounds; all after throttled rounds alone."""
        if not self.active:
            return wanted
        if self.waiting(now) > 0 or self.probing:
            return 0
        return min(wanted, PROBE_NODES) if self.rounds else wanted


def _cause(e: Event) -> Cause:
    """The cause the event was recorded with; an event of an older journal, recorded without one,
    by its detail: "launch failed" or "no instance" (its cleanup's "cleanup: ..." too) is the
    cloud's, anything else provisioning's."""
    if e.cause is not None:
        return e.cause
    text = (e.detail or "").removeprefix("cleanup: ")
    return Cause.LAUNCH if text.startswith(("launch failed", "no instance")) else Cause.PROVISION


class Tracker:
    """The back-off folded over bring-up events one at a time (``add``), for a producer that sees
    them as they happen (the simulator); ``compute`` folds a journal's events with it."""

    def __init__(self, *, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum
        self._bringing_up: dict[str, float] = {}  # node -> when it was requested
        # When each bring-up became ready, not yet used to excuse a failure (``_excused``);
        # those before the request of every node still coming up can excuse none and are let go.
        self._credits: list[float] = []
        self._state = Backoff()  # the streak of failed rounds
        self._pause = Backoff()  # the streak of throttled rounds (``throttled``, ``paused_until``)

    def add(self, e: Event) -> None:
        if e.state is NodeState.REQUESTED:
            self._bringing_up[e.node] = e.time
        elif e.state is NodeState.READY:
            asked = self._bringing_up.pop(e.node, None)
            if asked is not None:
                self._state = self._pause = Backoff()  # a node became ready: launching works again
                self._credits.append(e.time)
        elif e.state is NodeState.RUNNING and self._answers_refusals(e.node):
            # the cloud launched the probe after refused launches: that was the question
            self._state = self._pause = Backoff()
        elif e.state is NodeState.TERMINATED:
            # ended without becoming ready and without failing (a launch elb's stop cut short):
            # no failure, and no probe on its way
            self._bringing_up.pop(e.node, None)
        elif e.state in (NodeState.FAILED, NodeState.DRAINING) and e.node in self._bringing_up:
            # a node that never became ready is drained only by its cleanup
            asked = self._bringing_up.pop(e.node)
            cause = _cause(e)
            if cause is Cause.THROTTLED:
                self._throttled(e)
            elif cause is Cause.PROVISION and self._excused(asked):
                self._pause = Backoff()  # the cloud launched it: a throttling pause is over
            else:
                self._failed(e, cause)
        if self._credits and not self._bringing_up:
            # no node is coming up: one requested from now on can use none from before now
            self._credits = [t for t in self._credits if t >= e.time]

    def _excused(self, asked: float) -> bool:
        """Whether a node requested at ``asked`` that failed after its instance ran failed for
        its own reasons: another bring-up of the group became ready after ``asked`` and has not
        excused another failure yet (it is used up here)."""
        oldest = min([asked, *self._bringing_up.values()])
        self._credits = [t for t in self._credits if t >= oldest]
        for i, t in enumerate(self._credits):
            if t >= asked:
                del self._credits[i]
                return True
        return False

    def _failed(self, e: Event, cause: Cause) -> None:
        """A failed bring-up: a new round of the streak unless of the round under way. The cloud
        answered the launch (it ran, or it had no capacity): a throttling pause is over."""
        self._pause = Backoff()
        state = self._state
        if state.next_launch_at is not None and e.time < state.next_launch_at:
            return  # the same round (launched before the wait began)
        rounds = state.rounds + 1
        longest = self.maximum if cause is not Cause.LAUNCH else min(self.maximum, REFUSED_MAX_FACTOR * self.initial)
        wait = min(self.initial * 2.0 ** min(rounds - 1, 64), longest)
        self._state = Backoff(rounds, e.time + wait, cause, f"{e.node}: {e.detail or 'failed'}")

    def _throttled(self, e: Event) -> None:
        """A launch the cloud refused for the account's request rate: a new pause unless of the
        one under way, doubling from ``THROTTLE_INITIAL`` to ``THROTTLE_MAX``; the failure streak
        is left as it is (no capacity was asked about, no node failed)."""
        pause = self._pause
        if pause.paused_until is not None and e.time < pause.paused_until:
            return  # the same launch round
        n = pause.throttled + 1
        wait = min(THROTTLE_INITIAL * 2.0 ** min(n - 1, 64), THROTTLE_MAX)
        self._pause = Backoff(
            cause=Cause.THROTTLED,
            last_failure=f"{e.node}: {e.detail or 'throttled'}",
            throttled=n,
            paused_until=e.time + wait,
        )

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
        pause = self._pause
        if pause.throttled:  # the latest failure (any other ends the pause)
            state = dataclasses.replace(
                state,
                cause=pause.cause,
                last_failure=pause.last_failure,
                throttled=pause.throttled,
                paused_until=pause.paused_until,
            )
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
        ends = [t for b in (*(b for _g, b in self.groups), self.default) if (t := b.until) is not None and t > now]
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
