"""What an admin sees of a managed node: its journal record joined with what SGE shows of it.

One place for the figures ``elb status`` prints and ``elb nodes`` prints or gives as JSON.
Pure: the snapshot (None when SGE could not be read) and the time are arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from elb.model import Node, NodeState, Snapshot
from elb.reconcile import lost_for
from elb.timeline import DURATION_NAMES, Timeline


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    state: str
    instance_id: str | None
    instance_type: str | None
    private_ip: str | None
    slots: int | None
    launched_at: float
    ready_at: float | None
    uptime: float  # seconds since launch or restart (start of billing); 0 while stopped in a warm pool
    into_period: float  # seconds into its current billing period
    jobs: list[int] | None  # job ids SGE lists on it; None: SGE not read
    idle_for: float | None  # seconds since SGE last showed work on it (None: busy now, or never seen busy)
    lost_for: float  # seconds SGE has not reached it (ready nodes; 0 while reached)
    # Its boot timeline (elb.timeline): seconds of each step (None: not reached, or not known),
    # and when it reached each step it reached (None: at a time not journalled).
    boot_steps: dict[str, float | None]
    boot_times: dict[str, float | None]
    stopped_for: float | None = None  # seconds stopped in a warm pool (None: not stopped)


def node_facts(
    n: Node, snap: Snapshot | None, now: float, billing_period: float, timeline: Timeline | None = None
) -> NodeFacts:
    pooled = n.state is NodeState.STOPPED
    uptime = 0.0 if pooled else max(0.0, now - n.launched_at)
    stopped_since = n.stopped_at if n.stopped_at is not None else n.updated_at
    jobs = sorted({j.job_id for j in snap.jobs_on(n.name)}) if snap is not None else None
    host = snap.host(n.name) if snap is not None else None
    busy_now = bool(jobs) or (host is not None and host.busy)
    since = n.last_busy_at if n.last_busy_at is not None else n.ready_at
    idle = None if busy_now or since is None or n.state is not NodeState.READY else max(0.0, now - since)
    lost = lost_for(n, snap, now) if snap is not None and n.state is NodeState.READY else 0.0
    return NodeFacts(
        name=n.name,
        state=n.state.value,
        instance_id=n.instance_id,
        instance_type=n.instance_type,
        private_ip=n.private_ip,
        slots=n.slots,
        launched_at=n.launched_at,
        ready_at=n.ready_at,
        uptime=uptime,
        into_period=uptime % billing_period,
        jobs=jobs,
        idle_for=idle,
        lost_for=lost,
        boot_steps=timeline.durations() if timeline is not None else dict.fromkeys(DURATION_NAMES),
        boot_times={} if timeline is None else {s.value: at for s, at in timeline.steps.items()},
        stopped_for=max(0.0, now - stopped_since) if pooled and stopped_since is not None else None,
    )
