"""A plain event-driven replay of a job log under a cluster's scaling policy: the yardstick, and a
second opinion, for ``elb simulate``'s replays (``benchmarks/bench_replay_scale.py``).

It shares no code with elb: its own reader of the Standard Workload Format, a heap of events
(job ends, nodes becoming ready) and the log's submissions in order, strict FIFO dispatch, and
each policy as one function of the replay's state. It is meant to be read and checked in
minutes, and it models what ``elb simulate --dispatch fifo`` replays:

- nodes of ``spn`` slots, named by number (node001 ...), up ``boot`` seconds after their launch,
  billed per second with a 60 s minimum from launch to removal; the ones still up when the last
  job ends are billed to then; a new node takes the number after the highest one up;
- FIFO: the oldest waiting job starts as soon as it fits, the others wait behind it. A job of at
  most a node's slots goes on the lowest-numbered ready node with room for it; a wider one on
  ceil(slots / spn) whole empty nodes, the lowest-numbered;
- at each instant the jobs that end, then the nodes that become ready, then the submissions,
  then dispatch; the policy decides at polls every ``interval`` seconds from the first
  submission (Slurm's power saving every 10 s, the others every 60 s), after the events up to
  then; its removals first (a node running a job is never removed), then its launches (never
  beyond ``max_nodes``), then dispatch again;
- a poll after which nothing was done is followed by the first poll at or after the next event
  or the policy's own next deadline (an idle node's time-out, a job's wait): polls in between
  would find the same cluster and do nothing either.

The policies, as each peer behaves (``docs/simulate.md`` describes the originals):

- ``slurm``: power up nodes for exactly the waiting jobs (oldest first, first fit on ready nodes'
  free slots, then booting nodes, then new ones, each by number as in Slurm's node list) that fit
  on no ready or booting node; power down a node idle 300 s that no waiting job would be placed
  on (elb's Slurm peer takes its nodes by name as text, node1000 before node101: from 1,000
  nodes the two differ by a few thousandths of a percent);
- ``parallelcluster``: with jobs waiting, grow to busy nodes (booting ones count as busy) plus
  ceil(waiting slots / spn); with none waiting, remove nodes idle 600 s;
- ``starcluster``: the master runs jobs too (a node of ``spn`` slots, never billed, within
  ``max_nodes``); nothing while a node boots; one node at a time when more jobs wait than the
  cluster has slots and the oldest has waited over 900 s, 180 s after the last launch or
  removal; with none waiting, idle nodes that are 45 minutes or more into their hour go;
- ``elb`` (a simple model of elb's default policy, forecast and cost): launch, in whole nodes,
  for the waiting jobs that fit nowhere within a boot time: ready nodes' free slots, plus the
  slots of running jobs whose requested run time ends by then (not more than 120 s past it
  already) and of those without one that started at most a boot time ago, booting nodes, the
  nodes ending wide jobs free; remove a node idle half a boot time that no waiting job would be
  placed on.

    python benchmarks/plain_replay.py LOG.swf[.gz] [--policy slurm] [--days 60] [--copies 1]
                                      [--max-nodes N] [--spn 8] [--boot 300]

``--copies`` interleaves the log as ``bench_simulate.scaled`` does (each job once per copy,
copy c shifted by c x 937 s mod 1 h). Standard library only.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

INF = math.inf
MIN_BILLED = 60.0  # seconds: per-second billing's minimum
GRACE = 120.0  # elb: a running job this long past its requested end is taken as running on


# -- the log -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Job:
    id: int
    submit: float
    run: float
    slots: int
    requested: float | None  # requested run time (SWF field 9), None when the log has none
    start: float = -1.0
    nodes: list[tuple[Node, int]] = field(default_factory=list)  # where it runs, slots on each


def _lines(path: Path) -> Iterator[str]:
    with path.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if gz:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield from fh
    else:
        with path.open(encoding="utf-8", errors="replace") as fh:
            yield from fh


def read_swf(path: Path) -> list[Job]:
    """The jobs of an SWF log, by submission: slots are the requested processors (field 8), else
    the allocated ones (field 5); jobs with no run time, no slot or no submission time are left out."""
    jobs = []
    for line in _lines(path):
        f = line.split()
        if not f or f[0].startswith(";"):
            continue
        submit, run, slots = float(f[1]), float(f[3]), int(float(f[7]))
        if slots <= 0:
            slots = int(float(f[4]))
        if submit < 0 or run <= 0 or slots <= 0:
            continue
        req = float(f[8])
        jobs.append(Job(int(f[0]), submit, run, slots, req if req > 0 else None))
    jobs.sort(key=lambda j: (j.submit, j.id))
    return jobs


def interleave(jobs: list[Job], copies: int, days: float | None) -> list[Job]:
    """The first ``days`` of the log (None: all), each job submitted ``copies`` times, copy c
    ``c x 937 s mod 1 h`` later, numbered ``id x copies + c``; by submission."""
    t0 = jobs[0].submit
    base = jobs if days is None else [j for j in jobs if j.submit - t0 <= days * 86400]
    out = [
        Job(j.id * copies + c, j.submit + (c * 937) % 3600, j.run, j.slots, j.requested)
        for j in base
        for c in range(copies)
    ]
    out.sort(key=lambda j: (j.submit, j.id))
    return out


# -- the cluster -------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Node:
    num: int  # its name's number: the order jobs are placed in (0: StarCluster's master)
    launched: float
    ready_at: float
    total: int
    ready: bool = False
    free: int = 0
    running: int = 0  # jobs (parts of wide jobs) on it
    last_busy: float = -INF  # when its last job ended

    @property
    def idle_since(self) -> float:
        return max(self.ready_at, self.last_busy)


class FirstFit:
    """Keys (node numbers) by free slots, each bucket sorted: the lowest key with room for
    ``slots`` is the smallest head among the buckets of at least ``slots`` free."""

    def __init__(self, spn: int) -> None:
        self.spn = spn
        self.buckets: list[list[int]] = [[] for _ in range(spn + 1)]  # free slots -> sorted keys
        self.free: dict[int, int] = {}

    def copy(self) -> FirstFit:
        other = FirstFit(self.spn)
        other.buckets = [list(b) for b in self.buckets]
        other.free = dict(self.free)
        return other

    def set(self, key: int, free: int) -> None:
        old = self.free.get(key)
        if old is not None:
            b = self.buckets[old]
            del b[bisect.bisect_left(b, key)]
        self.free[key] = free
        bisect.insort(self.buckets[free], key)

    def drop(self, key: int) -> None:
        old = self.free.pop(key, None)
        if old is not None:
            b = self.buckets[old]
            del b[bisect.bisect_left(b, key)]

    def first(self, slots: int) -> int | None:
        heads = [b[0] for b in self.buckets[max(1, slots) :] if b]
        return min(heads) if heads else None

    def empties(self, k: int) -> list[int]:
        return self.buckets[self.spn][:k]

    def any_room(self) -> bool:
        return any(self.buckets[1:])


@dataclass(slots=True)
class Decision:
    add: int = 0
    remove: list[Node] = field(default_factory=list)
    wake: float = INF  # when nothing done: the policy's next deadline (the cluster unchanged)


class Replay:
    def __init__(self, jobs: list[Job], policy: str, *, spn: int, max_nodes: int, boot: float) -> None:
        self.jobs, self.spn, self.max_nodes, self.boot = jobs, spn, max_nodes, boot
        self.policy = POLICIES[policy]
        self.interval = 10.0 if policy == "slurm" else 60.0
        self.t0 = jobs[0].submit
        self.nodes: dict[int, Node] = {}  # up or booting
        self.ready = FirstFit(spn)  # ready nodes by free slots
        self.booting: set[int] = set()
        self.queue: deque[Job] = deque()
        self.queued_slots = 0
        self.ends: list[tuple[float, int, Job]] = []  # heap: running jobs by end
        self.readies: list[tuple[float, int]] = []  # heap: booting nodes by ready time
        self.next_sub = 0
        self.requested_ends: list[tuple[float, int, Job]] = []  # running jobs with a requested time, by it
        self.unrequested: list[tuple[float, int, Job]] = []  # running jobs without one, by their start
        self.idle: dict[int, Node] = {}  # ready nodes that run nothing (not the master), by idle since
        self.busy = 0  # ready nodes running a job (not the master)
        self.last_change = -INF  # last launch or removal
        self.billed = 0.0  # node-seconds of the nodes that went
        self.launches = 0
        self.decisions = 0
        self.waits: list[float] = []
        self.last_end = self.t0
        self.master = policy == "starcluster"
        if self.master:  # StarCluster's master runs jobs: ready from the start, never billed
            node = self.nodes[0] = Node(0, self.t0, self.t0, spn)
            self._set_ready(node, self.t0)

    # -- nodes ---------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.nodes) - self.master

    def _launch(self, num: int, now: float) -> None:
        self.nodes[num] = Node(num, now, now + self.boot, self.spn)
        self.booting.add(num)
        heapq.heappush(self.readies, (now + self.boot, num))
        self.launches += 1

    def _set_ready(self, node: Node, now: float) -> None:
        node.ready, node.free, node.ready_at = True, node.total, now
        self.booting.discard(node.num)
        self.ready.set(node.num, node.free)
        if node.num:
            self.idle[node.num] = node

    def _remove(self, node: Node, now: float) -> None:
        del self.nodes[node.num]
        self.ready.drop(node.num)
        self.booting.discard(node.num)
        self.idle.pop(node.num, None)
        if node.num:
            self.billed += max(MIN_BILLED, now - node.launched)

    def new_nums(self, n: int) -> list[int]:
        top = max(self.nodes, default=0)
        return list(range(top + 1, top + 1 + n))

    # -- jobs ----------------------------------------------------------------------------------
    def _place(self, job: Job) -> list[tuple[Node, int]] | None:
        if job.slots > self.spn:
            nums = self.ready.empties(math.ceil(job.slots / self.spn))
            if len(nums) < math.ceil(job.slots / self.spn):
                return None
            return [(self.nodes[n], self.spn) for n in nums]
        num = self.ready.first(job.slots)
        return None if num is None else [(self.nodes[num], job.slots)]

    def _start(self, job: Job, parts: list[tuple[Node, int]], now: float) -> None:
        self.queue.popleft()
        self.queued_slots -= job.slots
        job.start, job.nodes = now, parts
        for node, used in parts:
            node.free -= used
            node.running += 1
            self.ready.set(node.num, node.free)
            if node.running == 1 and node.num:
                del self.idle[node.num]
                self.busy += 1
        heapq.heappush(self.ends, (now + job.run, job.id, job))
        if job.requested is not None:
            bisect.insort(self.requested_ends, (now + job.requested, job.id, job))
        else:
            bisect.insort(self.unrequested, (now, job.id, job))
        self.waits.append(now - job.submit)

    def _end(self, job: Job, now: float) -> None:
        for node, used in job.nodes:
            node.free += used
            node.running -= 1
            if not node.running:
                node.last_busy = now
                if node.num:
                    self.idle[node.num] = node  # after every node idle since earlier
                    self.busy -= 1
            self.ready.set(node.num, node.free)
        if job.requested is not None:
            ends = self.requested_ends
            del ends[bisect.bisect_left(ends, (job.start + job.requested, job.id))]
        else:
            del self.unrequested[bisect.bisect_left(self.unrequested, (job.start, job.id))]
        self.last_end = max(self.last_end, now)

    def dispatch(self, now: float) -> None:
        while self.queue:
            parts = self._place(self.queue[0])
            if parts is None:
                return
            self._start(self.queue[0], parts, now)

    # -- the loop ------------------------------------------------------------------------------
    def _next_event(self) -> float:
        t = self.jobs[self.next_sub].submit if self.next_sub < len(self.jobs) else INF
        if self.ends:
            t = min(t, self.ends[0][0])
        if self.readies:
            t = min(t, self.readies[0][0])
        return t

    def _events_at(self, t: float) -> None:
        while self.ends and self.ends[0][0] <= t:
            self._end(heapq.heappop(self.ends)[2], t)
        while self.readies and self.readies[0][0] <= t:
            _, num = heapq.heappop(self.readies)
            node = self.nodes.get(num)
            if node is not None and not node.ready:
                self._set_ready(node, t)
        jobs = self.jobs
        while self.next_sub < len(jobs) and jobs[self.next_sub].submit <= t:
            self.queue.append(jobs[self.next_sub])
            self.queued_slots += jobs[self.next_sub].slots
            self.next_sub += 1
        self.dispatch(t)

    def _grid(self, t: float) -> float:
        """The first poll at or after ``t``."""
        if t == INF:
            return t
        k = math.ceil((t - self.t0) / self.interval - 1e-9)
        return self.t0 + max(0, k) * self.interval

    def run(self) -> Replay:
        poll = self.t0
        while True:
            nxt = self._next_event()
            if nxt <= poll and nxt < INF:
                self._events_at(nxt)
                continue
            if self.next_sub == len(self.jobs) and not self.queue and not self.ends:
                break
            if poll == INF:
                raise RuntimeError("jobs wait that no node will ever run")
            d = self.policy(self, poll)
            self.decisions += 1
            nums = self.new_nums(d.add)
            for node in d.remove:
                if node.ready and not node.running and node.num:
                    self._remove(node, poll)
                    self.last_change = poll
            room = self.max_nodes - len(self.nodes)
            for num in nums[: max(0, room)]:
                self._launch(num, poll)
                self.last_change = poll
            self.dispatch(poll)
            step = poll + self.interval
            if not d.add and not d.remove:
                step = max(step, self._grid(min(d.wake, nxt)))
            poll = step
        for node in list(self.nodes.values()):  # still up at the end: billed to the last job's end
            self._remove(node, max(self.last_end, node.launched))
        return self

    # -- what the policies read ----------------------------------------------------------------
    def idle_for(self, now: float, keep: float, kept: set[int]) -> tuple[list[Node], float]:
        """The idle nodes not in ``kept`` idle ``keep`` seconds or more at ``now``, and when the
        next of the others will be (inf: none). ``idle`` is in the order the nodes turned idle."""
        due: list[Node] = []
        for n in self.idle.values():
            if n.num in kept:
                continue
            if now - n.idle_since < keep:
                return due, n.idle_since + keep
            due.append(n)
        return due, INF


# -- placing the waiting jobs on what is there, and on new nodes --------------------------------
NEW = 1 << 40  # keys of a packing's new nodes: after every existing bin's
LATER = 1 << 39  # keys of the bins that come after the nodes by number (Slurm's booting nodes, freed nodes)


class Packing:
    """First fit of the waiting jobs, oldest first, on bins (free slots by key: lower keys first)
    and then on new nodes, counted up to just past ``limit``; ``assigned``: the nodes (keys below
    ``NEW``, numbered ``key % LATER``) a job was placed on."""

    def __init__(self, bins: FirstFit, spn: int, limit: int) -> None:
        self.bins, self.spn, self.limit = bins, spn, limit
        self.new_nodes = 0
        self.counting = True
        self.assigned: set[int] = set()
        self._new_key = NEW

    def _take(self, key: int, slots: int) -> None:
        self.bins.set(key, self.bins.free[key] - slots)
        if key < NEW:
            self.assigned.add(key % LATER)

    def place(self, slots: int) -> bool:
        """Place a job; False when no later job can be placed on any bin (no more counting)."""
        if self.counting and self.new_nodes > self.limit:
            self.counting = False
        spn = self.spn
        if slots > spn:  # whole empty bins, the rest in new nodes
            k = math.ceil(slots / spn)
            taken = self.bins.empties(k)
            for key in taken:
                self._take(key, spn)
            if self.counting:
                self.new_nodes += k - len(taken)
        else:
            found = self.bins.first(slots)
            if found is not None and (self.counting or found < NEW):
                self._take(found, slots)
            elif self.counting:
                self.new_nodes += 1
                if self.new_nodes <= self.limit and spn > slots:
                    self.bins.set(self._new_key, spn - slots)
                    self._new_key += 1
        if self.counting:
            return True
        buckets = self.bins.buckets
        return bool(buckets[spn]) or any(b and b[0] < NEW for b in buckets[1:])


def pack(sim: Replay, bins: FirstFit, limit: int) -> Packing:
    p = Packing(bins, sim.spn, limit)
    for job in sim.queue:
        if not p.place(job.slots):
            break
    return p


# -- the policies ------------------------------------------------------------------------------
SUSPEND_TIME = 300.0


def slurm(sim: Replay, now: float) -> Decision:
    limit = sim.max_nodes - sim.size
    add, assigned = 0, set()
    if sim.queue:  # ready nodes with room by number, then booting ones by number
        bins = FirstFit(sim.spn)
        for num, free in sim.ready.free.items():
            if free:
                bins.set(num, free)
        for num in sim.booting:
            bins.set(LATER + num, sim.spn)
        p = pack(sim, bins, limit)
        add, assigned = min(p.new_nodes, max(0, limit)), p.assigned
    remove, wake = sim.idle_for(now, SUSPEND_TIME, assigned)
    return Decision(add, remove, wake)


PC_IDLE_TIME = 600.0


def parallelcluster(sim: Replay, now: float) -> Decision:
    if sim.queue:
        busy = sim.busy + len(sim.booting)
        desired = min(sim.max_nodes, busy + math.ceil(sim.queued_slots / sim.spn))
        return Decision(max(0, desired - sim.size))
    remove, wake = sim.idle_for(now, PC_IDLE_TIME, set())
    return Decision(0, remove, wake)


SC_WAIT, SC_STABLE, SC_KILL_AFTER = 900.0, 180.0, 2700.0


def starcluster(sim: Replay, now: float) -> Decision:
    if sim.booting:
        return Decision()  # a node coming up is an event
    stable = sim.last_change + SC_STABLE
    if sim.queue:
        slots = sum(n.total for n in sim.nodes.values() if n.ready)
        if sim.size >= sim.max_nodes or len(sim.queue) <= slots:
            return Decision()
        oldest = sim.queue[0].submit
        if now < stable or now - oldest <= SC_WAIT:
            return Decision(wake=max(stable, oldest + SC_WAIT))
        return Decision(1)
    if now < stable:
        return Decision(wake=stable)  # then as below, at that time
    remove, wake = [], INF
    for n in sim.idle.values():
        into = (now - n.launched) % 3600
        if into >= SC_KILL_AFTER:
            remove.append(n)
        wake = min(wake, now + SC_KILL_AFTER - into if into < SC_KILL_AFTER else now)
    return Decision(0, remove, wake)


ELB_IDLE_FACTOR = 0.5


def elb(sim: Replay, now: float) -> Decision:
    spn, limit = sim.spn, sim.max_nodes - sim.size
    keep = ELB_IDLE_FACTOR * sim.boot
    add, assigned, wake = 0, set(), INF
    if sim.queue:
        # By a boot time: ready nodes' free slots and booting nodes by number, the slots that
        # running jobs free by their requested end on their (first) node, or without one when
        # they started at most a boot time ago (expected to run as long again), then the whole
        # nodes that wide jobs ending by then free.
        horizon, ends = now + sim.boot, sim.requested_ends
        young = sim.unrequested[bisect.bisect_left(sim.unrequested, (now - sim.boot,)) :]
        bins = sim.ready.copy()
        for num in sim.booting:
            bins.set(num, spn)
        freed = LATER
        gains: dict[int, int] = {}
        first = bisect.bisect_left(ends, (now - GRACE,))
        for _, _, job in ends[first : bisect.bisect_right(ends, (horizon, INF))] + young:
            if job.slots > spn:
                for _ in range(min(math.ceil(job.slots / spn), sim.size)):
                    bins.set(freed, spn)
                    freed += 1
            else:
                on = job.nodes[0][0].num
                gains[on] = gains.get(on, 0) + job.slots
        for num, gain in gains.items():
            bins.set(num, min(spn, bins.free[num] + gain))
        p = pack(sim, bins, limit)
        add, assigned = min(p.new_nodes, max(0, limit)), p.assigned
        if sim.idle:
            wake = now  # which idle node a waiting job would take changes with the clock
        elif limit > 0:  # a job passing its requested end + GRACE, or a boot's age: more demand
            if first < len(ends):
                wake = ends[first][0] + GRACE
            if young:
                wake = min(wake, young[0][0] + sim.boot)
    remove, _ = sim.idle_for(now, keep, assigned)
    _, due = sim.idle_for(now, keep, set())
    return Decision(add, remove, min(wake, now if remove else due))


POLICIES: dict[str, Callable[[Replay, float], Decision]] = {
    "slurm": slurm,
    "parallelcluster": parallelcluster,
    "starcluster": starcluster,
    "elb": elb,
}


def replay(jobs: Iterable[Job], policy: str, *, spn: int = 8, max_nodes: int, boot: float = 300.0) -> dict[str, float]:
    """Replay fresh copies of ``jobs``; the figures: cost (node-hours billed, price 1), mean wait,
    launches, jobs, CPU seconds."""
    fresh = [Job(j.id, j.submit, j.run, j.slots, j.requested) for j in jobs]
    cpu = time.process_time()
    sim = Replay(fresh, policy, spn=spn, max_nodes=max_nodes, boot=boot).run()
    cpu = time.process_time() - cpu
    return {
        "cost": sim.billed / 3600.0,
        "wait_mean": sum(sim.waits) / len(sim.waits),
        "launches": float(sim.launches),
        "decisions": float(sim.decisions),
        "jobs": float(len(sim.waits)),
        "cpu": cpu,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--policy", choices=sorted(POLICIES), default="slurm")
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--max-nodes", type=int, default=None, help="default: 52 x copies")
    ap.add_argument("--spn", type=int, default=8)
    ap.add_argument("--boot", type=float, default=300.0)
    args = ap.parse_args()
    jobs = interleave(read_swf(args.log), args.copies, args.days)
    cap = args.max_nodes or 52 * args.copies
    figures = replay(jobs, args.policy, spn=args.spn, max_nodes=cap, boot=args.boot)
    print(f"{args.policy}: " + ", ".join(f"{k} {v:.6g}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
