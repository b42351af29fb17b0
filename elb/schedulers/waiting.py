"""The wait both drivers run after a bring-up: their scheduler read again and again until it shows
each new node up, for a bounded time (Slurm: each slurmd registered; Grid Engine, nodes that
configure themselves at boot: each execd reporting).

The time a node is given is time the scheduler was answering. A node registers with the
scheduler's controller, which retries by itself when the controller is busy: a controller that
does not answer delays the registration, and is no fault of the node. So the wait's ``timeout``
counts only the time the scheduler answered in:

- a read that failed with a transient ``SchedulerError`` (the scheduler did not answer, after the
  driver's retries) does not count, nor does the poll after it, until the next read;
- a read that answered but took longer than ``SLOW_READ`` seconds counts only its first
  ``SLOW_READ`` seconds (its controller was busy for the rest);
- a read the scheduler refused (an error that is not transient) is an answer, and counts.

The whole wait is still bounded: it ends after ``WAIT_CAP`` times ``timeout``, however little of
it the scheduler answered in. A wait that ends with nodes not up is their fault (they come back
with why) unless the scheduler did not answer for a good part of it: its last read failed
(transiently), or it did not answer for ``UNANSWERED_SHARE`` of ``timeout`` or more (always so
when the wait ends at its cap). Then what the scheduler has of them is not known: a transient
``SchedulerError``, for the caller to leave the nodes in their step and try again later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from elb.core.scheduler import SchedulerError

SLOW_READ = 5.0  # seconds of one read that count as the scheduler answering; a longer read's rest does not
WAIT_CAP = 3.0  # the wait ends after this many times its timeout, whatever the scheduler answered
UNANSWERED_SHARE = 0.5  # of the timeout: a scheduler out that long makes a miss no node's fault

# Reads the scheduler once: the names among those asked for that it shows up now; what it shows
# of each other one goes into the mapping, for the failure's message. A read that fails raises
# ``SchedulerError`` (``transient``: the scheduler did not answer), its message saying what it read.
UpOf = Callable[[set[str], dict[str, str]], list[str]]


class _Tally:
    """The wait's time so far, and how much of it the scheduler did not answer in."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.start = clock()
        self.unanswered = 0.0

    @property
    def elapsed(self) -> float:
        return self.clock() - self.start

    @property
    def answered(self) -> float:
        return self.elapsed - self.unanswered

    def over(self, timeout: float) -> bool:
        return self.answered >= timeout or self.elapsed >= WAIT_CAP * timeout


def wait_until_up(
    names: Sequence[str],
    up_of: UpOf,
    *,
    timeout: float,
    poll: float,
    stopping: threading.Event,
    log: logging.Logger,
    since: str,
    failed: Callable[[str], str],
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, str] | None:
    """Read with ``up_of`` every ``poll`` seconds until every name is up or the scheduler has
    answered for ``timeout`` seconds (``clock``'s; at most ``WAIT_CAP`` times that in all, see the
    module): the names not up then, each with ``failed`` of what the last read showed of it
    (empty: all up); None when ``stopping`` is set first. A transient ``SchedulerError`` when the
    nodes not up are not known to be their fault (the scheduler did not answer for a good part of
    the wait). Each node up is logged with the seconds since the start, "after ``since``"."""
    tally = _Tally(clock)
    waiting = set(names)
    seen: dict[str, str] = dict.fromkeys(names, "not read yet")
    while True:
        began = clock()
        up, error = _read(up_of, waiting, seen)
        for name in up:
            waiting.discard(name)
            log.info("%s: up %.1f s after %s", name, tally.elapsed, since)
        if not waiting:
            return {}
        took = clock() - began
        unanswered = error is not None and error.transient
        tally.unanswered += took if unanswered else max(0.0, took - SLOW_READ)
        if tally.over(timeout):
            return _missed({name: failed(seen[name]) for name in sorted(waiting)}, tally, timeout, error)
        polled = clock()
        if stopping.wait(poll):
            return None
        if unanswered:  # not known to answer until the next read
            tally.unanswered += clock() - polled


def _read(up_of: UpOf, waiting: set[str], seen: dict[str, str]) -> tuple[list[str], SchedulerError | None]:
    """One read: the names up, and the read's error (None: it answered), its message noted in
    ``seen`` for each name waiting."""
    try:
        return up_of(waiting, seen), None
    except SchedulerError as err:  # noted; the next poll reads again
        seen.update((name, str(err)) for name in waiting)
        return [], err


def _missed(unheard: dict[str, str], tally: _Tally, timeout: float, last: SchedulerError | None) -> dict[str, str]:
    """``unheard``, the nodes the wait ended without, if their own fault; the transient
    ``SchedulerError`` if the scheduler did not answer for a good part of the wait."""
    if last is not None and last.transient:
        why = f"its last read failed: {last}"
    elif tally.unanswered >= UNANSWERED_SHARE * timeout:
        why = "its reads failed or were slow"
    else:
        return unheard
    raise SchedulerError(
        f"{', '.join(unheard)}: not up after {tally.elapsed:.0f} s, the scheduler did not answer in "
        f"{tally.unanswered:.0f} s of them ({why})",
        transient=True,
    )
