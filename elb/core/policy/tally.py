"""The workers' facts the Slurm, StarCluster and ParallelCluster peers decide on, kept from one call to the next and
brought up to date by what changed, so that a decision's work does not grow with the cluster.

``cluster_view`` joins every host, node record and job at each call: work in proportion to the
nodes and jobs. A ``WorkerTally`` keeps the objects of the last inputs by identity; at the next
call it finds the ones that came and went (set operations over object ids, which run in C) and
works out again only the workers whose host or record changed or that started or stopped running
any job, and keeps a worker's entry as it was when its facts are the same. What it then holds
is what ``cluster_view`` and the peers' helpers compute from the same inputs: the size, the
waiting jobs oldest first, the booting workers (a peer reads how many), the managed idle ones
(by name, the view's order, for StarCluster's rule and elb's; by idle since, for
ParallelCluster's and Slurm's; each list kept once read), the highest node number in use
(``new_names``), for Slurm the bins its peer places waiting jobs on (the ready workers' free
slots, then the booting ones', each by name, in a ``FreeIndex`` a packing reads through:
``name_bins``), for StarCluster the slots of the up hosts and the oldest waiting job's
submission (a heap of the waiting jobs' submissions), for ParallelCluster the busy workers
(booting, or a job or a reservation there) and the waiting jobs' slots.

The rules are not the tally's own: a worker's entry is ``worker_state``'s reading of it (the
view's ``Worker`` takes the same), ParallelCluster's busy is ``occupies``, a node's number is
``elb.core.naming.node_number``, the running jobs that end by a horizon are those within
``ending_window`` (its bounds are where the tally looks in its indexes) and what each frees is
``freed_by``, a job's overdue time ``overdue_at``. What the tally adds is bookkeeping: indexes
and counts kept up to date, so that the same rules are asked of what changed alone.

A producer may also hand the changes alone, without the objects (``Noted``, ``WorkerTally.advance``):
the simulator does so for StarCluster's quiet hint before a pass, which reads the tally alone, and
its next whole tuples revise those changes.

The inputs are the model's frozen values, so an object seen again is the same value, and the
tally holds every object it has indexed, so an id it compares is never a recycled one. Inputs it
does not model exactly (the same object twice in one tuple, two hosts or two live records of one
name, a node that is down: the tally reads no instance) make ``update`` return False and forget
everything: the caller then builds the full view.

``CapacityTally`` keeps in addition what elb's own policy reads (``elb.core.policy.default``): the
ready workers' free and total slots and the booting workers' slots in a ``FreeIndex`` by host
order (the forecast's packing reads it through, ``elb.core.policy.placement.Overlay``; like
``name_bins``, brought up to date when read, by the workers whose bins changed since), the
running jobs with a requested run time by their expected end (the forecast takes the ones ending
by its horizon, and the next one to become overdue), those without one by their start (the
forecast takes the ones young enough to end by its horizon, ``ages_by``), the idle workers' records (the cost rule's),
and the waiting jobs' slots. A forecast then costs the jobs ending by its horizon and the bins it
touches.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from elb.core.frozen import quick_init
from elb.core.model import ALIVE_STATES, Host, Job, JobPhase, Node, Snapshot
from elb.core.naming import names_after, node_number
from elb.core.policy.forecast import OVERDUE_GRACE, Capacity, ending_window, freed_by, overdue_at
from elb.core.policy.placement import Bin, FreeIndex, Key, named
from elb.core.policy.view import host_numbers, nodes_for, occupies, oldest_first, worker_state
from elb.core.state import started_host, worker_slots

_WAITING = JobPhase.WAITING  # a job the policy plans for (``Job.is_pending``)

T = TypeVar("T")
_NAMES_KEPT = 1 << 16  # names whose number ``WorkerTally`` keeps parsed
_UNSEEN = -1  # ``WorkerTally._number_of`` has no entry for the name (a number is never negative)


class _Entry(NamedTuple):
    """What one worker adds to the tally (a named tuple: entries are compared at each change)."""

    booting: int | None  # a booting record's slots (0: not known); None: not booting
    room: tuple[int, int] | None  # (free, total) of a ready worker with free slots
    idle_since: float | None  # a managed worker, ready and idle, since then
    up_total: int = 0  # its host's slots when the host is up (StarCluster counts these)
    ready: tuple[int, int] | None = None  # (free, total) of a ready worker, with free slots or not
    busy: bool = False  # booting, or a job or a reservation on it (``occupies``: ParallelCluster's busy workers)


_VOID = _Entry(None, None, None)  # no worker: what a name that comes or goes had, or has


def _new_entry(
    fields: tuple[int | None, tuple[int, int] | None, float | None, int, tuple[int, int] | None, bool],
) -> _Entry:
    """An ``_Entry`` of all its fields in order, made by the tuple's own constructor (the named
    tuple's ``__new__`` is a Python call: an entry is made at each change of a worker)."""
    return tuple.__new__(_Entry, fields)


class Revised(tuple[T, ...]):
    """A tuple that says how it differs from an earlier one (``before``): by the objects that
    ``came`` and those that are ``gone`` (by identity). A producer that knows its changes (the
    simulator) hands these, so a ``WorkerTally`` that saw ``before`` takes in the changes alone
    instead of comparing every element. It keeps ``before``'s id, not ``before``: a tally that
    holds the earlier tuple knows it is the one meant (a live object's id is its own)."""

    after: int
    came: tuple[T, ...]
    gone: tuple[T, ...]

    def __new__(cls, items: Iterable[T], before: tuple[T, ...], came: Iterable[T], gone: Iterable[T]) -> Revised[T]:
        self = super().__new__(cls, items)
        self.after, self.came, self.gone = id(before), tuple(came), tuple(gone)
        return self


class Noted(Revised[T]):
    """A ``Revised`` that stands for the tuple it revises without holding its objects: the changes
    alone, which a producer hands a tally straight (``WorkerTally.advance``) on a pass that reads
    the tally alone, so it need not copy every object. The next tuple it hands out revises it, and
    is made whole even when nothing came or went since (``Changes.revised``)."""

    def __new__(cls, before: tuple[T, ...], came: Iterable[T], gone: Iterable[T]) -> Noted[T]:
        self = super().__new__(cls, (), before, came, gone)
        assert isinstance(self, Noted)
        return self


class Changes(Generic[T]):
    """The objects that came and went since a tuple was last handed out: what a producer puts in
    its next ``Revised`` (one that came and went in between is in neither)."""

    def __init__(self) -> None:
        self._came: dict[int, T] = {}
        self._gone: dict[int, T] = {}

    def came(self, obj: T) -> None:
        self._came[id(obj)] = obj

    def went(self, obj: T) -> None:
        if self._came.pop(id(obj), None) is None:
            self._gone[id(obj)] = obj

    def revised(self, items: Iterable[T], before: tuple[T, ...] | None) -> tuple[T, ...]:
        """The next tuple: a ``Revised`` of ``before`` (a plain tuple without one), or ``before``
        itself when nothing came or went (``items`` then holds its objects in its order); the
        changes start again from it."""
        came, gone = self._came.values(), self._gone.values()
        if before is not None and not came and not gone and not isinstance(before, Noted):
            return before
        out = tuple(items) if before is None else Revised(items, before, came, gone)
        self._came, self._gone = {}, {}
        return out

    def noted(self, before: tuple[T, ...]) -> Noted[T]:
        """The changes since ``before`` without the objects (``Noted``); they start again from it."""
        out = Noted(before, self._came.values(), self._gone.values())
        self._came, self._gone = {}, {}
        return out


class _Seen(Generic[T]):
    """The objects of the last sequence of one input, by id (holding them keeps the ids theirs)."""

    def __init__(self) -> None:
        self.seq: Sequence[T] = ()
        self.ids: dict[int, T] = {}

    def follows(self, seq: Revised[T]) -> bool:
        """``seq`` revises the sequence last taken in."""
        return seq.after == id(self.seq)

    def same(self, seq: Sequence[T]) -> bool:
        """``seq`` is the very sequence last taken in, unchanged (a list may change under the same
        identity; a tuple cannot)."""
        return seq is self.seq and isinstance(seq, tuple)

    def diff(self, seq: Sequence[T]) -> tuple[Sequence[T], Sequence[T]] | None:
        """Take in ``seq``: the objects no longer there and the new ones; None when ``seq`` holds
        one object twice (the state is then to be forgotten)."""
        if self.same(seq):
            return (), ()
        if isinstance(seq, Revised) and self.follows(seq):
            ids = self.ids
            for obj in seq.gone:
                if ids.pop(id(obj), None) is None:
                    return None
            for obj in seq.came:
                if id(obj) in ids:
                    return None
                ids[id(obj)] = obj
            self.seq = seq
            return seq.gone, seq.came
        new = dict(zip(map(id, seq), seq, strict=True))
        if len(new) != len(seq):
            return None
        old = self.ids
        gone = [old[k] for k in old.keys() - new.keys()]
        came = [new[k] for k in new.keys() - old.keys()]
        self.seq, self.ids = seq, new
        return gone, came


def _ready_bin(name: str) -> Key:
    """A ready worker's key in ``WorkerTally.name_bins``: by name as text, before every booting one."""
    return (0, 0, name)


def _booting_bin(name: str) -> Key:
    """A booting worker's key in ``WorkerTally.name_bins``: by name as text, after every ready one."""
    return (0, 1, name)


def _set_name_bin(bins: FreeIndex[Key], name: str, e: _Entry) -> None:
    """Set ``name``'s bins in ``WorkerTally.name_bins`` to what its entry ``e`` says."""
    if e.room is None:
        bins.remove(_ready_bin(name))
    else:
        bins.set(_ready_bin(name), *e.room)
    if e.booting is None:
        bins.remove(_booting_bin(name))
    else:
        slots = _booting_slots(e, bins.whole)
        bins.set(_booting_bin(name), slots, slots)


def _booting_slots(e: _Entry, otherwise: int) -> int:
    """A booting worker's slots (``worker_slots`` of its record, which its entry holds, 0 when
    not known; ``otherwise``: not known)."""
    assert e.booting is not None
    return e.booting or otherwise


def _set_bin(bins: FreeIndex[Key], name: str, e: _Entry) -> None:
    """Set ``name``'s bin in ``CapacityTally.bins`` to what its entry ``e`` says: a ready
    worker's (free, total), a booting one's (slots, slots), none for another."""
    if e.ready is not None:
        bins.set(named(name), *e.ready)
    elif e.booting is not None:
        slots = _booting_slots(e, bins.whole)
        bins.set(named(name), slots, slots)
    else:
        bins.remove(named(name))


class _KeptBins:
    """An index of bins made of the workers' entries (``put`` sets one worker's bins from its
    entry) at its first read, then brought up to date at each read by the workers whose bins
    changed since (``due``), each once: a worker may change often between two reads, and a
    tally that is never read does not pay for it."""

    def __init__(self, put: Callable[[FreeIndex[Key], str, _Entry], None]) -> None:
        self._put = put
        self.index: FreeIndex[Key] | None = None  # as last read (None: not read yet, nothing to keep)
        self._due: dict[str, None] = {}
        # The reads that made ``index`` or changed it: one read and the next that find the same
        # count read the same index, unchanged in between (a packing on it may carry on).
        self.changes = 0

    def due(self, name: str) -> None:
        """``name``'s bins changed since ``index`` was read: set at the next read."""
        self._due[name] = None

    def read(self, entries: dict[str, _Entry], whole: int) -> FreeIndex[Key]:
        """The index of ``entries`` (for another ``whole``: made again)."""
        index, due, put = self.index, self._due, self._put
        if index is None or index.whole != whole:
            index = self.index = FreeIndex(whole)
            for name, e in entries.items():
                put(index, name, e)
            due.clear()
            self.changes += 1
        elif due:
            for name in due:
                put(index, name, entries.get(name, _VOID))
            due.clear()
            self.changes += 1
        return index


class WorkerTally:
    """See the module's doc. One per policy object, like ``ViewCache``."""

    def __init__(self) -> None:
        self._forget("", "")

    def _forget(self, master: str, prefix: str) -> None:
        self._master, self._prefix = master, prefix
        self._hosts: _Seen[Host] = _Seen()
        self._nodes: _Seen[Node] = _Seen()
        self._jobs: _Seen[Job] = _Seen()
        self._host: dict[str, Host] = {}
        self._alive: dict[str, Node] = {}
        self._running: dict[str, int] = {}  # the jobs filed under each host that has any
        self._filed: dict[int, str] = {}  # by a job's id: the host it is filed under (``started_host``)
        self._pending: dict[int, Job] = {}
        self._ordered: tuple[Job, ...] | None = ()  # the waiting jobs oldest first (None: to sort)
        # The waiting jobs' submissions, a heap of (time, the job's id) from which the entries of
        # jobs no longer waiting are dropped when they come to the top (``oldest_wait``). Made at
        # the first read (None: not read yet): a policy that never reads it, Slurm's or
        # ParallelCluster's, keeps no entry for each job that waits.
        self._submits: list[tuple[float, int]] | None = None
        self._up_total = 0  # the slots of the workers whose host is up
        self._busy = 0  # the workers whose entry says busy
        self._pending_slots = 0
        self._pending_odd = 0  # waiting jobs of no slot or no task
        self._entries: dict[str, _Entry] = {}
        self._numbers: dict[int, int] = {}  # node numbers in use (hosts and every record), and their uses
        self._number_of: dict[str, int | None] = {}  # each name's number (None: not one of ``prefix``)
        self._highest: int | None = 0  # the highest of ``_numbers`` (None: to find)
        self._name_bins = _KeptBins(_set_name_bin)  # ``name_bins``
        self.booting: dict[str, None] = {}  # booting workers, in no order (their number is read)
        self._idle: list[str] | None = None  # ``idle`` once read (None: not kept)
        self._by_since: list[tuple[float, str]] | None = None  # ``idle_by_since`` once read (None: not kept)
        # What a subclass keeps of the running jobs that stop and start (``_take_jobs``; None: nothing).
        self._stopped: Callable[[Job], None] | None = None
        self._started: Callable[[Job, str], None] | None = None

    def clear(self) -> None:
        """Forget everything (the next ``update`` takes its inputs in whole)."""
        if self._hosts.seq or self._nodes.seq or self._jobs.seq:
            self._forget(self._master, self._prefix)

    # -- what a decision reads ------------------------------------------------------------------
    def name_bins(self, whole: int) -> FreeIndex[Key]:
        """The bins Slurm's peer places waiting jobs on, in its order (a ``Packing`` reads them
        through, never changing them): each ready worker with a free slot, (free, total), keyed
        ``_ready_bin``; then each booting one, (slots, slots) with its record's slots (unknown:
        ``whole``), keyed ``_booting_bin``; each part by name as text. Made at the first read
        (for another ``whole``: again), then brought up to date at each read by the workers whose
        bins changed since, each once (a read comes only with jobs waiting; elb's policy and the
        other peers never read it, and do not pay for keeping it)."""
        return self._name_bins.read(self._entries, whole)

    @property
    def name_bins_changes(self) -> int:
        """How many reads of ``name_bins`` made or changed it: the same count at two reads (of
        the same index) says it did not change in between."""
        return self._name_bins.changes

    @property
    def idle_by_since(self) -> list[tuple[float, str]]:
        """The managed idle workers, (idle since, name), by idle since, then name (not to be
        changed by the caller). Made at the first read, then kept up to date at each change of
        a worker (a peer that never reads it, StarCluster's, does not pay for keeping it)."""
        if self._by_since is None:
            self._by_since = sorted(
                (e.idle_since, name) for name, e in self._entries.items() if e.idle_since is not None
            )
        return self._by_since

    @property
    def idle(self) -> list[str]:
        """The managed idle workers, by name (not to be changed by the caller). Made at the first
        read, then kept up to date at each change of a worker (ParallelCluster's and Slurm's
        peers read them by idle since alone, and do not pay for keeping this list)."""
        if self._idle is None:
            self._idle = sorted(name for name, e in self._entries.items() if e.idle_since is not None)
        return self._idle

    @property
    def size(self) -> int:
        """``ClusterView.size``: workers that exist or are coming; the master excluded."""
        return len(self._entries)

    def idle_since(self, name: str) -> float:
        since = self._entries[name].idle_since
        assert since is not None
        return since

    def pending(self, snapshot: Snapshot, now: float) -> tuple[Job, ...]:
        """``ClusterView.pending``: the eligible waiting jobs, oldest submission first, then by
        number, ties in the snapshot's order."""
        if self._ordered is not None:
            return self._ordered
        jobs = sorted(self._pending.values(), key=lambda j: (j.submitted or 0.0, j.job_id))
        keys = [(j.submitted, j.job_id) for j in jobs]
        if any(k[0] is None for k in keys) or len(set(keys)) < len(keys):
            # Ordered by ``now``, or ties to keep in the snapshot's order: as the view sorts them.
            return tuple(oldest_first([j for j in snapshot.jobs if id(j) in self._pending], now))
        self._ordered = tuple(jobs)
        return self._ordered

    @property
    def waiting(self) -> int:
        """``len(ClusterView.pending)``."""
        return len(self._pending)

    @property
    def pending_slots(self) -> int:
        """``ClusterView.pending_slots``."""
        return self._pending_slots

    @property
    def pending_plain(self) -> bool:
        """``ClusterView.pending_plain``."""
        return not self._pending_odd

    @property
    def busy(self) -> int:
        """The workers booting or busy (ParallelCluster's peer counts them, ``peers._count``)."""
        return self._busy

    def oldest_wait(self, now: float) -> float:
        """``ClusterView.oldest_wait`` at ``now``."""
        heap, pending = self._submits, self._pending
        if heap is None or len(heap) > 2 * len(pending) + 64:
            # Not read before, or mostly entries of jobs gone: made again from the waiting ones.
            heap = self._submits = [(j.submitted, key) for key, j in pending.items() if j.submitted is not None]
            heapq.heapify(heap)
        while heap:
            first, key = heap[0]
            job = pending.get(key)
            if job is not None and job.submitted == first:  # a waiting job submitted then
                return max(0.0, now - first)
            heapq.heappop(heap)
        return 0.0

    def total_slots(self) -> int:
        """StarCluster's ``count_total_slots``: the slots of every worker whose host is up and
        the master's when it is an up host."""
        master = self._host.get(self._master)
        return self._up_total + (master.slots_total if master is not None and master.up else 0)

    def launched_at(self, name: str) -> float:
        """A managed worker's launch time (its record's)."""
        return self._alive[name].launched_at

    def new_names(self, count: int, prefix: str, digits: int) -> tuple[str, ...]:
        """``elb.core.policy.view.new_names`` of the last inputs (``prefix`` as given to ``update``)."""
        if self._highest is None:
            self._highest = max(self._numbers, default=0)
        return names_after(self._highest, count, prefix, digits)

    # -- bringing it up to date -----------------------------------------------------------------
    def update(
        self, snapshot: Snapshot, nodes: Sequence[Node], master: str, prefix: str, down: Collection[str] = ()
    ) -> bool:
        """Take in these inputs. False: they are not modelled exactly (see the module's doc); the
        tally is then empty and the caller builds the full view. ``down``: the nodes that are
        down (``elb.core.state.ClusterState.down``), which the tally does not model."""
        if down:
            self._forget(master, prefix)
            return False
        if (master, prefix) != (self._master, self._prefix):
            self._forget(master, prefix)
        elif self._jobs.same(snapshot.jobs) and self._hosts.same(snapshot.hosts) and self._nodes.same(nodes):
            return True  # the very inputs of the last call (a quiet hint after a decision): nothing to take in
        return self._take(snapshot.jobs, snapshot.hosts, nodes)

    def advance(self, jobs: Noted[Job], hosts: Noted[Host], nodes: Noted[Node], master: str, prefix: str) -> bool:
        """Take in the changes since the last inputs alone (``Noted``: what ``update`` takes in of
        ``Revised`` inputs, without the objects), when no node is down. False: they do not revise
        the last inputs or are not modelled exactly; the tally is then empty (the caller then
        hands whole inputs to ``update``)."""
        if (master, prefix) != (self._master, self._prefix) or not (
            self._jobs.follows(jobs) and self._hosts.follows(hosts) and self._nodes.follows(nodes)
        ):
            self._forget(master, prefix)
            return False
        return self._take(jobs, hosts, nodes)

    def _take(self, jobs: Sequence[Job], hosts: Sequence[Host], nodes: Sequence[Node]) -> bool:
        """Take in what came and went in these inputs; False (and forgotten) when they are not
        modelled exactly."""
        hosts_taken = self._hosts.diff(hosts)
        records = self._nodes.diff(nodes)
        jobs_taken = self._jobs.diff(jobs)
        if (
            hosts_taken is None
            or records is None
            or jobs_taken is None
            or not self._apply(hosts_taken, records, jobs_taken)
        ):
            self._forget(self._master, self._prefix)
            return False
        return True

    def _apply(
        self,
        hosts: tuple[Sequence[Host], Sequence[Host]],
        records: tuple[Sequence[Node], Sequence[Node]],
        jobs: tuple[Sequence[Job], Sequence[Job]],
    ) -> bool:
        changed: set[str] = set()
        if not self._take_hosts(hosts, changed) or not self._take_records(records, changed):
            return False
        self._take_jobs(jobs, changed)
        changed.discard(self._master)
        entry, set_entry = self._entry, self._set
        for name in changed:
            set_entry(name, entry(name))
        return True

    def _take_hosts(self, hosts: tuple[Sequence[Host], Sequence[Host]], changed: set[str]) -> bool:
        gone, came = hosts
        by_name = self._host
        left: set[str] = set()  # the names of hosts that went, less those of hosts that came
        for h in gone:
            if by_name.get(h.name) is h:
                del by_name[h.name]
                changed.add(h.name)
                left.add(h.name)
        for h in came:
            if h.name in by_name:
                return False
            by_name[h.name] = h
            changed.add(h.name)
            if h.name in left:  # a host replaced by another of its name (its free slots)
                left.discard(h.name)
            else:
                self._count_name(h.name, 1)
        for name in left:
            self._count_name(name, -1)
        return True

    def _take_records(self, records: tuple[Sequence[Node], Sequence[Node]], changed: set[str]) -> bool:
        gone, came = records
        alive = self._alive
        for n in gone:
            if alive.get(n.name) is n:
                del alive[n.name]
                changed.add(n.name)
        for n in came:
            if n.state in ALIVE_STATES:
                if n.name in alive:
                    return False
                alive[n.name] = n
                changed.add(n.name)
        self._count_names(gone, came)
        return True

    def _count_names(self, gone: Sequence[Node], came: Sequence[Node]) -> None:
        """``_count_name`` for the names of the objects that went and came, netted: a name whose
        object was replaced by another of the same name leaves the numbers in use as they were."""
        if not gone and not came:
            return
        went, come = [obj.name for obj in gone], [obj.name for obj in came]
        if len(went) == len(come) and (went == come or sorted(went) == sorted(come)):
            return  # each replaced by another of its name (a host's free slots, a record's turn)
        steps: dict[str, int] = {}
        for name in went:
            steps[name] = steps.get(name, 0) - 1
        for name in come:
            steps[name] = steps.get(name, 0) + 1
        for name, step in steps.items():
            if step:
                self._count_name(name, step)

    def _take_jobs(self, jobs: tuple[Sequence[Job], Sequence[Job]], changed: set[str]) -> None:
        """Take in the jobs that went and came: the waiting ones, and the hosts the running ones
        are filed under (``changed``: those that started or stopped running any job); a running
        job that went or came goes to ``_stopped`` or ``_started`` too, in this one walk."""
        gone, came = jobs
        ran: dict[str, bool] = {}  # the hosts whose running jobs changed: whether they ran one before
        self._jobs_gone(gone, ran)
        self._jobs_came(came, ran)
        # A worker's entry reads whether it runs a job (``_entry``), not how many.
        running = self._running
        changed.update(on for on, before in ran.items() if (on in running) != before)

    def _jobs_gone(self, gone: Sequence[Job], ran: dict[str, bool]) -> None:
        pending, running, filed, stopped = self._pending, self._running, self._filed, self._stopped
        for j in gone:
            if j.phase is _WAITING:
                del pending[id(j)]
                self._ordered = None
                self._pending_slots -= j.slots * j.tasks
                self._pending_odd -= j.slots <= 0 or j.tasks <= 0
                continue  # (a waiting job is filed under no host)
            on = filed.pop(id(j), None)
            if on is not None:
                if on not in ran:
                    ran[on] = on in running
                count = running[on] - 1
                if count:
                    running[on] = count
                else:
                    del running[on]
                if stopped is not None:
                    stopped(j)

    def _jobs_came(self, came: Sequence[Job], ran: dict[str, bool]) -> None:
        pending, running, filed, started = self._pending, self._running, self._filed, self._started
        for j in came:
            if j.phase is _WAITING:
                pending[id(j)] = j
                self._ordered = None
                if j.submitted is not None and self._submits is not None:
                    heapq.heappush(self._submits, (j.submitted, id(j)))
                self._pending_slots += j.slots * j.tasks
                self._pending_odd += j.slots <= 0 or j.tasks <= 0
                continue
            on = started_host(j)
            if on is not None:
                filed[id(j)] = on
                if on not in ran:
                    ran[on] = on in running
                running[on] = running.get(on, 0) + 1
                if started is not None:
                    started(j, on)

    def _count_name(self, name: str, step: int) -> None:
        """Keep the node numbers in use (``new_names`` scans every host and record name): add
        ``step`` uses of ``name``'s number. The highest is found again only when ``new_names``
        asks after it went."""
        number = self._number_of.get(name, _UNSEEN)
        if number == _UNSEEN:
            if len(self._number_of) >= _NAMES_KEPT:  # a bound on names seen once, long gone
                self._number_of.clear()
            number = self._number_of[name] = node_number(name, self._prefix)
        if number is None:
            return
        uses = self._numbers.get(number, 0) + step
        if uses > 0:
            self._numbers[number] = uses
        else:
            self._numbers.pop(number, None)
        if step > 0:
            if self._highest is not None:
                self._highest = max(self._highest, number)
        elif uses <= 0 and number == self._highest:
            self._highest = None

    def _entry(self, name: str) -> _Entry | None:
        """The worker ``name`` as ``Worker`` reads it (``worker_state``), in the terms the peers'
        ``_count`` and ``_fit`` and elb's forecast read it."""
        node, host = self._alive.get(name), self._host.get(name)
        if host is None:
            if node is None:
                return None
            up, free, total, host_busy = False, 0, 0, False
        else:
            up, free, total, host_busy = host_numbers(host)
        booting, ready, busy, since = worker_state(node, up, host_busy, name in self._running)
        up_total, occupied = total if up else 0, occupies(booting, busy)
        if booting:
            return _new_entry((worker_slots(node, otherwise=0), None, None, up_total, None, occupied))
        if not ready:
            return _new_entry((None, None, None, up_total, None, occupied))
        room = (free, total)
        return _new_entry((None, room if free > 0 else None, since, up_total, room, occupied))

    def _set(self, name: str, entry: _Entry | None) -> None:
        old = self._entries.get(name)
        if old != entry:
            self._store(name, old or _VOID, entry)

    def _store(self, name: str, o: _Entry, entry: _Entry | None) -> None:
        """Set ``name``'s entry, which was ``o`` (``_VOID``: none) and differs."""
        if entry is None:
            del self._entries[name]
        else:
            self._entries[name] = entry
        e = entry or _VOID
        if o.up_total != e.up_total:
            self._up_total += e.up_total - o.up_total
        if o.busy != e.busy:
            self._busy += 1 if e.busy else -1
        name_bins = self._name_bins
        if name_bins.index is not None and (o.room != e.room or o.booting != e.booting):
            name_bins.due(name)
        if (o.booting is None) != (e.booting is None):
            if e.booting is None:
                del self.booting[name]
            else:
                self.booting[name] = None
        if o.idle_since != e.idle_since:
            self._idle_moved(name, o.idle_since, e.idle_since)

    def _idle_moved(self, name: str, was: float | None, since: float | None) -> None:
        """``name``'s idle since changed from ``was`` to ``since`` (None: not idle): the idle
        workers by name and by idle since, each once read."""
        idle = self._idle
        if idle is not None:
            if was is None:
                bisect.insort(idle, name)
            elif since is None:
                del idle[bisect.bisect_left(idle, name)]
        by_since = self._by_since
        if by_since is not None:
            if was is not None:
                del by_since[bisect.bisect_left(by_since, (was, name))]
            if since is not None:
                bisect.insort(by_since, (since, name))


_Ending = tuple[float, int, int]  # a running job's expected end (or start), a number to break ties, its id


class CapacityTally(WorkerTally):
    """A ``WorkerTally`` with what elb's policy reads besides (see the module's doc). One per
    policy object; ``slots_per_node`` is the size its forecast counts whole nodes in."""

    def __init__(self) -> None:
        self._whole = 1
        super().__init__()

    def _forget(self, master: str, prefix: str) -> None:
        super()._forget(master, prefix)
        self._bins = _KeptBins(_set_bin)  # ``bins``
        self._ready_count = 0  # the ready workers (the others in ``bins`` are booting)
        self._ends: list[_Ending] = []  # running jobs filed under a host with an expected end, by it
        self._starts: list[_Ending] = []  # running jobs filed under a host without one, by their start
        self._ending: dict[int, tuple[_Ending, Job, str]] = {}  # by job id: its place, the job, its host
        self._numbered = 0
        self._odd = 0  # running jobs of fewer than no slots (not modelled: ``update`` says False)
        self._idle_workers: tuple[IdleWorker, ...] | None = ()
        self._idle_made: dict[str, IdleWorker] = {}  # the last ones made, by name (reused while the record is the same)
        self._stopped, self._started = self._stop, self._start

    def update_for(  # noqa: PLR0917 (``update``'s inputs and the forecast's node size)
        self, snapshot: Snapshot, nodes: Sequence[Node], master: str, prefix: str, spn: int, down: Collection[str] = ()
    ) -> bool:
        """``update``, for a forecast in nodes of ``spn`` slots (another size: everything again)."""
        if spn != self._whole:
            self._whole = spn
            self._forget(master, prefix)
        if not self.update(snapshot, nodes, master, prefix, down):
            return False
        if self._odd:
            self._forget(master, prefix)
            return False
        return True

    # -- what a decision reads ------------------------------------------------------------------
    @property
    def bins(self) -> FreeIndex[Key]:
        """The bins a forecast packs on (a ``Packing`` reads them through, never changing them),
        by ``named``: each ready worker's (free, total) slots, and each booting one's (slots,
        slots) (its record's slots; unknown: the forecast's node size). Made at the first read,
        then brought up to date at each read by the workers whose bins changed since, each once
        (a forecast reads it only while jobs wait)."""
        return self._bins.read(self._entries, self._whole)

    def record(self, name: str) -> Node:
        """A managed worker's record."""
        return self._alive[name]

    def idle_workers(self) -> tuple[IdleWorker, ...]:
        """The managed idle workers by name, as a policy reads them (made again after a change)."""
        if self._idle_workers is None:
            made, alive = self._idle_made, self._alive
            out: list[IdleWorker] = []
            for name in self.idle:
                w = made.get(name)
                if w is None or w.node is not alive[name]:
                    w = IdleWorker(name, alive[name], self.idle_since(name))
                out.append(w)
            self._idle_workers = tuple(out)
            self._idle_made = {w.name: w for w in out}
        return self._idle_workers

    def idle_for(self, now: float, keep: float) -> tuple[IdleWorker, ...]:
        """The managed idle workers idle ``keep`` seconds or more at ``now`` (``now - since >=
        keep``), longest idle first: a prefix of ``idle_by_since``."""
        out: list[IdleWorker] = []
        for since, name in self.idle_by_since:
            if now - since < keep:
                break
            out.append(IdleWorker(name, self._alive[name], since))
        return tuple(out)

    def next_overdue(self, now: float, span: float) -> float:
        """``elb.core.policy.default._next_overdue`` at ``now`` for a horizon ``span`` ahead: the
        earliest of a requested end plus ``OVERDUE_GRACE``, and of a start plus ``span`` of a job
        without one, not before ``now``, of a job running on a ready worker; inf with none."""
        return min(
            self._first_ready(self._ends, now, OVERDUE_GRACE, span), self._first_ready(self._starts, now, span, span)
        )

    def _first_ready(self, places: list[_Ending], now: float, after: float, span: float) -> float:
        """The earliest ``overdue_at`` not before ``now`` of a job in ``places`` on a ready
        worker (its place is that time less ``after``)."""
        ending, entries = self._ending, self._entries
        for i in range(bisect.bisect_left(places, (now - after - 1.0,)), len(places)):
            _, job, host = ending[places[i][2]]
            entry = entries.get(host)
            if entry is not None and entry.ready is not None:
                at = overdue_at(job, span)
                if at >= now:
                    return at
        return math.inf

    def capacity(self, now: float, horizon: float, size: int) -> Capacity:
        """``elb.core.policy.forecast._capacity`` of the view at ``now`` by ``horizon``: the index
        of the ready and booting workers read through, the ready workers whose running jobs free
        slots by then as named bins over it, the nodes ending wide jobs free after them."""
        spn, ends, entries = self._whole, self._ends, self._entries
        earliest, latest, young = ending_window(now, horizon)  # ``ends_by``'s bounds, as the indexes are kept
        first = bisect.bisect_left(ends, (earliest,))
        last = bisect.bisect_right(ends, (latest, math.inf))
        starts = self._starts[bisect.bisect_left(self._starts, (young,)) :]
        gains: dict[str, int] = {}
        tail: list[Bin] = []
        freed = 0
        for _, _, key in ends[first:last] + starts:
            _, job, host = self._ending[key]
            entry = entries.get(host)
            if entry is None or entry.ready is None:
                continue
            k, slots = freed_by(job, spn, size)
            if k:
                tail.extend(Bin(None, spn, spn) for _ in range(k))
                freed += k * spn
            else:
                gains[host] = gains.get(host, 0) + slots
        over: list[Bin] = []
        for host, slots in gains.items():
            ready = entries[host].ready
            assert ready is not None
            free, total = ready
            after = min(total, free + slots)  # what each job's gain of min(its slots, total - free) adds up to
            freed += after - free
            over.append(Bin(host, after, total))
        return Capacity(tail, self._ready_count, len(self.booting), freed, self.bins, over)

    # -- bringing it up to date -----------------------------------------------------------------
    def _stop(self, j: Job) -> None:
        """A running job filed under a host went: out of its index (``_take_jobs``)."""
        found = self._ending.pop(id(j), None)
        if found is not None:
            places = self._starts if j.hard_runtime is None else self._ends
            del places[bisect.bisect_left(places, found[0])]
            self._odd -= j.total_slots < 0

    def _start(self, j: Job, host: str) -> None:
        """A running job filed under ``host`` came: into the index of its expected end, or of its
        start without one (``_take_jobs``)."""
        if j.started is not None:
            self._numbered += 1
            if j.hard_runtime is None:
                place, places = (j.started, self._numbered, id(j)), self._starts
            else:
                place, places = (j.started + j.hard_runtime, self._numbered, id(j)), self._ends
            bisect.insort(places, place)
            self._ending[id(j)] = (place, j, host)
            self._odd += j.total_slots < 0

    def _set(self, name: str, entry: _Entry | None) -> None:
        old = self._entries.get(name)
        if old == entry:  # the same facts; an idle worker's record may be another one
            if entry is not None and entry.idle_since is not None:
                self._idle_workers = None
            return
        o, e = old or _VOID, entry or _VOID
        self._store(name, o, entry)
        ready, bins = e.ready, self._bins
        if bins.index is not None and (ready != o.ready or e.booting != o.booting):
            bins.due(name)
        if (o.ready is None) != (ready is None):
            self._ready_count += 1 if ready is not None else -1
        if o.idle_since is not None or e.idle_since is not None:
            self._idle_workers = None  # an idle worker came, went or changed (its record)


@quick_init
@dataclass(frozen=True, slots=True)
class IdleWorker:
    """A managed worker that is ready and idle (its record, and since when: its entry's
    ``idle_since``), as elb's cost rule reads a ``Worker``."""

    name: str
    node: Node
    idle_since: float


@quick_init
@dataclass(frozen=True, slots=True)
class TallyView:
    """A ``CapacityTally`` just brought up to date, read at ``now``: what elb's policy reads of a
    ``ClusterView`` (the same values), until the tally's next update."""

    tally: CapacityTally
    now: float
    pending: tuple[Job, ...]
    slots_per_node: int

    @property
    def size(self) -> int:
        return self.tally.size

    @property
    def pending_slots(self) -> int:
        return self.tally.pending_slots

    @property
    def pending_plain(self) -> bool:
        return self.tally.pending_plain

    @property
    def booting(self) -> tuple[str, ...]:
        """The booting workers (their names, in the view's order)."""
        return tuple(sorted(self.tally.booting))

    def oldest_wait(self) -> float:
        return self.tally.oldest_wait(self.now)

    def nodes_for(self, jobs: Sequence[Job]) -> int:
        return nodes_for(jobs, self.slots_per_node)

    def capacity(self, horizon: float) -> Capacity:
        return self.tally.capacity(self.now, horizon, self.tally.size)
