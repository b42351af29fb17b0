"""Pausing Python's cycle collector over work that makes many objects and no reference cycles.

The collector runs after every 700 new container objects (tuples, lists, dicts, class
instances) that outlive their making, and each run walks the objects made since. Reading 50,000
waiting jobs, or splitting them into demand, makes hundreds of thousands of such objects, which
would make it run hundreds of times over a growing heap, and at the end often once over the
whole heap: more CPU than the work itself. Nothing made here holds a reference cycle, so its
garbage goes by reference counting alone, and the collector can wait until the work is done.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused(*, keep: bool = False) -> Iterator[None]:
    """The collector paused meanwhile (if it was running).

    ``keep``: what was made meanwhile lives on (50,000 jobs live until the next pass): it goes
    to the oldest generation at once, in one collection of the two younger ones; left to the
    next allocations, the same objects would be walked twice, once by each of them. Otherwise
    what was made meanwhile is expected to be mostly gone by the end, and nothing is collected.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if keep:
                gc.collect(1)
            gc.enable()


__all__ = ["paused"]
