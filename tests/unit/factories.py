"""Small builders for snapshots and node records used across unit tests."""

from __future__ import annotations

from elb.core.model import Host, Job, Node, NodeState, QueueInstance, Snapshot

T0 = 1_800_000_000.0  # a fixed "now" for tests


def host(name: str, slots: int = 8, used: int = 0, reserved: int = 0, states: str = "", **extra: int) -> Host:
    """A host with one all.q instance; ``extra`` adds more queues as name=used (same size)."""
    queues = [QueueInstance("all.q", name, slots, used, reserved, states)]
    queues += [QueueInstance(q, name, slots, u, 0, states) for q, u in extra.items()]
    return Host(name, tuple(queues), num_proc=slots)


def pending(job_id: int, waited: float, slots: int = 1, tasks: int = 1, state: str = "qw", now: float = T0) -> Job:
    return Job(job_id, f"job{job_id}", "sgeuser", state, slots, submitted=now - waited, tasks=tasks)


def running(job_id: int, on: str, slots: int = 1, queue: str = "all.q", now: float = T0) -> Job:
    return Job(
        job_id,
        f"job{job_id}",
        "sgeuser",
        "r",
        slots,
        submitted=now - 100,
        started=now - 50,
        queue=f"{queue}@{on}",
    )


def node(name: str, age: float, state: NodeState = NodeState.READY, now: float = T0, **kw: object) -> Node:
    return Node(name, state, launched_at=now - age, ready_at=now - age + 60, **kw)  # type: ignore[arg-type]


def snap(jobs: list[Job] | None = None, hosts: list[Host] | None = None, now: float = T0) -> Snapshot:
    return Snapshot(now, tuple(jobs or ()), tuple(hosts or ()))
