"""A policy's view of the joined cluster state (``elb.core.state.ClusterState``): its workers, each
read once, and the waiting jobs in order.

Pure functions, and ``ViewCache``: the memory of the last state one policy object saw, which it
owns. Every policy (elb's and the peers') reads the cluster through this.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter, mul
from typing import TypeVar

from elb.core.frozen import quick_init
from elb.core.model import NO_FLAGS, Host, Job, JobPhase, Node, NodeState
from elb.core.naming import next_names
from elb.core.state import ClusterState, ManagedNode, idle_since, is_busy, serves, worker_names

_ALIVE = frozenset(s for s in NodeState if s.alive)
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


def new_names(
    hosts: Sequence[Host], records: Sequence[Node], count: int, prefix: str = "node", digits: int = 3
) -> tuple[str, ...]:
    """``elb.core.naming.next_names`` over every name in use (the scheduler's hosts and elb's records)."""
    return next_names([h.name for h in hosts] + [n.name for n in records], count, prefix, digits)


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
    def of(cls, m: ManagedNode) -> Worker:
        """``m``'s predicates (``worker_state``) read off its host's facts once (a host's
        ``HostFacts`` are its ``up`` and ``busy``)."""
        host, record, jobs = m.host, m.record, m.jobs
        facts = host_facts(host) if host is not None else None
        state = worker_state(record, facts is not None and facts.up, facts is not None and facts.busy, bool(jobs))
        return cls(record.name, record, host, jobs, facts, *state)

    @classmethod
    def unmanaged(cls, host: Host, jobs: tuple[Job, ...]) -> Worker:
        facts = host_facts(host)
        return cls(host.name, None, host, jobs, facts, *worker_state(None, facts.up, facts.busy, bool(jobs)))


def worker_state(
    record: Node | None, up: bool, host_busy: bool, runs_job: bool
) -> tuple[bool, bool, bool, float | None]:
    """A worker's predicates, (booting, ready, busy, idle since), from its record (None: an exec
    host elb does not manage), whether the scheduler reaches its host and shows a slot used or
    reserved there, and whether a job is filed under it: the one reading that ``Worker`` and the
    tally's entries (``elb.core.policy.tally``) both take. ``ready`` is ``serves``, ``busy``
    ``is_busy``, the idle time ``idle_since``."""
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
    state: ClusterState, master: str, slots_per_node: int | None = None, *, reuse: Mapping[str, Worker] | None = None
) -> ClusterView:
    """The workers of the joined ``state``: its records of nodes that are alive (booting, ready,
    draining), each read through its ``ManagedNode``, and the scheduler's other hosts
    (``worker_names``): a node that is down is none, and the master never is. ``reuse``: workers
    of an earlier view; one whose record, host and jobs are the very same objects is taken as is."""
    hosts, jobs_on = state.hosts, state.jobs_on
    alive = {n.name: n for n in state.records if n.state in _ALIVE and n.name != master}
    last = reuse or {}
    workers: list[Worker] = []
    for name in sorted(worker_names(hosts.keys(), alive.keys(), master, state.down)):
        node, host, jobs = alive.get(name), hosts.get(name), jobs_on.get(name, ())
        w = last.get(name)
        if w is None or w.node is not node or w.host is not host or w.jobs != jobs:
            if node is not None:
                w = Worker.of(state.managed(node))
            else:
                assert host is not None
                w = Worker.unmanaged(host, jobs)
        workers.append(w)
    pending = oldest_first([j for j in state.snapshot.jobs if j.phase is _WAITING], state.now)  # Job.is_pending
    spn = infer_slots_per_node([h for n, h in hosts.items() if n != master], list(alive.values()), slots_per_node)
    return ClusterView(state.now, tuple(workers), tuple(pending), spn)


def oldest_first(jobs: list[Job], now: float) -> list[Job]:
    """The jobs by submission time (``now`` for none), then job number, each tie in the order
    given: sorted by number, then (stably) by time, which is that order, with keys read in C
    (a scheduler lists entries mostly by number, so the first sort is nearly free)."""
    jobs.sort(key=_JOB_ID)
    if None in map(_SUBMITTED, jobs):
        jobs.sort(key=lambda j: j.submitted if j.submitted is not None else now)
    else:
        jobs.sort(key=_SUBMITTED)
    return jobs


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
        view = cluster_view(state, master, slots_per_node, reuse=self._workers)
        self._workers = {w.name: w for w in view.workers}
        self._key, self._view = key, view
        self._timeless = None in map(_SUBMITTED, view.pending)
        return view

    def derived(self, name: str, key: tuple[object, ...], make: Callable[[], T]) -> T:
        """``make()``, kept under ``name`` while every part of ``key`` is the very same object."""
        hit = self._derived.get(name)
        if hit is not None and len(hit[0]) == len(key) and all(a is b for a, b in zip(hit[0], key, strict=True)):
            return hit[1]  # type: ignore[return-value]
        value = make()
        self._derived[name] = (key, value)
        return value
