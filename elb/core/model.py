"""Immutable values shared by every part of elb: the cluster snapshot, node records and plans.

Nothing here does I/O. Times are POSIX seconds (float) on the master's clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from elb.core.frozen import quick_init


class JobPhase(enum.Enum):
    """Where a job is, in the core's words: each driver translates its scheduler's states into
    these at its edge; nothing in the core reads a scheduler's own state."""

    WAITING = "waiting"  # in the queue and eligible to start: what the policy plans for
    HELD = "held"  # in the queue, held (a hold, a job it waits for): not demand until released
    ERROR = "error"  # in the queue, in error: not demand until an admin clears it
    RUNNING = "running"  # started on its host(s): running, transferring, suspended, being deleted
    # Given its hosts, not started on them yet (Slurm's CONFIGURING: it waits for the nodes it
    # was given to power up): not demand, and no host is busy for it (``started_host``: none);
    # a host's own slots say whether it is taken.
    STARTING = "starting"
    OTHER = "other"  # none of these (deleted before it started): not demand, on no host


class QueueFlags(enum.Flag):
    """What keeps a queue instance (one queue on one host) from taking new work, in the core's
    words: each driver translates its scheduler's states into these. No flag: usable."""

    DISABLED = enum.auto()  # disabled (by an admin, a calendar): runs its jobs, starts no new one
    UNREACHABLE = enum.auto()  # the scheduler does not hear from its host
    SUSPENDED = enum.auto()  # suspended (by an admin, a subordinate queue, a calendar)
    ERROR = enum.auto()  # in error, or its configuration in doubt
    ALARM = enum.auto()  # a load threshold passed: shown, still usable


NO_FLAGS = QueueFlags(0)
_UNUSABLE = QueueFlags.DISABLED | QueueFlags.UNREACHABLE | QueueFlags.SUSPENDED | QueueFlags.ERROR


@quick_init
@dataclass(frozen=True, slots=True)
class Job:
    """One job entry as the scheduler shows it.

    A pending array job is one entry whose ``tasks`` counts every pending task;
    a running array task is its own entry with ``tasks == 1``.
    """

    job_id: int
    name: str
    owner: str
    state: str  # the scheduler's own word for its state, as its commands show it: shown, never compared
    phase: JobPhase  # its state in the core's words: what every rule reads
    slots: int  # slots per task
    submitted: float | None = None
    started: float | None = None
    tasks: int = 1
    task_ids: str | None = None  # "1-20:1", "3", None for a plain job
    # The priority its entry showed when this Job was made. A later read whose entry differs only
    # in its priority keeps this Job and carries the new one beside it (``MovedPriorities``): a
    # snapshot's ``priority_of`` is the priority the scheduler shows now.
    priority: float = 0.0
    pe: str | None = None
    pe_range: str | None = None  # requested range, e.g. "16" or "4-8"
    hard_requests: Mapping[str, str] = field(default_factory=dict, hash=False)
    queue: str | None = None  # queue instance, e.g. "all.q@node001" (running jobs)
    # The requested run time limit in seconds (Grid Engine's h_rt, Slurm's --time); None: none.
    hard_runtime: float | None = None
    hard_queues: tuple[str, ...] = ()  # the hard queue list (qsub -q), wildcards as given
    # Open Cluster Scheduler 9's scoped hard requests (qsub -scope master|slave -l ...): for the
    # host of the master task, and for the hosts of the other tasks of a parallel job.
    master_requests: Mapping[str, str] = field(default_factory=dict, hash=False)
    slave_requests: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def host(self) -> str | None:
        """Host part of the queue instance, for running jobs."""
        if self.queue is None or "@" not in self.queue:
            return None
        return self.queue.split("@", 1)[1]

    @property
    def is_pending(self) -> bool:
        """Waiting in the queue and eligible to be scheduled (not held, not in error)."""
        return self.phase is JobPhase.WAITING

    @property
    def total_slots(self) -> int:
        return self.slots * self.tasks


@quick_init
@dataclass(frozen=True, slots=True)
class QueueInstance:
    """One queue on one host (``all.q@node001``)."""

    queue: str
    host: str
    slots_total: int
    slots_used: int
    slots_reserved: int = 0
    flags: QueueFlags = NO_FLAGS

    @property
    def name(self) -> str:
        return f"{self.queue}@{self.host}"

    @property
    def disabled(self) -> bool:
        flags = self.flags
        return flags is not NO_FLAGS and QueueFlags.DISABLED in flags

    @property
    def unreachable(self) -> bool:
        flags = self.flags
        return flags is not NO_FLAGS and QueueFlags.UNREACHABLE in flags

    @property
    def usable(self) -> bool:
        """Can accept new work: reachable, enabled, not in error, not suspended."""
        flags = self.flags
        return flags is NO_FLAGS or not flags & _UNUSABLE


@quick_init
@dataclass(frozen=True, slots=True)
class Host:
    """One execution host with its queue instances and load values."""

    name: str
    queues: tuple[QueueInstance, ...] = ()
    num_proc: int | None = None
    load: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def slots_total(self) -> int:
        return sum(q.slots_total for q in self.queues)

    @property
    def slots_used(self) -> int:
        return sum(q.slots_used for q in self.queues)

    @property
    def slots_reserved(self) -> int:
        return sum(q.slots_reserved for q in self.queues)

    @property
    def busy(self) -> bool:
        """Runs a job or holds a reservation in any of its queues."""
        for q in self.queues:  # noqa: SIM110 (a loop: a generator costs more, asked of every host at each pass)
            if q.slots_used > 0 or q.slots_reserved > 0:
                return True
        return False

    @property
    def up(self) -> bool:
        """Any of its queue instances is reachable (none: not up)."""
        for q in self.queues:  # noqa: SIM110 (as ``busy``)
            if not q.unreachable:
                return True
        return False

    @property
    def free_slots(self) -> int:
        return sum(max(0, q.slots_total - q.slots_used - q.slots_reserved) for q in self.queues if q.usable)


class MovedPriorities:
    """The priorities of jobs whose entry, read again, differed only in its priority: the read
    kept the very ``Job`` it made before (what was worked out for it is kept with it), and its
    new priority is here, beside it. SGE normalizes its priorities anew when the highest or the
    lowest waiting job leaves: then every entry's priority moves at once.

    Each job is found by its identity (it is held here, so its identity stays its own): a read
    hands a Job object to one entry only. A job not here shows its own ``priority``. The jobs
    are indexed when first asked about (a pass may ask about none)."""

    __slots__ = ("_by_job", "_moved")

    def __init__(self, moved: Sequence[tuple[Job, float]]) -> None:
        self._moved = moved  # each job and its priority now
        self._by_job: dict[int, tuple[Job, float]] | None = None  # the same by ``id(job)``

    def of(self, job: Job) -> float:
        """The priority ``job`` shows now."""
        by_job = self._by_job
        if by_job is None:
            by_job = self._by_job = {id(moved[0]): moved for moved in self._moved}
        found = by_job.get(id(job))
        return found[1] if found is not None and found[0] is job else job.priority

    def __len__(self) -> int:
        return len(self._moved)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MovedPriorities) and list(self._moved) == list(other._moved)

    def __hash__(self) -> int:
        return len(self._moved)

    def __repr__(self) -> str:
        return f"MovedPriorities({len(self._moved)} jobs)"


NO_MOVED_PRIORITIES = MovedPriorities(())


@quick_init
@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the scheduler showed at one instant: jobs, execution hosts, and the master's clock;
    the priorities that moved since their jobs were read (``MovedPriorities``)."""

    now: float
    jobs: tuple[Job, ...]
    hosts: tuple[Host, ...]
    moved_priorities: MovedPriorities = NO_MOVED_PRIORITIES

    def priority_of(self, job: Job) -> float:
        """The priority the scheduler shows now for ``job`` (one of ``jobs``)."""
        return self.moved_priorities.of(job)

    def host(self, name: str) -> Host | None:
        for h in self.hosts:
            if h.name == name:
                return h
        return None

    @property
    def pending(self) -> tuple[Job, ...]:
        """The eligible waiting jobs (``Job.is_pending``). A pass asks for them of 50,000 entries
        a few times: one comprehension with the phase compared by identity, which costs less
        than ``compress`` over ``map`` of ``partial(is_, ...)`` (a call per job)."""
        waiting = JobPhase.WAITING
        return tuple([j for j in self.jobs if j.phase is waiting])

    @property
    def held(self) -> tuple[Job, ...]:
        """The held waiting jobs (``JobPhase.HELD``), picked out as ``pending``."""
        held = JobPhase.HELD
        return tuple([j for j in self.jobs if j.phase is held])

    def jobs_on(self, host: str) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.host == host)


class NodeState(enum.StrEnum):
    """Lifecycle of a node elb manages; each step is journalled before it starts."""

    REQUESTED = "requested"
    LAUNCHING = "launching"
    RUNNING = "running"  # the instance runs; not yet provisioned
    PROVISIONING = "provisioning"
    READY = "ready"
    DRAINING = "draining"
    DEREGISTERED = "deregistered"
    # The warm pool (``elb.core.warmpool``): drained like a removal, its queue instances left disabled
    # (still an exec host, its hosts lines and exports kept), its instance stopped; started again
    # for demand (``starting``: on its way back to ready, it counts as booting).
    STOPPING = "stopping"
    STOPPED = "stopped"
    STARTING = "starting"
    TERMINATED = "terminated"
    FAILED = "failed"

    @property
    def booting(self) -> bool:
        """On its way to serving jobs: counts toward size and capacity."""
        return self in _BOOTING

    @property
    def alive(self) -> bool:
        """Runs (or is about to) and is not being removed for good; a pooled node is not."""
        return self in _BOOTING or self in (NodeState.READY, NodeState.DRAINING)

    @property
    def pooled(self) -> bool:
        """Stopped in its group's warm pool, or on its way there."""
        return self in (NodeState.STOPPING, NodeState.STOPPED)


_BOOTING = frozenset(
    {NodeState.REQUESTED, NodeState.LAUNCHING, NodeState.RUNNING, NodeState.PROVISIONING, NodeState.STARTING}
)
# The states ``NodeState.alive`` holds, as a set: a pass tests the state of every record, and a
# member's hash is its string's (a test in C, where the property is a call of Python's).
ALIVE_STATES = frozenset(s for s in NodeState if s.alive)


@quick_init
@dataclass(frozen=True, slots=True)
class WitnessKeep:
    """The last time a node was kept on its own word (``elb.core.planner.witness_verdict``): the
    scheduler showed it idle, and the node said it runs job processes (``found``) or could not be
    asked. When (``at``), its ``last_busy_at`` then, and why it was kept."""

    at: float
    busy_at: float | None
    found: bool
    why: str


@quick_init
@dataclass(frozen=True, slots=True)
class Node:
    """elb's record of one worker it manages."""

    name: str
    state: NodeState
    launched_at: float  # start of billing
    instance_id: str | None = None
    ready_at: float | None = None
    last_busy_at: float | None = None  # last pass that saw a job or reservation on it
    last_up_at: float | None = None  # last pass that saw the scheduler reach it (a queue instance not unreachable)
    slots: int | None = None  # expected slots once ready (None: unknown)
    private_ip: str | None = None
    instance_type: str | None = None
    updated_at: float | None = None  # when its last step was journalled
    group: str | None = None  # its node group (config node_groups); None: the first group
    stopped_at: float | None = None  # when it was last stopped into the warm pool
    template_version: str | None = None  # the launch template version it was launched with, if known
    witness_keep: WitnessKeep | None = None  # the last time it was kept on its own word (None: never)

    @property
    def quiet_since(self) -> float:
        """Since when nothing has been seen running on it: the last pass that saw a job or
        reservation, or when it became ready, whichever is later; its launch before either.
        A node is idle since then when it is ready and runs nothing now (the one definition)."""
        busy, ready = self.last_busy_at, self.ready_at
        if busy is None:
            return self.launched_at if ready is None else ready
        return busy if ready is None or busy >= ready else ready


@quick_init
@dataclass(frozen=True, slots=True)
class History:
    """What the policy may remember between passes (kept in the journal)."""

    last_change_at: float | None = None  # last launch or removal
    recent_removals: tuple[float, ...] = ()  # times of removals, newest last


@quick_init
@dataclass(frozen=True, slots=True)
class Removal:
    node: str
    reason: str


@quick_init
@dataclass(frozen=True, slots=True)
class Plan:
    """The decision of one pass. An empty plan still says why nothing is done."""

    add: int = 0
    add_names: tuple[str, ...] = ()
    add_reason: str = ""
    remove: tuple[Removal, ...] = ()
    reason: str = ""
    # The node group of each node to add, by name (node_groups); a name not in it: the first group.
    add_groups: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def empty(self) -> bool:
        return self.add == 0 and not self.remove

    def describe(self) -> list[str]:
        """Plain-words lines for logs and ``--dry-run``."""
        lines: list[str] = []
        reason = self.reason
        if self.add:
            lines.append(f"add {self.add} ({', '.join(self.add_names)}): {self.add_reason}")
            reason = _said_once(reason, self.add_reason)
        lines.extend(_removals(self.remove))
        if not lines or reason:
            lines.append(reason or "nothing to do")
        return lines


def _removals(removals: Sequence[Removal]) -> list[str]:
    """One line per reason: the nodes removed for the same reason named together, in order."""
    return [f"remove {line}" for line in by_reason((r.node, r.reason) for r in removals)]


def by_reason(said: Iterable[tuple[str, str]]) -> list[str]:
    """``NODE: REASON`` parts, one per reason: the nodes given the same reason named together
    (``node001, node002: REASON``), in the order each reason first comes."""
    nodes: dict[str, list[str]] = {}
    for node, reason in said:
        nodes.setdefault(reason, []).append(node)
    return [f"{', '.join(names)}: {reason}" for reason, names in nodes.items()]


def _said_once(reason: str, add_reason: str) -> str:
    """``reason`` without its last parts when ``add_reason`` ends with them: the back-off's and the
    budget's why, added to both when they let some launches start, is said once, with the launches."""
    if not reason or not add_reason:
        return reason
    starts = [0, *(i + 2 for i in range(len(reason)) if reason.startswith("; ", i))]
    for i in starts:  # the longest common end that is whole parts of both
        end = reason[i:]
        if add_reason.endswith("; " + end):
            return reason[: max(0, i - 2)]
    return reason


class Cause(enum.StrEnum):
    """Why a bring-up failed, as the launch back-off (``elb.core.backoff``) tells failures apart."""

    LAUNCH = "launch"  # the cloud gave no running instance
    THROTTLED = "throttled"  # the cloud refused the launch for the account's API request rate
    PROVISION = "provision"  # the instance ran, the node never became ready


@quick_init
@dataclass(frozen=True, slots=True)
class Event:
    """A step of a node's life as the journal records it (``elb.service.journal``): when, the
    state reached, the instance, a detail (why it failed), and the failure's ``cause`` when its
    recorder knew it (None: not recorded, as in an older journal; ``elb.core.backoff`` reads it
    from the detail then)."""

    time: float
    node: str
    state: NodeState
    instance_id: str | None
    detail: str | None
    cause: Cause | None = None
