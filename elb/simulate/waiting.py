"""A replay's waiting jobs: in submission order, and in one queue per need.

SGE's dispatch without reservations starts, in submission order, every waiting job that fits now.
Whether a job fits, and where it goes, depends only on its need (in the simulator: its node group
and what it takes there, slots on one node or whole nodes), and starting a job only takes
capacity: once a job of some need does not fit, no job of that need fits until the pass ends.
``WaitingJobs.start_in_order`` therefore looks at the oldest job of each need, oldest first, and
drops a need at its first miss. A pass costs the jobs it starts plus one look per need (and a heap
over the needs), not one look per waiting job: a backlog of thousands of jobs that cannot start
costs nothing after an event that frees too little for them.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
N = TypeVar("N", bound=Hashable)


class WaitingJobs(Generic[N, T]):
    """Waiting items with a need each; the submission order is the order of ``add``."""

    def __init__(self) -> None:
        self._all: dict[int, T] = {}  # seq -> item, in submission order
        self._need: dict[int, N] = {}  # seq -> its need
        self._by_need: dict[N, deque[tuple[int, T]]] = {}  # oldest first; needs with no item are dropped
        self._seq = 0
        self._first = 0  # no number below it waits (``head``)

    def __len__(self) -> int:
        return len(self._all)

    def __bool__(self) -> bool:
        return bool(self._all)

    def __iter__(self) -> Iterator[T]:
        """The items in submission order."""
        return iter(self._all.values())

    @property
    def needs(self) -> int:
        """How many distinct needs the waiting items have."""
        return len(self._by_need)

    @property
    def next_number(self) -> int:
        """The number the next ``add`` gives."""
        return self._seq

    def waits(self, need: N) -> bool:
        """Whether an item of ``need`` waits."""
        return need in self._by_need

    def newest(self) -> int | None:
        """The number of the newest waiting item, or None."""
        return next(reversed(self._all), None)

    def add(self, item: T, need: N) -> int:
        """Queue ``item`` last; returns its number, which ``remove`` takes."""
        seq = self._seq
        self._seq += 1
        self._all[seq] = item
        self._need[seq] = need
        queue = self._by_need.get(need)
        if queue is None:
            queue = self._by_need[need] = deque()
        queue.append((seq, item))
        return seq

    def remove(self, seq: int) -> None:
        """Take item ``seq`` out (quick for the oldest of its need; else a walk over its need's queue)."""
        item = self._all.pop(seq)
        need = self._need.pop(seq)
        queue = self._by_need[need]
        if queue[0][0] == seq:
            queue.popleft()
        else:
            queue.remove((seq, item))
        if not queue:
            del self._by_need[need]

    def head(self) -> T | None:
        """The oldest item, or None: the lowest number still waiting (every number below
        ``_first`` is taken out, so each is passed over once)."""
        first, waiting = self._first, self._all
        while first < self._seq and first not in waiting:
            first += 1
        self._first = first
        return waiting.get(first)

    def start_in_order(self, start: Callable[[T], bool]) -> None:
        """Offer items to ``start`` in submission order, each until it declines one: then the
        other items of that need are not offered in this pass. ``start`` returns True when it
        took the item, which it removes (``remove``) before returning; it must not add items."""
        if len(self._by_need) == 1:  # one need: its queue in order, no heap
            need = next(iter(self._by_need))
            while (queue := self._by_need.get(need)) and start(queue[0][1]):
                pass
            return
        heads = [(queue[0][0], need) for need, queue in self._by_need.items()]
        heapq.heapify(heads)
        while heads:
            _, need = heapq.heappop(heads)
            if not start(self._by_need[need][0][1]):
                continue  # no item of this need fits for the rest of the pass
            queue = self._by_need.get(need)
            if queue:
                heapq.heappush(heads, (queue[0][0], need))
