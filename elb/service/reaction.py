"""When ``run_forever`` runs a pass: at each look (every ``Cadence.tick`` seconds), the poll's pass
when it is due, else the driver's peek (``elb.core.scheduler.PeeksDemand``) and a pass at once when
it shows new waiting work a gap after the last pass (``elb.core.cadence``).

Passes a peek starts are bounded twice: ``policy.peek_gap`` from the last pass's start, and ten
times the last pass's length (``PASS_SHARE``), so that on a cell where a pass takes seconds the
passes the peeks start take at most a tenth of the time, whatever the config says.

The peek never fails anything: its error is logged once (a warning, then nothing until it answers
again, which is logged too) and the daemon keeps to its poll; its command is bounded by a time-out
of one look (at least 1 s; a driver may cap it lower). A driver without the capability, or
``policy.peek_interval`` 0, is plain polling: one look a poll, a pass at each.
"""

from __future__ import annotations

import logging

from elb.core.cadence import Cadence, news
from elb.core.config import Config
from elb.core.scheduler import Peek, PeeksDemand, Scheduler

log = logging.getLogger("elb")

SHOWN = 5  # the new jobs (or requests) a log line names
PASS_SHARE = 10.0  # a pass a peek starts waits at least this many times the last pass's length


class Reaction:
    """The looks' state: the last pass's start and the peek new work is measured against."""

    def __init__(self, cadence: Cadence, scheduler: Scheduler) -> None:
        self.peeker = scheduler if cadence.peek and isinstance(scheduler, PeeksDemand) else None
        self.cadence = cadence if self.peeker is not None else Cadence(cadence.poll)
        self.name = scheduler.name
        self.last_pass: float | None = None
        self.last_length = 0.0  # seconds the last pass took (``passed``)
        self.baseline: Peek | None = None
        self.failing = False

    @classmethod
    def of(cls, config: Config, scheduler: Scheduler, poll: float) -> Reaction:
        policy = config.policy
        return cls(Cadence.of(poll, policy.peek_interval, policy.peek_gap), scheduler)

    def announce(self) -> None:
        """Say, once at the start, whether and how often the loop peeks."""
        if self.peeker is not None:
            log.info(
                "peeking at %s every %g s: new waiting work starts a pass at once (at most one every %g s)",
                self.name,
                self.cadence.peek,
                self.cadence.gap,
            )

    def look(self, now: float) -> str | None:
        """Why a pass runs at ``now`` (monotonic seconds): ``"poll"``, or what the peek showed;
        None: no pass. A pass it calls for is taken to start at ``now``."""
        if self.cadence.poll_due(now, self.last_pass):
            seen = self._peek()  # what this pass will see: news is measured from it
            if seen is not None:
                self.baseline = seen
            self.last_pass = now
            return "poll"
        seen = self._peek()
        if seen is None:
            return None
        new = news(self.baseline, seen)
        if not new:
            self.baseline = seen
            return None
        if not self.cadence.quick_allowed(now, self.last_pass, at_least=PASS_SHARE * self.last_length):
            return None  # the baseline stays: the news counts when the gap has passed
        self.baseline, self.last_pass = seen, now
        shown = sorted(new, key=lambda k: (len(k), k))[:SHOWN]
        more = f" and {len(new) - len(shown)} more" if len(new) > len(shown) else ""
        return f"{self.name} shows new waiting work ({', '.join(shown)}{more})"

    def passed(self, seconds: float) -> None:
        """The pass ``look`` called for took ``seconds``."""
        self.last_length = seconds

    def _peek(self) -> Peek | None:
        """The driver's peek, or None when there is none or it failed (logged once)."""
        if self.peeker is None:
            return None
        try:
            seen = self.peeker.peek(max(1.0, self.cadence.tick))
        except Exception as err:  # a peek fails nothing: the poll goes on
            if not self.failing:
                log.warning("peeking at %s failed: %s; a pass every poll until it answers", self.name, err)
                self.failing = True
            return None
        if self.failing:
            log.info("peeking at %s answers again", self.name)
            self.failing = False
        return seen


__all__ = ["Reaction"]
