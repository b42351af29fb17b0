"""The wait both drivers run after a bring-up: their scheduler read again and again until it shows
each new node up, for a bounded time (Slurm: each slurmd registered; Grid Engine, nodes that
configure themselves at boot: each execd reporting)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

# Reads the scheduler once: the names among those asked for that it shows up now; what it shows
# of each other one (or why the read failed) goes into the mapping, for the failure's message.
UpOf = Callable[[set[str], dict[str, str]], list[str]]


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
) -> dict[str, str] | None:
    """Read with ``up_of`` every ``poll`` seconds until every name is up or ``timeout`` seconds
    have passed: the names not up then, each with ``failed`` of what the last read showed of it
    (empty: all up); None when ``stopping`` is set first. A failed read counts as a read that showed
    nothing up: the next poll reads again. Each node up is logged with the seconds since the
    start, "after ``since``"."""
    start = time.monotonic()
    waiting = set(names)
    seen: dict[str, str] = dict.fromkeys(names, "not read yet")
    while True:
        for name in up_of(waiting, seen):
            waiting.discard(name)
            log.info("%s: up %.1f s after %s", name, time.monotonic() - start, since)
        if not waiting:
            return {}
        if time.monotonic() - start >= timeout:
            return {name: failed(seen[name]) for name in sorted(waiting)}
        if stopping.wait(poll):
            return None
