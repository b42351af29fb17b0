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

# Work kept (``paused(keep=True)``) this many times between two sweeps of the whole heap (a
# pass of the daemon keeps its read and its policy's view, and Slurm's its demand too: a sweep every
# 100-150 passes, about 0.1 s each at 50,000 jobs).
SWEEP_EVERY = 300

_kept = 0  # works kept since the last sweep


@contextmanager
def paused(*, keep: bool = False) -> Iterator[None]:
    """The collector paused meanwhile (if it was running).

    ``keep``: what was made meanwhile lives on (50,000 jobs live until the next pass): every
    object then alive is set aside (``gc.freeze``, no walk of them), so that no collection walks
    them again; left to the collector, the same objects would be walked by each generation's
    collection in turn, the oldest's a walk of the whole heap every few passes. Garbage goes by
    reference counting as before; only a reference cycle alive at the freeze and dropped later
    waits for the sweep: every ``SWEEP_EVERY`` kept works the heap set aside is given back to the
    collector and collected whole, once. Otherwise what was made meanwhile is expected to be
    mostly gone by the end, and nothing is collected.
    """
    global _kept  # noqa: PLW0603 (the process's one count, as the collector is the process's one)
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if keep:
                _kept += 1
                if _kept >= SWEEP_EVERY:
                    _kept = 0
                    gc.unfreeze()
                    gc.collect()
                gc.freeze()
            gc.enable()


__all__ = ["SWEEP_EVERY", "paused"]
