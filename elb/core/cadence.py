"""When the daemon runs a pass: every ``poll_interval``, or sooner, at the first peek that shows
new waiting work (``elb.core.scheduler.PeeksDemand``). The same rule for the live daemon
(``elb.service.daemon.run_forever``) and the replay (``elb.simulate.engine``); pure, times
passed in.

The daemon looks every ``tick`` seconds: the peek interval when the driver can peek and
``policy.peek_interval`` is set (``peek_every``: the poll divided into whole peeks, so a poll
always falls on a look), else the poll. At each look a pass runs when the poll is due (a
``poll_interval`` since the last pass began), or when the peek shows a key the baseline did not
have and ``policy.peek_gap`` has passed since the last pass began: on a busy cell, where work
arrives every second, passes come at most once a gap, never one a look. The baseline is the
peek taken at the last pass, or at the last look that found nothing new; a look that found news
too soon after a pass keeps its baseline, so the news still counts when the gap has passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elb.core.scheduler import Peek

_EPS = 1e-9


def peek_every(poll: float, peek: float) -> float:
    """Seconds between two peeks: ``poll`` divided by the least whole number that makes it at
    most ``peek`` (every poll falls on a peek); 0 (no peek) when ``peek`` is 0 or not less than
    ``poll``."""
    if not peek > 0 or not peek < poll:
        return 0.0
    return poll / math.ceil(poll / peek - _EPS)


def news(baseline: Peek | None, now: Peek) -> frozenset[str]:
    """The waiting work ``now`` shows that ``baseline`` did not (none without a baseline)."""
    if baseline is None:
        return frozenset()
    return now.waiting - baseline.waiting


@dataclass(frozen=True, slots=True)
class Cadence:
    """``poll``: seconds between passes; ``peek``: seconds between peeks (0: none, plain
    polling; see ``peek_every``); ``gap``: the least seconds from a pass to one a peek starts."""

    poll: float
    peek: float = 0.0
    gap: float = 0.0

    @classmethod
    def of(cls, poll: float, peek: float, gap: float) -> Cadence:
        return cls(poll, peek_every(poll, peek), gap)

    @property
    def tick(self) -> float:
        """Seconds between two looks: a peek's, or without peeks the poll's."""
        return self.peek or self.poll

    def poll_due(self, now: float, last_pass: float | None) -> bool:
        """A pass is due by the poll. Looks come every ``tick``: half a tick of slack absorbs a
        late look without skipping to the next."""
        return last_pass is None or now - last_pass >= self.poll - self.tick / 2

    def quick_allowed(self, now: float, last_pass: float | None, *, at_least: float = 0.0) -> bool:
        """A peek's news may start a pass now: the gap since the last pass has passed, and
        ``at_least`` (the daemon: ten times the last pass's length, see
        ``elb.service.reaction``)."""
        return last_pass is None or now - last_pass >= max(self.gap, at_least) - self.tick / 2


__all__ = ["Cadence", "news", "peek_every"]
