"""How jobs fit on nodes: the one placement rule of elb's forecast, the peers and the simulator.

The rule is SGE's host order when loads tie, **first fit**: a job of at most a node's slots goes on
the first node (in the caller's order) with enough free slots; a wider job (a PE job over several
hosts) takes ``width`` whole empty nodes, the first ones. ``FreeIndex`` answers both questions
without walking every node: nodes are bucketed by free slots, each bucket sorted by order, so a
question costs a few bucket heads (one per distinct free-slot count), not one look per node.

``Packing`` places a queue of waiting jobs, oldest first, on bins (free slots of nodes now or soon)
and on new nodes for what fits nowhere. Its work does not depend on how many tasks or slots a job
asks for: an array of N identical tasks fills one bin at a time (each bin it touches is filled up
for that job), a wide job counts its missing nodes arithmetically, and new nodes stop being
counted once past ``limit`` (the room under ``max_nodes``); jobs after that are still placed on
the existing bins, so which existing nodes waiting jobs would take stays exact. Its bins are a list
(in the caller's order), or the ready workers of an index the caller keeps (``ready``: keyed by
``named``, host order), read through and never changed (``Overlay``), with named bins over and
beside them and the list after them: a packing then costs the bins it touches, not the workers.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from elb.core.frozen import quick_init

# What orders the nodes of an index: a position, a host order (``host_order``), or a packing's key
# (``named``: a worker in host order; then the caller's list of bins by position).
K = TypeVar("K", int, tuple[int, str], tuple[int, int, str])
Key = tuple[int, int, str]


def host_order(name: str) -> tuple[int, str]:
    """Host order: node002 before node010, node999 before node1000."""
    return (len(name), name)


def named(name: str) -> Key:
    """A worker's key in a packing: its host order, before every bin of the caller's list."""
    return (0, len(name), name)


def _listed(position: int) -> Key:
    return (1, position, "")


def width(slots: int, slots_per_node: int) -> int:
    """Whole nodes a wide job takes per task; 0 for a job that fits on one node."""
    return math.ceil(slots / slots_per_node) if slots > slots_per_node else 0


class FreeIndex(Generic[K]):
    """Nodes by free slots, for first fit (or best fit) without a walk over every node.

    Keys order the nodes (the first fit is the smallest key). ``set`` moves a node between
    buckets in O(log n) plus a short memmove; ``first`` looks at one head per distinct free-slot
    count. A node is empty when its free slots equal its total and the total is at least
    ``whole`` (the size a wide job's node must have).
    """

    def __init__(self, whole: int) -> None:
        self.whole = whole
        self._free: dict[K, tuple[int, int]] = {}  # key -> (free, total)
        self._buckets: dict[int, list[K]] = {}  # free slots -> keys, sorted
        self._empty: list[K] = []  # keys of empty nodes, sorted

    def __len__(self) -> int:
        return len(self._free)

    def __contains__(self, key: object) -> bool:
        return key in self._free

    def free(self, key: K) -> int:
        return self._free[key][0]

    def set(self, key: K, free: int, total: int) -> None:
        """Add the node or change its free slots (``_drop`` of its old entry, written out: every
        start and end of a job on a node comes here)."""
        entries, buckets = self._free, self._buckets
        old = entries.get(key)
        if old is not None:
            was, was_total = old
            if was == free and was_total == total:
                return
            if was > 0:
                left = buckets[was]
                if len(left) == 1:
                    del buckets[was]
                else:
                    del left[bisect.bisect_left(left, key)]
            if was == was_total and was_total >= self.whole and was_total > 0:
                del self._empty[bisect.bisect_left(self._empty, key)]
        entries[key] = (free, total)
        if free > 0:
            keys = buckets.get(free)
            if keys is None:
                buckets[free] = [key]
            else:
                bisect.insort(keys, key)
        if free == total and total >= self.whole and total > 0:
            bisect.insort(self._empty, key)

    def set_many(self, entries: Sequence[tuple[K, int, int]]) -> None:
        """``set`` of each (key, free, total) in turn; on an empty index, with keys that differ,
        each bucket is sorted once instead of one insertion per key (the same index)."""
        if self._free or len({e[0] for e in entries}) < len(entries):
            for key, free, total in entries:
                self.set(key, free, total)
            return
        touched: set[int] = set()
        for key, free, total in entries:
            self._free[key] = (free, total)
            if free > 0:
                keys = self._buckets.get(free)
                if keys is None:
                    self._buckets[free] = [key]
                else:
                    keys.append(key)
                    touched.add(free)
            if free == total and total >= self.whole and total > 0:
                self._empty.append(key)
        for free in touched:
            self._buckets[free].sort()
        self._empty.sort()

    def add_full(self, entries: Sequence[tuple[K, int]]) -> None:
        """Add nodes the index does not hold, each (key, total) with no free slot: ``set`` of each
        to 0 free (in no bucket, and not empty), without its tests."""
        free = self._free
        for key, total in entries:
            assert key not in free
            free[key] = (0, total)

    def remove(self, key: K) -> None:
        old = self._free.pop(key, None)
        if old is not None:
            self._drop(key, old)

    def _drop(self, key: K, old: tuple[int, int]) -> None:
        free, total = old
        if free > 0:
            keys = self._buckets[free]
            if len(keys) == 1:
                del self._buckets[free]
            else:
                del keys[bisect.bisect_left(keys, key)]
        if free == total and total >= self.whole and total > 0:
            del self._empty[bisect.bisect_left(self._empty, key)]

    def first(self, slots: int) -> K | None:
        """The first node (smallest key) with at least ``slots`` free; None if there is none."""
        best: K | None = None
        for free, keys in self._buckets.items():
            if free >= slots and (best is None or keys[0] < best):
                best = keys[0]
        return best

    def fullest(self, slots: int) -> K | None:
        """Best fit: the node with the fewest free slots that still holds ``slots`` (first on ties)."""
        fits = [free for free in self._buckets if free >= slots]
        return self._buckets[min(fits)][0] if fits else None

    def empties(self, count: int) -> list[K]:
        """The first ``count`` empty nodes (fewer if there are fewer)."""
        return self._empty[:count]

    @property
    def empty_count(self) -> int:
        return len(self._empty)

    @property
    def most_free(self) -> int:
        """The most free slots any node has (0: every node is full)."""
        return max(self._buckets) if self._buckets else 0


def _is_empty(entry: tuple[int, int], whole: int) -> bool:
    free, total = entry
    return free == total and total >= whole and total > 0


class Overlay(Generic[K]):
    """A ``FreeIndex`` read through, with entries set on top of it that hide the base's entry of
    the same key: the base is never changed (a packing on the ready workers a tally keeps).

    Keys set on top stay there, so each base bucket's keys before a cursor are all hidden and a
    query skips each hidden key once: a question costs a few bucket heads plus the keys set since."""

    def __init__(self, base: FreeIndex[K] | None, whole: int) -> None:
        self.base: FreeIndex[K] | None = base
        self.top: FreeIndex[K] = FreeIndex(whole)
        self._at: dict[int, int] = {}  # per base bucket: keys before this position are hidden
        self._empty_at = 0  # the same for the base's empty keys
        self._hidden_empty = 0  # hidden keys that are empty in the base

    def get(self, key: K) -> tuple[int, int] | None:
        """(free, total) of ``key``, or None."""
        entry = self.top._free.get(key)
        if entry is None and self.base is not None:
            entry = self.base._free.get(key)
        return entry

    def set(self, key: K, free: int, total: int) -> None:
        top, base = self.top, self.base
        if base is not None and key not in top:
            old = base._free.get(key)
            if old is not None and _is_empty(old, base.whole):
                self._hidden_empty += 1
        top.set(key, free, total)

    def take_wholes(self, keys: Sequence[K]) -> tuple[list[K], list[K]]:
        """Of ``keys`` (``empties``: empty nodes, of the base or set on top), ``set`` each node of
        the base not set on top to no free slot (a wide job takes all of it: hidden as an empty
        one), and leave the ones set on top to the caller: (those taken here, those left), each
        in order."""
        top = self.top
        on_top = top._free
        taken: list[K] = []
        left: list[K] = []
        for key in keys:
            (left if key in on_top else taken).append(key)
        if taken:
            base = self.base
            assert base is not None
            self._hidden_empty += len(taken)
            top.add_full([(key, base._free[key][1]) for key in taken])
        return taken, left

    def set_many(self, entries: Sequence[tuple[K, int, int]]) -> None:
        """``set`` of each (key, free, total) in turn (``FreeIndex.set_many`` on top)."""
        base = self.base
        if base is not None:
            seen: set[K] = set()
            for key, _, _ in entries:
                if key not in seen and key not in self.top:
                    old = base._free.get(key)
                    if old is not None and _is_empty(old, base.whole):
                        self._hidden_empty += 1
                seen.add(key)
        self.top.set_many(entries)

    def first(self, slots: int) -> K | None:
        best = self.top.first(slots)
        if self.base is None:
            return best
        hidden, at = self.top._free, self._at
        for free, keys in self.base._buckets.items():
            if free < slots:
                continue
            i, n = at.get(free, 0), len(keys)
            while i < n and keys[i] in hidden:
                i += 1
            at[free] = i
            if i < n and (best is None or keys[i] < best):
                best = keys[i]
        return best

    def empties(self, count: int) -> list[K]:
        own = self.top.empties(count)
        if self.base is None:
            return own
        keys, hidden = self.base._empty, self.top._free
        i, n = self._empty_at, len(keys)
        while i < n and keys[i] in hidden:
            i += 1
        self._empty_at = i
        out: list[K] = []
        j = 0
        while len(out) < count:
            while i < n and keys[i] in hidden:
                i += 1
            if i < n and (j >= len(own) or keys[i] < own[j]):
                out.append(keys[i])
                i += 1
            elif j < len(own):
                out.append(own[j])
                j += 1
            else:
                break
        return out

    @property
    def empty_count(self) -> int:
        base = 0 if self.base is None else self.base.empty_count - self._hidden_empty
        return base + self.top.empty_count


@dataclass(slots=True)
class Bin:
    """Free slots a waiting job may be placed on."""

    name: str | None  # None: not an existing worker (a new node, or a node an ending wide job frees)
    free: int
    total: int
    new: bool = False  # a node to launch


@quick_init
@dataclass(frozen=True, slots=True)
class Placed:
    """Where one waiting job entry went."""

    new_nodes: int  # new nodes counted for it (0 once past the limit)
    short: int  # tasks that start on no existing bin (on a new node, or nowhere within the limit)


_NOTHING = Placed(0, 0)
_SHORT = tuple(Placed(0, short) for short in range(64))


def _short(short: int) -> Placed:
    """``Placed(0, short)``, made once for the small counts most jobs have."""
    return _SHORT[short] if short < 64 else Placed(0, short)


@dataclass(slots=True)
class Packing:
    """First fit of waiting jobs, in the order given, onto bins, then onto new nodes of
    ``slots_per_node`` slots, counted up to just past ``limit``. The bins, in order: the workers
    of ``ready`` ((free, total) each, never changed here) with ``over`` set on top of them (named
    bins: a worker's other free slots, or one that is not in ``ready``), in their keys' order
    (``named``: host order; a key of ``ready`` may be any whose first item is 0 and last the
    worker's name); then ``bins``, in the caller's order."""

    bins: list[Bin]
    slots_per_node: int
    limit: int
    ready: FreeIndex[Key] | None = None
    over: list[Bin] = field(default_factory=list)
    new_nodes: int = 0
    complete: bool = True  # False: new nodes stopped being counted past ``limit``
    assigned: set[str] = field(default_factory=set)
    _index: Overlay[Key] = field(init=False)
    _named: dict[Key, Bin] = field(init=False)  # the named bins touched so far (a ready one made when first taken)
    # Once new nodes are no longer counted, the fewest slots for which no existing bin has room:
    # bins then only lose free slots and none is added, so a narrow job of at least as many slots
    # finds none either (the slots per node plus one until then).
    _no_room: int = field(init=False)

    def __post_init__(self) -> None:
        self._index = Overlay(self.ready, self.slots_per_node)
        self._named = {}
        self._no_room = self.slots_per_node + 1
        entries: list[tuple[Key, int, int]] = []
        for b in self.over:
            assert b.name is not None
            key = named(b.name)
            self._named[key] = b
            entries.append((key, b.free, b.total))
        entries += [(_listed(i), b.free, b.total) for i, b in enumerate(self.bins)]
        self._index.set_many(entries)

    def _bin(self, key: Key) -> Bin:
        if key[0]:
            return self.bins[key[1]]
        b = self._named.get(key)
        if b is None:
            entry = self._index.get(key)
            assert entry is not None
            b = self._named[key] = Bin(key[2], *entry)
        return b

    def _take(self, key: Key, b: Bin, slots: int) -> None:
        """Take ``slots`` of bin ``b`` (``_bin(key)``)."""
        b.free -= slots
        self._index.set(key, b.free, b.total)
        if b.name is not None:
            self.assigned.add(b.name)

    @property
    def saturated(self) -> bool:
        """No job can be placed on a bin any more, and none adds new nodes: every job from now on
        is short of all its tasks. (New nodes are no longer counted, no existing bin has room for
        one slot, and there is no empty bin for a wide job: bins only lose free slots now.)"""
        return not self.complete and self._no_room <= 1 and not self._index.empty_count

    def _counting(self) -> bool:
        if self.complete and self.new_nodes > self.limit:
            self.complete = False
        return self.complete

    def place(self, slots: int, tasks: int) -> Placed:
        """Place ``tasks`` tasks of ``slots`` slots each (a job entry; an array's pending tasks)."""
        if slots <= 0 or tasks <= 0:
            return _NOTHING
        if slots > self.slots_per_node:
            return self._place_wide(slots, tasks, self._counting())
        if slots >= self._no_room:
            return _short(tasks)
        return self._place_narrow(slots, tasks, self._counting())

    def _place_wide(self, slots: int, tasks: int, counting: bool) -> Placed:
        """Whole empty bins for each task; what is missing is counted in whole new nodes."""
        k = width(slots, self.slots_per_node)
        left, short, new = tasks, 0, 0
        index = self._index
        while left and index.empty_count:
            taken = index.empties(k)
            # The ready workers of the kept index, untouched, are taken whole, with no bin of
            # their own; the bins set here (listed, named, or taken from before), as bins.
            whole, bins = index.take_wholes(taken)
            self.assigned.update([key[2] for key in whole])
            for key in bins:
                b = self._bin(key)
                self._take(key, b, b.free)
            left -= 1
            if len(taken) < k:
                short += 1
                new += k - len(taken)
        short += left
        new += left * k
        if not counting:
            return _short(short)
        self.new_nodes += new  # a wide job's new nodes have no slot left: no bin to keep
        return Placed(new, short)

    def _place_narrow(self, slots: int, tasks: int, counting: bool) -> Placed:
        """First fit task by task, a bin at a time; then new nodes packed with the rest."""
        left, short = tasks, 0
        first = self._index.first
        while left:
            key = first(slots)
            if key is None:
                break
            b = self._bin(key)
            if not counting and b.new:
                break
            take = min(left, b.free // slots)
            self._take(key, b, take * slots)
            left -= take
            if b.new:
                short += take  # on a node launched for earlier jobs: it waits for that boot too
        if not left:
            return _short(short)
        if not counting:
            if left == tasks:  # no existing bin has room for this many slots: see _no_room
                self._no_room = min(self._no_room, slots)
            return _short(short + left)
        short += left
        spn = self.slots_per_node
        per = spn // slots
        need = math.ceil(left / per)
        self.new_nodes += need
        if self.new_nodes <= self.limit:
            # Only bins that later jobs may still be counted on are kept: at most ``limit`` of them.
            last = left - (need - 1) * per
            rest = spn - per * slots
            if rest > 0:
                self._add_new(need - 1, rest)
            self._add_new(1, spn - last * slots)
        return Placed(need, short)

    def _add_new(self, count: int, free: int) -> None:
        for _ in range(count):
            self.bins.append(Bin(None, free, self.slots_per_node, new=True))
            self._index.set(_listed(len(self.bins) - 1), free, self.slots_per_node)
