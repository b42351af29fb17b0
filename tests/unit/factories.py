"""Small builders for snapshots, node records and configs used across unit tests."""

from __future__ import annotations

from pathlib import Path

from elb.core.config import Config, parse_config
from elb.core.interfaces import CloudSettings, Instance, InstanceWord
from elb.core.model import Host, Job, JobPhase, Node, NodeState, QueueInstance, Snapshot
from elb.schedulers.sge.states import job_phase, queue_flags

T0 = 1_800_000_000.0  # a fixed "now" for tests
HOUR = 3600.0
EC2 = CloudSettings("EC2", 600.0)  # what the pass reads of the default config's cloud.ec2


def host(name: str, slots: int = 8, used: int = 0, reserved: int = 0, states: str = "", **extra: int) -> Host:
    """A host with one all.q instance; ``extra`` adds more queues as name=used (same size);
    ``states``: Grid Engine's letters."""
    flags = queue_flags(states)
    queues = [QueueInstance("all.q", name, slots, used, reserved, flags)]
    queues += [QueueInstance(q, name, slots, u, 0, flags) for q, u in extra.items()]
    return Host(name, tuple(queues), num_proc=slots)


def pending(job_id: int, waited: float, slots: int = 1, tasks: int = 1, state: str = "qw", now: float = T0) -> Job:
    """A waiting job; ``state``: Grid Engine's letters."""
    return Job(job_id, f"job{job_id}", "sgeuser", state, job_phase(state), slots, submitted=now - waited, tasks=tasks)


def running(job_id: int, on: str, slots: int = 1, queue: str = "all.q", now: float = T0, ran: float = 50.0) -> Job:
    """A job running ``ran`` seconds, without h_rt: younger than a boot time, the forecast expects
    it to end within one (its slots count as about to free); older, it runs on."""
    return Job(
        job_id,
        f"job{job_id}",
        "sgeuser",
        "r",
        JobPhase.RUNNING,
        slots,
        submitted=now - ran - 50,
        started=now - ran,
        queue=f"{queue}@{on}",
    )


def node(name: str, age: float, state: NodeState = NodeState.READY, now: float = T0, **kw: object) -> Node:
    return Node(name, state, launched_at=now - age, ready_at=now - age + 60, **kw)  # type: ignore[arg-type]


def snap(jobs: list[Job] | None = None, hosts: list[Host] | None = None, now: float = T0) -> Snapshot:
    return Snapshot(now, tuple(jobs or ()), tuple(hosts or ()))


def small_config(state_dir: Path, **policy: object) -> Config:
    """The config of most pass tests: state in ``state_dir``, at most 4 nodes of 8 slots; ``policy``
    adds or changes policy settings."""
    return parse_config({"state_dir": str(state_dir), "policy": {"max_nodes": 4, "slots_per_node": 8, **policy}})


def instance(name: str, state: InstanceWord = "running") -> Instance:
    """The cloud's instance of node ``name``, launched an hour before ``T0``."""
    return Instance(f"i-{name}", name, state, T0 - 3600, private_ip="10.0.0.9")
