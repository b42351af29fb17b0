"""A policy's view of the cluster: SGE's hosts joined with elb's node records.

Pure functions only; every policy (elb's and the peers') reads the cluster through this.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from elb.model import Host, Job, Node, NodeState, Snapshot
from elb.naming import next_names

_ALIVE = frozenset(s for s in NodeState if s.alive)
_BOOTING = frozenset(s for s in NodeState if s.booting)


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a policy reads off a ``Host`` (its properties, each a walk over its queues), once."""

    up: bool
    free: int  # free slots in usable queues
    total: int
    busy: bool  # runs a job or holds a reservation


# Memo per (immutable) Host object: a simulator and a steady cluster hand the same Host objects
# to pass after pass, so each is read once. Holding the Host keeps its id from being reused.
_HOST_FACTS: dict[int, tuple[Host, HostFacts]] = {}
_HOST_FACTS_MAX = 1 << 14  # a few passes of a 5,000-host cluster; then it starts over


def host_facts(host: Host) -> HostFacts:
    hit = _HOST_FACTS.get(id(host))
    if hit is not None and hit[0] is host:
        return hit[1]
    queues = host.queues
    if all(not q.states for q in queues):  # no state letter: reachable and usable
        facts = HostFacts(
            bool(queues),
            sum(max(0, q.slots_total - q.slots_used - q.slots_reserved) for q in queues),
            sum(q.slots_total for q in queues),
            any(q.slots_used > 0 or q.slots_reserved > 0 for q in queues),
        )
    else:
        facts = HostFacts(host.up, host.free_slots, host.slots_total, host.busy)
    if len(_HOST_FACTS) >= _HOST_FACTS_MAX:
        _HOST_FACTS.clear()
    _HOST_FACTS[id(host)] = (host, facts)
    return facts


def new_names(
    snapshot: Snapshot, nodes: Sequence[Node], count: int, prefix: str = "node", digits: int = 3
) -> tuple[str, ...]:
    """``elb.naming.next_names`` over every name in use (SGE's hosts and elb's records), with a
    scan for the highest number that needs no regular expression per name."""
    cut = len(prefix)
    highest = 0
    for name in [h.name for h in snapshot.hosts] + [n.name for n in nodes]:
        if name.startswith(prefix) and name[cut:].isascii() and name[cut:].isdigit():
            highest = max(highest, int(name[cut:]))
    return next_names([f"{prefix}{highest}"] if highest else [], count, prefix, digits)


@dataclass(frozen=True, slots=True)
class Worker:
    """One worker as a policy sees it; what policies ask of it is worked out once, when it is made."""

    name: str
    node: Node | None  # None: an exec host elb does not manage (never removed by elb)
    host: Host | None  # None: not (yet) in SGE
    jobs: tuple[Job, ...]
    booting: bool = field(init=False)  # elb's record says it is still being launched or provisioned
    ready: bool = field(init=False)  # up in SGE, and READY in elb's record if it has one
    idle: bool = field(init=False)  # ready, runs no job and holds no reservation

    def __post_init__(self) -> None:
        node, host = self.node, self.host
        facts = host_facts(host) if host is not None else None
        ready = (node is None or node.state is NodeState.READY) and facts is not None and facts.up
        object.__setattr__(self, "booting", node is not None and node.state in _BOOTING)
        object.__setattr__(self, "ready", ready)
        object.__setattr__(self, "idle", ready and not self.jobs and not (facts is not None and facts.busy))


@dataclass(frozen=True, slots=True)
class ClusterView:
    now: float
    workers: tuple[Worker, ...]
    pending: tuple[Job, ...]  # eligible waiting jobs, oldest submission first
    slots_per_node: int

    @property
    def size(self) -> int:
        """Workers that exist or are coming (booting, ready, draining); the master excluded."""
        return len(self.workers)

    @property
    def booting(self) -> tuple[Worker, ...]:
        return tuple(w for w in self.workers if w.booting)

    @property
    def pending_slots(self) -> int:
        return sum(j.total_slots for j in self.pending)

    def oldest_wait(self) -> float:
        """Seconds the oldest eligible job (by submission time) has waited; 0 with none."""
        times = [j.submitted for j in self.pending if j.submitted is not None]
        return max(0.0, self.now - min(times)) if times else 0.0

    def nodes_for(self, jobs: Sequence[Job]) -> int:
        """Whole nodes these jobs need: wide (PE) jobs take whole nodes, narrow ones pack."""
        spn = self.slots_per_node
        wide = 0
        narrow = 0
        for j in jobs:
            if j.slots > spn:
                wide += math.ceil(j.slots / spn) * j.tasks
            else:
                narrow += j.total_slots
        return wide + math.ceil(narrow / spn)


def infer_slots_per_node(hosts: Sequence[Host], nodes: Sequence[Node], configured: int | None) -> int:
    """Configured value, else the most common worker size seen (SGE, then node records), else 1."""
    if configured:
        return configured
    seen = Counter(h.slots_total for h in hosts if h.slots_total > 0)
    if seen:
        return seen.most_common(1)[0][0]
    known = Counter(n.slots for n in nodes if n.slots)
    if known:
        return int(known.most_common(1)[0][0] or 1)
    return 1


# The workers of the last view built (per master name): one generation, so memory stays bounded.
_LAST_WORKERS: dict[str, dict[str, Worker]] = {}


def cluster_view(
    snapshot: Snapshot,
    nodes: Sequence[Node],
    master: str,
    now: float,
    slots_per_node: int | None = None,
) -> ClusterView:
    """Join SGE's hosts with elb's records. The master is never a worker."""
    by_host: dict[str, list[Job]] = {}
    for j in snapshot.jobs:
        h = j.host
        if h is not None and j.state not in ("qw", "hqw"):
            by_host.setdefault(h, []).append(j)
    hosts = {h.name: h for h in snapshot.hosts if h.name != master}
    alive = {n.name: n for n in nodes if n.state in _ALIVE and n.name != master}
    # Workers whose record, host and jobs are the very same objects as in the last view are reused.
    last = _LAST_WORKERS.get(master, {})
    workers: list[Worker] = []
    for name in sorted(set(hosts) | set(alive)):
        node, host, jobs = alive.get(name), hosts.get(name), tuple(by_host.get(name, ()))
        w = last.get(name)
        if w is None or w.node is not node or w.host is not host or w.jobs != jobs:
            w = Worker(name, node, host, jobs)
        workers.append(w)
    _LAST_WORKERS.clear()
    _LAST_WORKERS[master] = {w.name: w for w in workers}
    pending = sorted(
        (j for j in snapshot.jobs if j.is_pending),
        key=lambda j: (j.submitted if j.submitted is not None else now, j.job_id),
    )
    spn = infer_slots_per_node(list(hosts.values()), list(alive.values()), slots_per_node)
    return ClusterView(now, tuple(workers), tuple(pending), spn)
