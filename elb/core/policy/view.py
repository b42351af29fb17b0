"""A policy's view of the joined cluster state (``elb.core.state.ClusterState``): its workers, each
read once, and the waiting jobs in order.

Pure functions, and ``ViewCache``: the memory of the last state one policy object saw, which it
owns. Every policy (elb's and the peers') reads the cluster through this.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain, compress, count, repeat
from operator import attrgetter, eq, is_, is_not, mul
from typing import TypeVar, cast

from elb.core.frozen import maker, quick_init
from elb.core.gcpause import paused
from elb.core.model import ALIVE_STATES, NO_FLAGS, Host, Job, JobPhase, Node
from elb.core.naming import highest_number, names_after
from elb.core.state import ClusterState, JobsChange, idle_since, is_busy, serves, worker_names

_WAITING = JobPhase.WAITING  # a job the policy plans for (``Job.is_pending``)
_JOB_ID = attrgetter("job_id")
_SUBMITTED = attrgetter("submitted")
_SLOTS = attrgetter("slots")
_TASKS = attrgetter("tasks")


@quick_init
@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a policy reads off a ``Host`` (its properties, each a walk over its queues), once."""

    up: bool
    free: int  # free slots in usable queues
    total: int
    busy: bool  # runs a job or holds a reservation


def host_facts(host: Host) -> HostFacts:
    """What a policy reads off a host (``Worker.facts`` holds it for each worker)."""
    return HostFacts(*host_numbers(host))


def host_numbers(host: Host) -> tuple[bool, int, int, bool]:
    """``HostFacts``'s fields of a host (up, free, total, busy), without making one (a tally
    reads them at each change of a worker)."""
    queues = host.queues
    if len(queues) == 1 and queues[0].flags is NO_FLAGS:  # one queue, usable (a simulated host's): the same sums
        q = queues[0]
        used, reserved, total = q.slots_used, q.slots_reserved, q.slots_total
        return True, max(0, total - used - reserved), total, host.busy
    if all(q.flags is NO_FLAGS for q in queues):  # no flag: reachable and usable
        return (
            bool(queues),
            sum(max(0, q.slots_total - q.slots_used - q.slots_reserved) for q in queues),
            sum(q.slots_total for q in queues),
            host.busy,
        )
    return host.up, host.free_slots, host.slots_total, host.busy


class _LastNames:
    """What ``new_names`` worked out of the hosts' and the records' names (in their order) and a
    prefix: the highest number in use, a number read off each of a thousand names, and a function
    of those alone, replaced whole for other names or another prefix; and its last answer with
    its count and digits. A pass asks it of hosts and records whose names are most often the last
    pass's, for more than one count (the scaling's, a demand's one name)."""

    def __init__(self) -> None:
        self.key: tuple[list[str], list[str], str] | None = None
        self.highest = 0
        self.answer: tuple[tuple[int, int], tuple[str, ...]] | None = None


_LAST_NAMES = _LastNames()


def new_names(
    hosts: Sequence[Host], records: Sequence[Node], count: int, prefix: str = "node", digits: int = 3
) -> tuple[str, ...]:
    """``elb.core.naming.next_names`` over every name in use (the scheduler's hosts and elb's
    records; a name in both read once): the names after the highest number in use, which is the
    last call's when the names (compared in their order) and the prefix are (``_LastNames``); the
    last answer again when the count and digits are too."""
    key = ([h.name for h in hosts], [n.name for n in records], prefix)
    last = _LAST_NAMES
    if last.key != key:
        last.key, last.highest, last.answer = key, highest_number(set(key[0]).union(key[1]), prefix), None
    answer = last.answer
    if answer is not None and answer[0] == (count, digits):
        return answer[1]
    names = names_after(last.highest, count, prefix, digits)
    last.answer = ((count, digits), names)
    return names


@quick_init
@dataclass(frozen=True, slots=True)
class Worker:
    """One worker as a policy sees it: a node elb manages, with its ``ManagedNode``'s predicates
    read once (``Worker.of``), or an exec host elb does not manage (``Worker.unmanaged``)."""

    name: str
    node: Node | None  # None: an exec host elb does not manage (never removed by elb)
    host: Host | None  # None: not (yet) in the scheduler
    jobs: tuple[Job, ...]
    facts: HostFacts | None  # what the scheduler shows of its host (None: not in it)
    booting: bool  # elb's record says it is still being launched or provisioned
    ready: bool  # takes jobs (``ManagedNode.serves``; an unmanaged host: the scheduler reaches it)
    busy: bool  # runs a job or holds a reservation
    idle_since: float | None  # since when a managed worker has been idle (``ManagedNode.idle_since``)

    @property
    def idle(self) -> bool:
        """Ready and not busy."""
        return self.ready and not self.busy

    @property
    def occupied(self) -> bool:
        """Booting or busy (``occupies``)."""
        return occupies(self.booting, self.busy)

    @classmethod
    def of(cls, record: Node, host: Host | None, jobs: tuple[Job, ...], facts: HostFacts | None = None) -> Worker:
        """The worker of ``record`` with the scheduler's host of its name and the jobs started
        there (what ``ClusterState.managed`` joins), its predicates (``worker_state``) read off
        the host's facts once (a host's ``HostFacts`` are its ``up`` and ``busy``); ``facts``:
        ``host``'s, read already (a view before had the very same host)."""
        if facts is None and host is not None:
            facts = host_facts(host)
        state = worker_state(record, facts is not None and facts.up, facts is not None and facts.busy, bool(jobs))
        return cls(record.name, record, host, jobs, facts, *state)

    @classmethod
    def unmanaged(cls, host: Host, jobs: tuple[Job, ...]) -> Worker:
        facts = host_facts(host)
        return cls(host.name, None, host, jobs, facts, *worker_state(None, facts.up, facts.busy, bool(jobs)))


_worker = maker(Worker)  # (``elb.core.frozen.maker``: a view makes a worker of each node at each pass)


def worker_state(
    record: Node | None, up: bool, host_busy: bool, runs_job: bool
) -> tuple[bool, bool, bool, float | None]:
    """A worker's predicates, (booting, ready, busy, idle since), from its record (None: an exec
    host elb does not manage), whether the scheduler reaches its host and shows a slot used or
    reserved there, and whether a job is filed under it: the one reading that ``Worker`` and the
    tally's entries (``elb.core.policy.tally``) both take. ``ready`` is ``serves``, ``busy``
    ``is_busy``, the idle time ``idle_since``: of the record, the first three read its state
    alone."""
    booting = record is not None and record.state.booting
    ready = serves(record, up)
    busy = is_busy(runs_job, host_busy)
    return booting, ready, busy, idle_since(record, ready, busy)


def occupies(booting: bool, busy: bool) -> bool:
    """A worker ParallelCluster's rule counts as busy: booting (its demand may still be waiting),
    or busy."""
    return booting or busy


@dataclass(frozen=True, slots=True)
class ClusterView:
    now: float
    workers: tuple[Worker, ...]
    pending: tuple[Job, ...]  # eligible waiting jobs, oldest submission first
    slots_per_node: int
    # Slots the waiting jobs need (each job's ``total_slots``), and whether every one of them
    # asks for at least one slot and one task; worked out once with the view.
    pending_slots: int = field(init=False)
    pending_plain: bool = field(init=False)

    def __post_init__(self) -> None:
        slots, tasks = list(map(_SLOTS, self.pending)), list(map(_TASKS, self.pending))
        object.__setattr__(self, "pending_slots", sum(map(mul, slots, tasks)))
        object.__setattr__(self, "pending_plain", min(slots, default=1) > 0 and min(tasks, default=1) > 0)

    @classmethod
    def of_waiting(cls, now: float, workers: tuple[Worker, ...], waiting: Waiting, slots_per_node: int) -> ClusterView:
        """The view with ``waiting``'s jobs and totals (``Waiting``: what ``__post_init__`` works
        out of them, worked out already)."""
        view = object.__new__(cls)
        for name, value in (
            ("now", now),
            ("workers", workers),
            ("pending", waiting.pending),
            ("slots_per_node", slots_per_node),
            ("pending_slots", waiting.slots),
            ("pending_plain", waiting.plain),
        ):
            object.__setattr__(view, name, value)
        return view

    @property
    def size(self) -> int:
        """Workers that exist or are coming (booting, ready, draining); the master excluded."""
        return len(self.workers)

    @property
    def booting(self) -> tuple[Worker, ...]:
        return tuple(w for w in self.workers if w.booting)

    def oldest_wait(self) -> float:
        """Seconds the oldest eligible job (by submission time) has waited; 0 with none."""
        return oldest_wait(self.pending, self.now)

    def nodes_for(self, jobs: Sequence[Job]) -> int:
        """Whole nodes these jobs need (``nodes_for``)."""
        return nodes_for(jobs, self.slots_per_node)


def nodes_for(jobs: Sequence[Job], spn: int) -> int:
    """Whole nodes of ``spn`` slots these jobs need: wide (PE) jobs take whole nodes, narrow ones pack."""
    wide = 0
    narrow = 0
    for j in jobs:
        if j.slots > spn:
            wide += math.ceil(j.slots / spn) * j.tasks
        else:
            narrow += j.total_slots
    return wide + math.ceil(narrow / spn)


def oldest_wait(jobs: Sequence[Job], now: float) -> float:
    """Seconds the oldest of ``jobs`` (by submission time) has waited at ``now``; 0 with none."""
    times = [j.submitted for j in jobs if j.submitted is not None]
    return max(0.0, now - min(times)) if times else 0.0


def infer_slots_per_node(hosts: Sequence[Host], nodes: Sequence[Node], configured: int | None) -> int:
    """Configured value, else the most common worker size seen (the scheduler's, then node records), else 1."""
    if configured:
        return configured
    seen = Counter(h.slots_total for h in hosts if h.slots_total > 0)
    if seen:
        return seen.most_common(1)[0][0]
    known = Counter(n.slots for n in nodes if n.slots)
    if known:
        return int(known.most_common(1)[0][0] or 1)
    return 1


def cluster_view(
    state: ClusterState,
    master: str,
    slots_per_node: int | None = None,
    *,
    reuse: Mapping[str, Worker] | None = None,
    waiting: Waiting | None = None,
) -> ClusterView:
    """The workers of the joined ``state``: its records of nodes that are alive (booting, ready,
    draining), each joined with its host and jobs as ``ClusterState.managed`` joins them
    (``Worker.of``), and the scheduler's other hosts (``worker_names``): a node that is down is
    none, and the master never is. ``reuse``: workers of an earlier view; one whose record, host
    and jobs are the very same objects is taken as is, one whose host alone is keeps its facts.
    One whose host and jobs are the very same, and whose record is in the same state, keeps
    its predicates but the idle time (``_joined``). ``waiting``: ``waiting_of`` the state's
    jobs, worked out already."""
    hosts, jobs_on = state.hosts, state.jobs_on
    alive = {n.name: n for n in state.records if n.state in ALIVE_STATES and n.name != master}
    last = reuse or {}
    workers: list[Worker] = []
    for name in _in_order(worker_names(hosts.keys(), alive.keys(), master, state.down), last):
        node, host, jobs = alive.get(name), hosts.get(name), jobs_on.get(name, ())
        w = last.get(name)
        if w is None or w.node is not node or w.host is not host or w.jobs != jobs:
            w = _joined(node, host, jobs, w)
        workers.append(w)
    spn = slots_per_node or infer_slots_per_node(
        [h for n, h in hosts.items() if n != master], list(alive.values()), slots_per_node
    )
    if waiting is None:
        pending = oldest_first([j for j in state.snapshot.jobs if j.phase is _WAITING], state.now)  # Job.is_pending
        return ClusterView(state.now, tuple(workers), tuple(pending), spn)
    return ClusterView.of_waiting(state.now, tuple(workers), waiting, spn)


def _in_order(names: set[str], last: Mapping[str, Worker]) -> list[str]:
    """``names`` sorted; when they are the very names of ``last`` (an earlier view's workers, as
    from one pass to the next), sorted in the order of ``last``, in which they are sorted already
    (a view's order) and which the sort then checks in one walk."""
    return sorted(last) if last.keys() == names else sorted(names)


def _joined(node: Node | None, host: Host | None, jobs: tuple[Job, ...], last: Worker | None) -> Worker:
    """The worker of a record (None: a host elb does not manage), its host and jobs, from
    ``last`` (the worker of that name in an earlier view, or None) where it can: with a host of
    the same queues (``_same_facts``), its facts; with the same jobs too and a record in the same
    state (a pass's records are new when it saw the node up or busy), its predicates but the
    idle time, which reads the record's times (``worker_state``)."""
    if node is None:
        assert host is not None
        return Worker.unmanaged(host, jobs)
    if last is None or not _same_facts(last.host, host):
        return Worker.of(node, host, jobs)
    if last.node is not None and last.jobs == jobs and last.node.state is node.state:
        ready, busy = last.ready, last.busy
        idle = idle_since(node, ready, busy)
        return _worker(node.name, node, host, jobs, last.facts, last.booting, ready, busy, idle)
    return Worker.of(node, host, jobs, last.facts)


def _same_facts(before: Host | None, host: Host | None) -> bool:
    """Whether ``host``'s ``HostFacts`` are ``before``'s: the very same host, or both of equal
    queues (the facts are read off the queues alone, and a scheduler's read may make each host
    anew while its queues are unchanged)."""
    return before is host or (before is not None and host is not None and before.queues == host.queues)


def oldest_first(jobs: list[Job], now: float) -> list[Job]:
    """The jobs by submission time (``now`` for none), then job number, each tie in the order
    given: sorted by number, then (stably) by time, which is that order, with keys read in C
    (a scheduler lists entries mostly by number, so the first sort is nearly free)."""
    _sort_oldest_first(jobs, now)
    return jobs


def _sort_oldest_first(jobs: list[Job], now: float) -> bool:
    """``oldest_first`` in place; whether a job has no submission time (the order then depends on ``now``)."""
    jobs.sort(key=_JOB_ID)
    if None in map(_SUBMITTED, jobs):
        jobs.sort(key=lambda j: j.submitted if j.submitted is not None else now)
        return True
    jobs.sort(key=_SUBMITTED)
    return False


@dataclass(frozen=True, slots=True)
class Waiting:
    """The waiting jobs of a snapshot's ``jobs`` in the view's order (``oldest_first``), with what
    ``ClusterView`` counts of them, kept for the next snapshot's (``waiting_of``)."""

    jobs: tuple[Job, ...]  # the snapshot's jobs
    pending: tuple[Job, ...]  # its waiting jobs, oldest first
    slots: int  # ``ClusterView.pending_slots``
    plain: bool  # ``ClusterView.pending_plain``
    timeless: bool  # a waiting job has no submission time: the order depends on ``now``
    # ``pending`` in blocks (``_Order``), for the next snapshot's order to take (the one derivation
    # from it takes it out and changes it; empty: made of ``pending`` when asked).
    order: list[_Order] = field(default_factory=list, compare=False, repr=False)


CHANGED_MOST = 4  # a snapshot's order is worked out from the last one's when at most 1/4 of its jobs changed
SEEK_JOBS = 4_096  # how far on in either snapshot a job out of place is looked for
_WINDOWS = (8, 64, 512, SEEK_JOBS)  # the stretches looked through for it, in turn


def waiting_of(
    jobs: tuple[Job, ...], now: float, last: Waiting | None = None, change: JobsChange | None = None
) -> Waiting:
    """The waiting jobs of ``jobs`` in the view's order, and their totals. ``last``: those of an
    earlier snapshot (another tuple of jobs, read at another time): when most of the jobs are
    the very same objects in the same order, the order is the last one's less the waiting jobs
    that left, with the new ones put in their places (``_since``): the order the sort gives (a
    job without a submission time, or a new job whose place among the others ties, is sorted
    anew with them all). ``change``: how ``jobs`` differ from the jobs their producer read
    before; when those are ``last``'s, the jobs that left and came are its, and the two tuples
    are not walked (``_changes``)."""
    if last is not None and not last.timeless and type(jobs) is tuple and type(last.jobs) is tuple:
        if jobs is last.jobs:
            return last
        found = _since(jobs, last, change)
        if found is not None:
            return found
    pending = [j for j in jobs if j.phase is _WAITING]  # Job.is_pending
    timeless = _sort_oldest_first(pending, now)
    slots, tasks = list(map(_SLOTS, pending)), list(map(_TASKS, pending))
    plain = min(slots, default=1) > 0 and min(tasks, default=1) > 0
    return Waiting(jobs, tuple(pending), sum(map(mul, slots, tasks)), plain, timeless)


def _same_run(new: Sequence[Job], i: int, old: Sequence[Job], j: int) -> int:
    """How many of ``new`` from ``i`` are, in their order, the very objects of ``old`` from ``j``."""
    limit = min(len(new) - i, len(old) - j)
    done, width = 0, 64
    while done < limit:
        width = min(width, limit - done)
        ours, theirs = new[i + done : i + done + width], old[j + done : j + done + width]
        miss = next(compress(count(), map(is_not, ours, theirs)), None)
        if miss is not None:
            return done + miss
        done += width
        width *= 2
    return done


def _replaced(new: Sequence[Job], i: int, old: Sequence[Job], j: int, width: int) -> int | None:
    """The least ``k`` under ``width`` for which ``new[i + k]`` is ``old[j + k]``: how many jobs
    from ``i`` took the places of as many from ``j``; None when none is under ``width``."""
    return next(compress(count(1), map(is_, new[i + 1 : i + width], old[j + 1 : j + width])), None)


def _find(job: Job, among: Sequence[Job], start: int, stop: int) -> int | None:
    """Where ``job`` itself is in ``among[start:stop]`` (the first place), None when it is not."""
    return next(compress(count(start), map(is_, among[start:stop], repeat(job))), None)


def _changes(new: tuple[Job, ...], old: tuple[Job, ...]) -> tuple[list[Job], list[Job]] | None:
    """The jobs of ``old`` that are not in ``new`` and those of ``new`` not in ``old``, each
    where it is, from a walk of the two side by side: stretches of the very same objects are
    passed over; at a job out of place the other side is looked through, a little further each
    time, for the one that is not (jobs left, or came, before it), and a job replaced by another
    is both, as is a stretch of jobs replaced by as many others (the entries of a job over several
    nodes), and a job that moved is one that left and one that came. None when more than
    ``len(new) // CHANGED_MOST`` changed, or past looking through half as many jobs as ``new``
    has (so that a snapshot of other jobs costs little before it is sorted)."""
    n, m = len(new), len(old)
    most, budget = n // CHANGED_MOST, n // 2
    removed: list[Job] = []
    added: list[Job] = []
    i = j = 0
    while i < n and j < m:
        run = _same_run(new, i, old, j)
        i += run
        j += run
        if i >= n or j >= m:
            break
        replaced = 1  # jobs in place of as many others, when neither side's job is found on the other
        for width in _WINDOWS:
            at = _find(new[i], old, j + 1, j + width)
            if at is not None:  # old's jobs up to it left
                removed += old[j:at]
                j = at
                break
            at = _find(old[j], new, i + 1, i + width)
            if at is not None:  # new's jobs up to it came
                added += new[i:at]
                i = at
                break
            budget -= 2 * width
            if width == _WINDOWS[0]:
                stretch = _replaced(new, i, old, j, width)
                if stretch is not None:  # jobs in place of as many others (a job over several nodes)
                    replaced = stretch
                    break
        else:
            budget = -1
        if at is None:  # in place of the others (or further apart than looked)
            removed += old[j : j + replaced]
            added += new[i : i + replaced]
            i += replaced
            j += replaced
        if budget < 0 or len(removed) + len(added) > most:
            return None
    removed += old[j:]
    added += new[i:]
    return (removed, added) if len(removed) + len(added) <= most else None


def _given(
    change: JobsChange, new: tuple[Job, ...], old: tuple[Job, ...]
) -> tuple[Sequence[Job], Sequence[Job]] | None:
    """What ``_changes(new, old)`` answers, from ``change`` (``change.after`` is ``new`` and its
    ``before`` ``old``): the jobs that left and came, or None when more than ``len(new) //
    CHANGED_MOST`` did (the bound of the walk's answer)."""
    if len(change.left) + len(change.came) > len(new) // CHANGED_MOST:
        return None
    return change.left, change.came


def _since(jobs: tuple[Job, ...], last: Waiting, change: JobsChange | None = None) -> Waiting | None:
    """``waiting_of(jobs)`` from ``last``'s (see there), or None when it is sorted anew: more
    than a quarter of the jobs changed, a new waiting job has no submission time or ties with
    another (its place among them is its place in ``jobs``), a job that left is not at its
    place, or a job had no slot or no task (``pending_plain``). ``change``: the jobs that left
    and came, taken when it is of ``last``'s jobs and ``jobs`` (else they are found by
    ``_changes``). The order's blocks are ``last``'s, taken out of it and changed (made of its
    jobs when another derivation took them)."""
    if change is not None and change.after is jobs and change.before is last.jobs:
        changes = _given(change, jobs, last.jobs)
    else:
        changes = _changes(jobs, last.jobs)
    if changes is None or not last.plain:
        return None
    removed = [j for j in changes[0] if j.phase is _WAITING]
    added = [j for j in changes[1] if j.phase is _WAITING]
    if not removed and not added:
        return Waiting(jobs, last.pending, last.slots, last.plain, False, last.order)
    if None in map(_SUBMITTED, added):
        return None
    order = last.order.pop() if last.order else _Order(last.pending)
    if not (order.remove(removed) and order.insert(added)):
        return None
    slots = last.slots - sum(j.slots * j.tasks for j in removed) + sum(j.slots * j.tasks for j in added)
    plain = all(j.slots > 0 and j.tasks > 0 for j in added)
    return Waiting(jobs, order.jobs(), slots, plain, False, [order])


ORDER_BLOCK = 256  # waiting jobs a block of ``_Order`` is made of (split past twice as many)


class _Order:
    """Waiting jobs in the view's order (each with a submission time: by it, then by number),
    in blocks of about ``ORDER_BLOCK`` jobs, each with their submission times, and each block's
    last time: a job that leaves or comes changes its block alone (a bisection finds it), so a
    snapshot's order costs what changed and one copy of the order (``jobs``), where a list
    would be copied around each job that left or came. A block's times are an ``array`` of
    doubles: a bisection reads them side by side, not each from its float object over the heap."""

    __slots__ = ("blocks", "lasts", "times")

    def __init__(self, pending: Sequence[Job]) -> None:
        times = array("d", cast("list[float]", list(map(_SUBMITTED, pending))))
        self.blocks = [list(pending[i : i + ORDER_BLOCK]) for i in range(0, len(pending), ORDER_BLOCK)]
        self.times: list[array[float]] = [times[i : i + ORDER_BLOCK] for i in range(0, len(times), ORDER_BLOCK)]
        self.lasts = [block[-1] for block in self.times]

    def jobs(self) -> tuple[Job, ...]:
        """The jobs, in order."""
        return tuple(chain.from_iterable(self.blocks))

    def _place(self, when: float, number: int) -> tuple[int, int]:
        """Where a job submitted at ``when`` of number ``number`` goes (a block and a place in it,
        the block past the last at the end): before the first job of a greater (submission
        time, number), or at the first of the same."""
        lasts, times = self.lasts, self.times
        b = bisect_left(lasts, when)
        if b == len(lasts):
            return b, 0
        block, jobs = times[b], self.blocks[b]
        at = bisect_left(block, when)
        while True:
            while at < len(block) and block[at] == when and jobs[at].job_id < number:
                at += 1
            if at < len(block) or b + 1 == len(lasts) or times[b + 1][0] != when:
                return b, at
            b, at = b + 1, 0  # (the jobs of that time and a lower number go on in the next block)
            block, jobs = times[b], self.blocks[b]

    def remove(self, removed: Sequence[Job]) -> bool:
        """Takes each of ``removed`` out of its place; False when one is not there (a tie before it)."""
        blocks, times, lasts = self.blocks, self.times, self.lasts
        for job, when in zip(removed, map(_SUBMITTED, removed), strict=True):
            b = bisect_left(lasts, when)
            if b == len(blocks):
                return False
            block, block_times = blocks[b], times[b]
            at = bisect_left(block_times, when)
            if block[at] is not job:  # (not the first of its time: ``_place`` walks the ties to it)
                b, at = self._place(when, job.job_id)
                if b == len(blocks) or at == len(blocks[b]) or blocks[b][at] is not job:
                    return False
                block, block_times = blocks[b], times[b]
            del block[at], block_times[at]
            if not block:
                del blocks[b], times[b], lasts[b]
            elif at == len(block):
                lasts[b] = block_times[-1]
        return True

    def insert(self, added: list[Job]) -> bool:
        """Puts each of ``added`` (each with a submission time) in its place; False at a tie (two
        jobs of the same submission time and number: the place of each is its place in the
        snapshot's jobs)."""
        added.sort(key=_JOB_ID)
        added.sort(key=_SUBMITTED)
        numbers, when = list(map(_JOB_ID, added)), list(map(_SUBMITTED, added))
        keys = list(zip(when, numbers, strict=True))
        if any(map(eq, keys, keys[1:])):
            return False  # (two new jobs tie)
        blocks, times, lasts = self.blocks, self.times, self.lasts
        for job, t, number in zip(added, when, numbers, strict=True):
            b = bisect_left(lasts, t)
            if b < len(lasts):
                block_times = times[b]
                at = bisect_left(block_times, t)
                if block_times[at] == t:  # after the jobs of that time and a lower number (``_place``)
                    b, at = self._place(t, number)
                    block_times = times[b]
                    if at < len(block_times) and block_times[at] == t and blocks[b][at].job_id == number:
                        return False  # (a new job ties one there)
                block = blocks[b]
            else:  # past every job: at the end of the last block
                if not blocks:
                    blocks.append([])
                    times.append(array("d"))
                    lasts.append(t)
                b = len(blocks) - 1
                block, block_times = blocks[b], times[b]
                at = len(block)
            block.insert(at, job)
            block_times.insert(at, t)
            if at == len(block) - 1:
                lasts[b] = t
            if len(block) > 2 * ORDER_BLOCK:
                half = len(block) // 2
                blocks[b : b + 1] = [block[:half], block[half:]]
                times[b : b + 1] = [block_times[:half], block_times[half:]]
                lasts[b : b + 1] = [block_times[half - 1], block_times[-1]]
        return True


T = TypeVar("T")


class ViewCache:
    """What a policy object derives from one cluster state, kept for its next call on the very
    same inputs: a pass calls ``decide`` then ``quiet_until`` on the same values, and a simulator
    hands the same (immutable) tuples again while nothing changes.

    Each policy object owns one (a field made with it), so nothing is shared between policies or
    kept at module level. It holds the inputs it compares, so a reference compared with ``is`` is
    a live object, never a recycled id; a hit is exactly what would be computed again. A view of
    a different state replaces everything: the memory is one state's worth.
    """

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._view: ClusterView | None = None
        self._timeless = False  # a waiting job of the kept view has no submission time: ordered by ``now``
        self._workers: dict[str, Worker] = {}
        self._waiting: Waiting | None = None  # the kept view's waiting jobs (``waiting_of``)
        self._derived: dict[str, tuple[tuple[object, ...], object]] = {}

    def view(self, state: ClusterState, master: str, slots_per_node: int | None) -> ClusterView:
        """``cluster_view`` of ``state``, built again only when its records, hosts or jobs changed."""
        now = state.now
        key = (state.snapshot.jobs, state.snapshot.hosts, state.records, state.down, master, slots_per_node)
        old = self._view
        if (
            old is not None
            and self._key is not None
            and all(a is b for a, b in zip(self._key, key, strict=True))
            and not self._timeless
        ):
            return old if old.now == now else replace(old, now=now)
        # The waiting order (as long as the queue) and the workers live until the next state's view:
        # set aside from the collector's walks as made (``elb.core.gcpause``), as a read's jobs are,
        # not walked by the young generation's next collection, the whole order's references each time.
        with paused(keep=True):
            waiting = waiting_of(state.snapshot.jobs, now, self._waiting, state.change)
            view = cluster_view(state, master, slots_per_node, reuse=self._workers, waiting=waiting)
        self._workers = {w.name: w for w in view.workers}
        self._key, self._view, self._waiting = key, view, waiting
        self._timeless = waiting.timeless
        return view

    def derived(self, name: str, key: tuple[object, ...], make: Callable[[], T]) -> T:
        """``make()``, kept under ``name`` while every part of ``key`` is the very same object."""
        hit = self._derived.get(name)
        if hit is not None and len(hit[0]) == len(key) and all(a is b for a, b in zip(hit[0], key, strict=True)):
            return hit[1]  # type: ignore[return-value]
        value = make()
        self._derived[name] = (key, value)
        return value
