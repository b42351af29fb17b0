"""The narrow interfaces behind which the imperative shell does its I/O.

Implementations: clouds in ``elb.clouds`` (``ec2``, ``local``), the provisioner in
``elb.provision``. The core never imports an implementation; ``elb.service.factory`` picks one
from the config.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from elb.core.frozen import quick_init

# Tag keys every instance elb launches carries (EC2 and local alike).
TAG_CLUSTER = "elb:cluster"
TAG_ROLE = "elb:role"  # "master" | "worker"
TAG_MANAGED_BY = "elb:managed-by"  # always "elb"
TAG_NAME = "Name"  # node name, e.g. node006
# The node group of a worker elb launched (config node_groups; "default" without them): what
# the dynamic inventory and an adoption place it by. A worker launched before elb set it gets it
# from the daemon when the cloud can tag (``TagsGroups``).
TAG_GROUP = "elb:group"


class InstanceState(enum.StrEnum):
    """An instance's state in the core's words; each cloud's adapter translates its own into them
    (EC2's ``shutting-down`` and ``terminated`` are ``gone``)."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"  # exists and costs (its disks), can start again
    GONE = "gone"  # shutting down or terminated


# The same words as plain strings: an ``Instance`` takes either (a member equals its word).
InstanceWord = Literal["pending", "running", "stopping", "stopped", "gone"]


class CloudError(Exception):
    """A cloud call failed. ``retryable`` says whether trying again later may help; ``throttled``:
    the cloud refused it for the account's API request rate (retryable, and no fault of what was
    asked for: the launch back-off pauses briefly, ``elb.core.backoff``)."""

    def __init__(self, message: str, *, retryable: bool = False, throttled: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable or throttled
        self.throttled = throttled


@quick_init
@dataclass(frozen=True, slots=True)
class Instance:
    """One worker instance as the cloud reports it."""

    instance_id: str
    name: str  # node name from the Name tag
    state: InstanceState | InstanceWord  # in the core's words: its cloud's adapter translates
    launched_at: float  # POSIX seconds
    private_ip: str | None = None
    instance_type: str | None = None
    image_id: str | None = None
    slots: int | None = None
    # Its tags as the cloud listed them (EC2: all of them; the local cloud: elb's labels): the
    # planner reads whether it has its node group's (``TAG_GROUP``).
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    template_version: str | None = None  # the launch template's version it was launched from


@dataclass(frozen=True, slots=True)
class CloudSettings:
    """What the pass reads of a cloud's section of the config, in the core's words: each cloud's
    module makes it (``elb.core.drivers.CloudModule.settings``)."""

    name: str  # the cloud in messages ("EC2")
    boot_timeout: float  # seconds from a launch to a node that runs and answers, at most


@dataclass(frozen=True, slots=True)
class LaunchResult:
    """Outcome of a launch: the instances that run, the names that failed with why (``throttled``:
    those of them whose launch the cloud refused for the account's API request rate), and the
    names not started because elb was told to stop (nothing of theirs exists in the cloud)."""

    launched: tuple[Instance, ...]
    failed: Mapping[str, str] = field(default_factory=dict, hash=False)  # node name -> reason
    not_started: tuple[str, ...] = ()
    throttled: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class NodeBoot:
    """What a new node runs on itself at its first boot (``provision.mode: boot``): ``files``
    written first (absolute path on the node -> text; root's, mode 0600), then ``argv``, its
    output kept in ``log`` on the node."""

    files: Mapping[str, str] = field(hash=False)
    argv: tuple[str, ...]
    log: str = "/var/log/elb-boot.log"

    @property
    def command(self) -> tuple[str, ...]:
        """``argv`` with its output sent to ``log``: a fixed ``sh -c`` taking the log file and
        the command as its arguments (no data goes into the shell string), what a cloud runs."""
        return ("/bin/sh", "-c", 'log=$1; shift; exec "$@" > "$log" 2>&1', "sh", self.log, *self.argv)


@runtime_checkable
class Cloud(Protocol):
    """Launch, list, stop, start and terminate the workers of one cluster.

    Implementations filter everything by the cluster's tags: they never list or
    terminate an instance that is not a worker of this cluster, and never the master.
    """

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        """Start one worker per name, wait until each runs with a private address; ``groups``:
        the node group of each name (config ``node_groups``), for the way it is launched;
        ``boot``: what each node runs on itself at its first boot (None: nothing, elb's add play
        configures it). Once ``stopping`` is set no further cloud call starts an instance: the
        names not yet started are ``not_started``; the ones started are waited for as usual."""
        ...

    def list_workers(self) -> list[Instance]:
        """The cluster's worker instances that are not terminated."""
        ...

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Terminate these workers (ids not belonging to the cluster's workers are refused)."""
        ...

    def stop(self, instance_ids: Sequence[str]) -> None:
        """Stop these workers, keeping their disks and names (a warm pool), and wait until they
        are stopped; ids not belonging to the cluster's workers are refused."""
        ...

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        """Start these stopped workers and wait until each runs with a private address (it may
        have changed); the ones that did not run, by node name, in ``failed``."""
        ...

    def new_node_slots(self) -> int | None:
        """Slots of a worker ``launch`` would start now (its processors); None if unknown."""
        ...


class Outcome(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    BUSY = "busy"  # removal refused: a job landed on the node while draining


@dataclass(frozen=True, slots=True)
class HostResult:
    """How provisioning went on one host."""

    host: str
    outcome: Outcome
    task: str | None = None  # failing task name
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """What the provisioner needs to know of a node (no cloud call at provisioning time)."""

    name: str
    private_ip: str
    slots: int | None = None
    group: str | None = None  # its node group (config node_groups), as the journal has it
    market: str | None = None  # its group's market, "on-demand" or "spot"; None: not known
    # Its scheduler's variables for this node's roles, made from its group by the scheduler's
    # module (``elb.core.drivers.NodePlays.group_vars``: where it joins the scheduler, what it
    # offers there); opaque here, host vars of the plays' inventory. Empty: the roles' settings
    # of every node (``NodePlays.variables``).
    host_vars: Mapping[str, object] = field(default_factory=dict, hash=False)


class JobProcesses(enum.StrEnum):
    """What a node itself says when asked whether it runs job processes (``Provisioner.probe_jobs``)."""

    FOUND = "found"  # processes of a job run there (the scheduler's per-job process on the node)
    NONE = "none"  # it answered, and none run there
    UNKNOWN = "unknown"  # it could not be asked (SSH failed, no host key held, time-out): why in the detail


@dataclass(frozen=True, slots=True)
class Witness:
    """A node's own answer about job processes: the second witness asked before a node the
    scheduler showed busy is removed (``elb.core.planner.witness_needed``)."""

    host: str
    answer: JobProcesses
    detail: str = ""  # the processes found, or why it could not be asked


@runtime_checkable
class Provisioner(Protocol):
    """Configure nodes into the cluster and take them out again (Ansible behind it), with the
    scheduler's plays (``elb.core.scheduler.Scheduler.add_playbook`` and ``remove_playbook``)."""

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        """Make ``nodes`` part of the cluster; ``existing`` workers only get their hosts lines
        updated. ``on_reached(name)``: called once per node, as soon as the run has reached it
        (its first task there succeeded), from the thread that runs the playbook."""
        ...

    def remove_nodes(
        self, playbook: str, nodes: Sequence[NodeSpec], existing: Sequence[NodeSpec]
    ) -> dict[str, HostResult]:
        """Drain-check, deregister and unexport ``nodes``; BUSY if a job landed meanwhile."""
        ...

    def boot_plans(self, names: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, NodeBoot]:
        """What each of ``names`` (launched together) runs on itself at its first boot to
        configure itself (``provision.mode: boot``); ValueError when it cannot be made."""
        ...

    def probe_jobs(self, nodes: Sequence[NodeSpec]) -> dict[str, Witness]:
        """Ask each of ``nodes`` itself, in one bounded run over SSH with the host key elb holds
        for it (never one taken at first contact), whether job processes run there: an answer
        for every node, ``UNKNOWN`` with why when it could not be asked."""
        ...


class NoticeKind(enum.StrEnum):
    INTERRUPTION = "spot-interruption"  # taken back in about two minutes
    REBALANCE = "rebalance"  # interruption risk went up
    SCHEDULED = "scheduled-change"  # a retirement or maintenance the cloud scheduled
    STATE = "state-change"  # the instance is stopping, shutting down, terminated, ...
    IMPAIRED = "status-check-failed"  # the cloud's status checks of the instance report it impaired

    @property
    def doomed(self) -> bool:
        """The instance will go away: no new job should land on it."""
        return self in (NoticeKind.INTERRUPTION, NoticeKind.SCHEDULED, NoticeKind.IMPAIRED)

    @property
    def retire(self) -> bool:
        """Take no new job on the instance and remove it once idle: it will go away, or (a
        rebalance recommendation) its risk of interruption went up, so its replacement for new
        work is best started now, before an interruption warning leaves two minutes."""
        return self.doomed or self is NoticeKind.REBALANCE


@dataclass(frozen=True, slots=True)
class Notice:
    kind: NoticeKind
    instance_id: str
    time: float  # POSIX seconds of the event
    detail: str  # one line for the log: what the cloud said

    def describe(self) -> str:
        return f"{self.kind.value} for {self.instance_id}: {self.detail}"


class NoticeSource(Protocol):
    """The cloud's notices about workers (EC2: ``elb.clouds.ec2.notices.Ec2Notices``)."""

    def poll(self) -> Sequence[Notice]: ...


# What a cloud or a provisioner may do beyond its interface: each capability is optional, declared
# here with what the daemon does without it, and asked for by ``isinstance`` (never by name).


@runtime_checkable
class ReportsHealth(Protocol):
    """A cloud that reports its workers' status checks (EC2's ``DescribeInstanceStatus``) as
    notices (``NoticeKind.IMPAIRED``). Without it: no early warning of an impaired worker; the
    reconcile still sees one that is gone."""

    def health(self, instances: Sequence[Instance]) -> Sequence[Notice]: ...


@runtime_checkable
class VersionsTemplates(Protocol):
    """A cloud whose node groups launch from versioned launch templates and can say each group's
    version now (node group name -> version). Without it: a stopped node of the warm pool is
    never retired for an old template version."""

    def template_versions(self) -> Mapping[str, str]: ...


@runtime_checkable
class RestartsServices(Protocol):
    """A cloud that says whether a restarted instance starts its services by itself
    (``restart_runs_services``: EC2's boot runs them; podman's containers do not). Without it: they
    are taken to start by themselves, and only a moved address gets the add play again."""

    restart_runs_services: bool


@runtime_checkable
class TagsGroups(Protocol):
    """A cloud that can tag a running or stopped worker afterwards: ``tag_groups`` gives each
    instance (id -> node group name) its group's ``TAG_GROUP`` tag; ``CloudError`` when the
    cloud refused (some may be tagged). The planner plans it for a worker whose instance lacks
    the tag (launched before elb set it; ``elb.core.tagplan``). Without it (the local cloud:
    podman sets a container's labels at its creation only): such a worker stays untagged."""

    def tag_groups(self, groups: Mapping[str, str]) -> None: ...


@runtime_checkable
class ReapsLeftovers(Protocol):
    """A provisioner that can stop what a killed predecessor left running (its playbooks).
    Without it: nothing is reaped at start."""

    def reap_leftovers(self) -> int: ...


@runtime_checkable
class Cancels(Protocol):
    """A provisioner that can cancel its running playbooks (on a second stop signal). Without it:
    the second signal waits for them like the first."""

    def cancel(self) -> None: ...
