"""In-memory stand-ins for SGE, the cloud and the provisioner, for orchestration unit tests.

Why fakes here: these tests pin the *order* of the actuator's steps and inject exact
interleavings (a job landing between ``qmod -d`` and the re-check, a provisioning failure on
one of two nodes, an unreadable qstat) deterministically, which the real parts cannot do on
demand. The real adapters run the same flows end to end in ``tests/cluster``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elb.core.interfaces import (
    CloudError,
    HostResult,
    Instance,
    JobProcesses,
    LaunchResult,
    NodeBoot,
    NodeSpec,
    Outcome,
    Witness,
)
from elb.core.model import NO_FLAGS, Host, Job, JobPhase, QueueFlags, QueueInstance, Snapshot
from elb.schedulers.sge.commands import Rescheduled
from elb.schedulers.sge.demand import Site
from elb.schedulers.sge.site import build_site

GATE_BOUND = 60.0  # seconds a gated playbook waits at most for the test
THROTTLED = "RequestLimitExceeded after retries: Request limit exceeded."  # EC2 refusing for the request rate


@dataclass
class FakeSge:
    now: float
    jobs: list[Job] = field(default_factory=list)
    hosts: dict[str, Host] = field(default_factory=dict)
    disabled: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    fail_reads: int = 0  # the next N reads raise
    on_disable: Callable[[str], None] | None = None  # inject a job landing during drain
    site_error: str | None = None  # read_site raises with this message
    complexes: str = "qconf-sc-default.txt"  # the fixture read_site's complexes come from
    starts: dict[int, float] = field(default_factory=dict)  # qsub -a times by job number
    not_rerunnable: set[int] = field(default_factory=set)  # jobs qmod -rq cannot requeue

    def read_snapshot(self) -> Snapshot:
        self.calls.append("read")
        if self.fail_reads:
            self.fail_reads -= 1
            raise RuntimeError("qstat: error: unable to contact qmaster")
        hosts = tuple(Host(h.name, tuple(self._q(q) for q in h.queues), h.num_proc) for h in self.hosts.values())
        return Snapshot(self.now, tuple(self.jobs), hosts)

    def _q(self, q: QueueInstance) -> QueueInstance:
        flags = q.flags | (QueueFlags.DISABLED if q.host in self.disabled else NO_FLAGS)
        used = sum(j.slots for j in self.jobs if j.queue == q.name)
        return QueueInstance(q.queue, q.host, q.slots_total, used, q.slots_reserved, flags)

    def add_host(self, name: str, slots: int = 8) -> None:
        self.hosts[name] = Host(name, (QueueInstance("all.q", name, slots, 0),), slots)

    def disable_host(self, host: str) -> None:
        self.calls.append(f"disable {host}")
        self.disabled.add(host)
        if self.on_disable is not None:
            self.on_disable(host)

    def enable_host(self, host: str) -> None:
        self.calls.append(f"enable {host}")
        self.disabled.discard(host)

    def reschedule_host(self, host: str) -> Rescheduled:
        """As ``qmod -rq``: requeue the jobs on ``host`` (all rerunnable here unless their id is in
        ``not_rerunnable``)."""
        self.calls.append(f"reschedule {host}")
        pushed, refused = [], []
        kept: list[Job] = []
        for j in self.jobs:
            if j.host != host:
                kept.append(j)
            elif j.job_id in self.not_rerunnable:
                refused.append(j.job_id)
                kept.append(j)
            else:
                pushed.append(str(j.job_id))
                kept.append(dataclasses.replace(j, state="Rq", phase=JobPhase.WAITING, queue=None, started=None))
        self.jobs = kept
        return Rescheduled(tuple(pushed), tuple(refused))

    def set_hard_requests(self, job: int, requests: Mapping[str, str]) -> None:
        """As ``qalter -l``: the job's whole hard resource list."""
        self.calls.append(f"qalter -l {','.join(f'{k}={v}' for k, v in requests.items())} {job}")
        self.jobs = [dataclasses.replace(j, hard_requests=dict(requests)) if j.job_id == job else j for j in self.jobs]

    def configured_exec_hosts(self) -> frozenset[str]:
        """``qconf -sel``: every host registered, reachable or not (``hosts`` here)."""
        self.calls.append("qconf -sel")
        return frozenset(self.hosts)

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        """``qstat -xml -j``: the ``qsub -a`` times in ``starts``."""
        self.calls.append(f"qstat -j {','.join(map(str, job_ids))}")
        return {j: self.starts.get(j) for j in job_ids}

    def read_site(self) -> Site:
        """``qconf -sc``, the PEs and the global host: SGE's default complexes, ``smp``
        (``$pe_slots``) and ``mpi`` (``$fill_up``), from the fixtures; ``site_error`` raises."""
        self.calls.append("qconf site")
        if self.site_error is not None:
            raise RuntimeError(self.site_error)
        return default_site(self.complexes)


def default_site(complexes: str = "qconf-sc-default.txt") -> Site:
    """``complexes``: SGE's defaults, or ``qconf-sc-site.txt`` (a site that adds a ``gpu``
    consumable and makes ``h_vmem`` consumable)."""
    here = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"
    pes = {name: (here / f"qconf-sp-{name}.txt").read_text() for name in ("smp", "mpi")}
    return build_site((here / complexes).read_text(), pes, "hostname global\ncomplex_values NONE\n")


@dataclass
class FakeCloud:
    now: float
    instances: dict[str, Instance] = field(default_factory=dict)
    fail_names: set[str] = field(default_factory=set)
    raise_on_launch: str | None = None
    throttled_launches: int = 0  # the next N launch calls are refused for the account's request rate
    counter: int = 0
    terminated: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    stop_calls: list[list[str]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    start_calls: list[list[str]] = field(default_factory=list)
    not_starting: set[str] = field(default_factory=set)  # instances a start leaves stopped
    # instances the cloud will not stop or start: a call with any of them is refused, nothing done
    refused: set[str] = field(default_factory=set)
    boots: dict[str, NodeBoot] = field(default_factory=dict)  # what each launched node ran at boot

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        self.boots.update(boot or {})
        if self.raise_on_launch:
            raise CloudError(self.raise_on_launch)
        if self.throttled_launches:
            self.throttled_launches -= 1
            raise CloudError(f"launching {names[0]}: {THROTTLED}", retryable=True, throttled=True)
        out: list[Instance] = []
        failed: dict[str, str] = {}
        for i, n in enumerate(names):
            if stopping is not None and stopping.is_set():
                return LaunchResult(tuple(out), failed, not_started=tuple(names[i:]))
            if n in self.fail_names:
                failed[n] = "boot timeout"
                continue
            self.counter += 1
            inst = Instance(f"i-{self.counter:04d}", n, "running", self.now, f"10.0.0.{self.counter}", slots=8)
            self.instances[inst.instance_id] = inst
            out.append(inst)
        return LaunchResult(tuple(out), failed)

    def new_node_slots(self) -> int | None:
        return 8  # what launch gives its instances

    def list_workers(self) -> list[Instance]:
        return list(self.instances.values())

    def terminate(self, instance_ids: Sequence[str]) -> None:
        for i in instance_ids:
            if i not in self.instances:
                raise CloudError(f"{i} is not a worker of this cluster")
            del self.instances[i]
            self.terminated.append(i)

    def stop(self, instance_ids: Sequence[str]) -> None:
        self.stop_calls.append(list(instance_ids))
        self._refuse("stop", instance_ids)
        for i in instance_ids:
            if i not in self.instances:
                raise CloudError(f"{i} is not a worker of this cluster")
            self.instances[i] = dataclasses.replace(self.instances[i], state="stopped")
            self.stopped.append(i)

    def _refuse(self, what: str, instance_ids: Sequence[str]) -> None:
        bad = [i for i in instance_ids if i in self.refused]
        if bad:
            raise CloudError(f"refusing to {what} {', '.join(bad)}")

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        """Start stopped instances; each gets a new address (EC2 may give one). Those in
        ``not_starting`` stay stopped, reported failed."""
        self.start_calls.append(list(instance_ids))
        self._refuse("start", instance_ids)
        out = []
        failed = {}
        for i in instance_ids:
            if i not in self.instances:
                raise CloudError(f"{i} is not a worker of this cluster")
            if i in self.not_starting:
                failed[self.instances[i].name] = "InsufficientInstanceCapacity"
                continue
            self.counter += 1
            inst = dataclasses.replace(self.instances[i], state="running", private_ip=f"10.0.1.{self.counter}")
            self.instances[i] = inst
            self.started.append(i)
            out.append(inst)
        return LaunchResult(tuple(out), failed)


@dataclass
class FakeProvisioner:
    sge: FakeSge
    fail: dict[str, str] = field(default_factory=dict)  # node -> failing task
    unreachable_adds: bool = False  # every new node is unreachable (never registered in SGE)
    fail_remove_all: bool = False  # every deregistration play fails
    busy_on_remove: set[str] = field(default_factory=set)
    # A playbook that takes its time: add / remove runs wait until the test sets the event
    # (bounded, so that code that runs them inline fails a test instead of hanging it).
    gate_add: threading.Event | None = None
    gate_remove: threading.Event | None = None
    fail_remove: set[str] = field(default_factory=set)  # the deregistration play fails on these
    log: list[str] = field(default_factory=list)
    playbooks: list[str] = field(default_factory=list)  # the plays run, in order
    # probe_jobs: the nodes that run job processes, and the ones that cannot be asked (with why).
    job_processes: set[str] = field(default_factory=set)
    probe_fails: dict[str, str] = field(default_factory=dict)
    probes: list[tuple[str, ...]] = field(default_factory=list)  # the nodes of each probe run

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        self.playbooks.append(playbook)
        out = {}
        if self.gate_add is not None:
            self.log.append("add started")
            self.gate_add.wait(GATE_BOUND)
            self.log.append("add released")
        for n in nodes:
            self.log.append(f"add {n.name}")
            if self.unreachable_adds:
                out[n.name] = HostResult(n.name, Outcome.UNREACHABLE, "Gathering Facts", "no route to host")
                continue
            if on_reached is not None:
                on_reached(n.name)
            if n.name in self.fail:
                self.sge.add_host(n.name)  # half-registered: the failure came after qconf -ah
                out[n.name] = HostResult(n.name, Outcome.FAILED, self.fail[n.name], "boom")
            else:
                self.sge.add_host(n.name, n.slots or 8)
                out[n.name] = HostResult(n.name, Outcome.OK)
        return out

    def boot_plans(self, names: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, NodeBoot]:
        """A boot per node that names it (the real ones: elb.provision.boot)."""
        self.log.append(f"boot plans {','.join(names)}")
        return {n: NodeBoot(files={"/etc/elb/boot-inventory.yml": n}, argv=("true",)) for n in names}

    def probe_jobs(self, nodes: Sequence[NodeSpec]) -> dict[str, Witness]:
        self.probes.append(tuple(n.name for n in nodes))
        out = {}
        for n in nodes:
            if n.name in self.probe_fails:
                out[n.name] = Witness(n.name, JobProcesses.UNKNOWN, self.probe_fails[n.name])
            elif n.name in self.job_processes:
                out[n.name] = Witness(n.name, JobProcesses.FOUND, "sge_shepherd")
            else:
                out[n.name] = Witness(n.name, JobProcesses.NONE)
        return out

    def remove_nodes(
        self, playbook: str, nodes: Sequence[NodeSpec], existing: Sequence[NodeSpec]
    ) -> dict[str, HostResult]:
        self.playbooks.append(playbook)
        out = {}
        if self.gate_remove is not None:
            self.log.append("remove started")
            self.gate_remove.wait(GATE_BOUND)
            self.log.append("remove released")
        for n in nodes:
            self.log.append(f"remove {n.name}")
            if n.name in self.busy_on_remove:
                out[n.name] = HostResult(n.name, Outcome.BUSY)
                continue
            if n.name in self.fail_remove or self.fail_remove_all:
                out[n.name] = HostResult(n.name, Outcome.FAILED, "Remove the exec host", "boom")
                continue
            self.sge.hosts.pop(n.name, None)
            self.sge.disabled.discard(n.name)
            out[n.name] = HostResult(n.name, Outcome.OK)
        return out
