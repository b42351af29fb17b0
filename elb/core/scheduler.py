"""What elb needs of a batch scheduler, in scheduler-neutral values.

A scheduler driver (Grid Engine: ``elb.schedulers.sge.driver.GridEngine``; Slurm: ``elb.schedulers.slurm.driver.Slurm``)
implements ``Scheduler``. The pass, the planner, the actuator and the commands speak to it only
through this interface; ``elb.service.factory`` builds the one the config names. Nothing outside a driver
and the factory names a scheduler.

- **read**: the scheduler's jobs and hosts as a neutral ``Snapshot`` (``elb.core.model``), checked whole
  (a read that lost hosts elb knows to be up is refused: ``SchedulerError``), with the nodes the
  scheduler asked for or gave up by name (``Ask``), when it does that (Slurm's power saving).
- **demand**: the waiting jobs that new nodes would run (``elb.core.demand.DemandSplit``: each with its
  node group; the others with why not), read only when scaling goes on.
- the **drain**: disable and enable a host, what runs or is reserved on it now, and whether the
  scheduler still lists it after its deregistration.
- the **plays** that register and deregister a node, and the steps a node's bring-up takes in the
  scheduler around them (``prepare`` before the play, ``await_registered`` after it).
- **requeue** the jobs of a host about to be taken back, and **release** nodes the scheduler
  asked for that elb will not bring up.

Optional, each declared here with what the daemon does without it and asked for by
``isinstance``: a driver that can **peek** (``PeeksDemand``) says cheaply, between passes, what
waits (``Peek``); the daemon runs a pass at once when new waiting work shows
(``elb.core.cadence``). A driver that can **bind** a job to on-demand nodes (``BindsOnDemand``)
does it for a job spot interruptions sent back too often (``elb.core.interruptions``). A driver
whose scheduler names its nodes may **hold names** (``HoldsNames``): its read then lists the names
the scheduler may pick next (``NamePool``), and elb keeps only as many of them open as there is room
within ``max_nodes`` (``elb.core.askplan``), so the scheduler never puts a job on a node elb would
give back; without it, an ask past the limits is given back (its job waits again).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from elb.core.model import Job, Node, Snapshot

if TYPE_CHECKING:
    from elb.core.demand import DemandSplit
    from elb.core.groups import NodeGroups
    from elb.core.interfaces import NodeSpec
    from elb.core.state import JobsChange


class SchedulerError(Exception):
    """A read or a command of the scheduler failed, timed out, or gave what elb cannot trust;
    the message says which and why. ``transient``: the scheduler did not answer (a time-out, its
    controller out of reach: each driver's table of transient errors), still so after the driver's
    retries; not a refusal, so not a node's fault."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class AskKind(enum.StrEnum):
    """What the scheduler asked of one node, by name."""

    WANT = "want"  # bring it up: a job waits for it
    RELEASE = "release"  # the scheduler is done with it (it powered it down, or asks elb to)
    RESET = "reset"  # the scheduler gave up bringing it up: take it out, give it back


@dataclass(frozen=True, slots=True)
class Ask:
    """One node the scheduler asked something of, the latest word for that node."""

    node: str
    kind: AskKind
    since: float  # when the scheduler asked
    detail: str = ""  # what it said (its jobs, its partition), for the log
    group: str | None = None  # the node group it asks a node of (a partition's group)
    attempts: int = 0  # releases of this node that failed so far (``retry_at``: not before then)
    retry_at: float | None = None
    # By when a node for a want must be provisioned, or the scheduler has given up on it by itself
    # (Slurm: asked + ResumeTimeout, less the driver's wait for a registration); None: not known.
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class Dropped:
    """An ask the read found stale (the scheduler no longer wants it, or it is older than the
    scheduler's own time-out): closed with ``reason``, never acted on."""

    ask: Ask
    reason: str


@dataclass(frozen=True, slots=True)
class PoolName:
    """A node name the scheduler may ask for next, and its node group (None: the first group)."""

    name: str
    group: str | None = None
    # A held name's reason as the scheduler shows it, elb's prefix taken off (its words may differ
    # from elb's in punctuation); None: not known in full (the scheduler cut it), or not held.
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class NamePool:
    """The names a scheduler that names its nodes may pick for its next asks (Slurm: its cloud
    nodes powered down), split by whether elb holds them from it (``HoldsNames``). A name the
    scheduler keeps from its jobs for another reason (an admin's drain) is in neither."""

    open: tuple[PoolName, ...] = ()  # the scheduler may pick any of these
    held: tuple[PoolName, ...] = ()  # held by elb: the scheduler picks none of these until reopened
    # Names elb holds whose node is alive all the same (the scheduler put a job on it as elb held
    # it): reopened whatever the room, so that the hold is not taken for an admin's drain.
    held_alive: tuple[str, ...] = ()
    # Names a waiting job asks for by name (``sbatch -w``): kept open before the others.
    wanted: tuple[str, ...] = ()
    # Names the scheduler is bringing up for a job with no node of elb's behind them yet (its ask
    # may come a pass later): each takes room as a launch does.
    pending: tuple[str, ...] = ()
    # Names of ``open`` and ``held`` still on their way down (Slurm: powering down): the scheduler
    # may pick an open one the moment it is down, so they are held like the others, and kept open
    # last (after the held names, which the scheduler can bring up as soon as they are reopened);
    # a held one is reopened only once it is down.
    settling: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SchedulerRead:
    """One read of the scheduler: the neutral snapshot, and what it asked by name."""

    snapshot: Snapshot
    # Nodes the scheduler named: None when it never names nodes (elb sizes the demand itself).
    asks: tuple[Ask, ...] | None = None
    dropped: tuple[Dropped, ...] = ()
    # Managed nodes the scheduler shows down for good or no longer has (a powered-down cloud
    # node), each with why: removed like a release.
    gone: Mapping[str, str] = field(default_factory=dict)
    # The names it may ask for next (a driver that ``HoldsNames``); None: not read.
    names: NamePool | None = None
    # How the snapshot's jobs differ from the driver's read before (``elb.core.state.JobsChange``);
    # None: not known. A hint of how the read was made, not part of what it read: not compared.
    change: JobsChange | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DrainCheck:
    """What runs on a host, read afresh after it was disabled."""

    jobs: tuple[Job, ...]
    reserved: int  # slots (CPUs) held for a job that has not started


@dataclass(frozen=True, slots=True)
class Requeued:
    """What a requeue of a host's jobs did: the entries sent back to wait (``"123"``,
    ``"123.4"``), and the jobs that cannot be rerun (they go with the node unless they end)."""

    pushed: tuple[str, ...] = ()
    not_restartable: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Peek:
    """A cheap look at the scheduler between passes: a key for each piece of work that waits for
    elb (Grid Engine: the number of each job waiting and eligible to run; Slurm: the name of each
    request file its power saving left). A key the last look did not have is new waiting work
    (``elb.core.cadence.news``)."""

    waiting: frozenset[str]


@runtime_checkable
class PeeksDemand(Protocol):
    """Optional capability of a driver: ``peek``, far cheaper than ``read``, says what waits
    (``Peek``) without reading the whole scheduler; raises anything when it cannot say (the
    daemon logs it once and keeps to its poll). ``timeout``: the most seconds its command may
    take. Without it: the daemon polls, a pass every ``poll_interval``."""

    def peek(self, timeout: float) -> Peek: ...


@runtime_checkable
class BindsOnDemand(Protocol):
    """Optional capability of a driver: ``bind_on_demand`` makes ``job`` run only on on-demand
    nodes from now on (Grid Engine: a hard request only on-demand node groups offer; Slurm: the
    on-demand groups' partitions) and says how, in words for the log; ``SchedulerError`` when it
    cannot (why in its message). ``hard_requests``: the job's as the read listed them
    (``elb.core.model.Job.hard_requests``); ``groups``: the node groups. Without it: a job spot
    interruptions send back more often than ``policy.spot_interruptions_allowed`` is left as it
    is, named once in a warning (it may land on a spot node again)."""

    def bind_on_demand(self, job: int, hard_requests: Mapping[str, str], groups: NodeGroups) -> str: ...


@runtime_checkable
class HoldsNames(Protocol):
    """Optional: keep names from the scheduler's next asks, and open them again (a scheduler
    that names its nodes). Without it the daemon gives back each ask past the limits."""

    def hold(self, names: Sequence[str], reason: str) -> None:
        """Keep ``names`` (each in the read's ``NamePool.open``) from the scheduler's jobs, with
        ``reason``; ``SchedulerError`` if the scheduler refused (the next pass sees what stuck)."""
        ...

    def reopen(self, names: Sequence[str]) -> None:
        """Let the scheduler pick ``names`` (each held by elb) again."""
        ...


@runtime_checkable
class ParksNodes(Protocol):
    """Optional capability of a driver: ``before_launch`` is told, in the pass, the names of the
    nodes elb is about to launch, before the pass starts their launch and its give-backs (Slurm:
    their addresses parked, so that a job's kill that reaches them before their instances have
    an address in Slurm looks no name up); ``SchedulerError`` when it could not, which stops
    nothing. Without it: nothing is done before a launch."""

    def before_launch(self, names: Sequence[str]) -> None: ...


class Scheduler(Protocol):
    """A batch scheduler elb adds nodes to (see the module's description)."""

    @property
    def name(self) -> str:
        """Its name in messages: "Grid Engine", "Slurm"."""
        ...

    @property
    def add_playbook(self) -> str: ...

    @property
    def remove_playbook(self) -> str: ...

    @property
    def admit_playbook(self) -> str | None:
        """The master's part of adding nodes that configure themselves at boot
        (``provision.mode: boot``); None: this scheduler's nodes are configured by the add play."""
        ...

    def take_requests(self, now: float) -> tuple[str, ...]:
        """Take what the scheduler asked since the last pass into elb's journal (a scheduler that
        asks by files); lines to log, one per request or file set aside."""
        ...

    def read(self, records: Sequence[Node], now: float) -> SchedulerRead:
        """Jobs, hosts and asks now; ``SchedulerError`` when it cannot be read or trusted
        (``records``: elb's nodes, whose hosts a whole read must show)."""
        ...

    def demand(self, read: SchedulerRead, records: Sequence[Node], slots: int | None) -> DemandSplit:
        """The waiting jobs new nodes would run, each given its node group; ``SchedulerError``
        when what decides it cannot be read (nothing is launched on a guess). ``slots``: a new
        node's size when known."""
        ...

    def disable_host(self, host: str, reason: str) -> None: ...

    def enable_host(self, host: str) -> None: ...

    def drain_checks(self, hosts: Sequence[str]) -> dict[str, DrainCheck]:
        """What runs on each of ``hosts`` (disabled before), from one fresh read for all of
        them; a host the read does not show is left out. ``SchedulerError`` when it cannot be
        read."""
        ...

    def listed(self, hosts: Sequence[str]) -> frozenset[str]:
        """Which of ``hosts`` the scheduler still has as hosts that may run jobs (one read)."""
        ...

    def prepare(self, nodes: Sequence[NodeSpec]) -> dict[str, SchedulerError]:
        """What the scheduler needs before the add play (Slurm: the nodes' addresses), for all
        of ``nodes`` at once: the ones it could not prepare, each with its error (``transient``:
        the scheduler did not answer, which is no node's fault). Empty: all are prepared."""
        ...

    def await_registered(self, names: Sequence[str], stopping: threading.Event) -> dict[str, str] | None:
        """Wait until the scheduler has each new node up after its play: those that are not, with
        why (empty: all are); None when ``stopping`` was set meanwhile."""
        ...

    def out_of_service(self, reasons: Mapping[str, str]) -> None:
        """These nodes no longer serve, each with why (their remove play went through, or they
        were stopped into a warm pool): what the scheduler needs then, for all of them at once
        (Slurm: power them down, so they can be asked for again); nothing for a scheduler whose
        remove play did it all."""
        ...

    def resumed(self, host: str) -> None:
        """A node started again from the warm pool is up: let jobs land on it again."""
        ...

    def release(self, hosts: Sequence[str], reason: str) -> None:
        """Give back nodes the scheduler asked for and elb will not bring up (their jobs wait
        again); a scheduler that never asks for nodes has nothing to give back."""
        ...

    def requeue(self, host: str) -> Requeued: ...
