"""What an admin sees of a managed node: its journal record joined with what SGE shows of it.

One place for the figures ``elb status`` prints and ``elb nodes`` prints or gives as JSON.
Pure: the snapshot (None when SGE could not be read) and the time are arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from elb.core.model import Event, Node, NodeState, Snapshot
from elb.core.planner import witness_hold
from elb.core.state import ManagedNode, join
from elb.core.timeline import DURATION_NAMES, Timeline


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    state: str
    instance_id: str | None
    instance_type: str | None
    private_ip: str | None
    slots: int | None  # the scheduler's host's (what jobs get), else the journal's (the cloud's figure)
    launched_at: float
    ready_at: float | None
    uptime: float  # seconds since launch or restart (start of billing); 0 while stopped in a warm pool
    into_period: float  # seconds into its current billing period
    jobs: list[int] | None  # job ids SGE lists on it; None: SGE not read
    idle_for: float | None  # seconds a ready node has been idle (``ManagedNode.idle_since``; None: busy or not ready)
    lost_for: float  # seconds SGE has not reached it (ready nodes; 0 while reached)
    # Its boot timeline (elb.core.timeline): seconds of each step (None: not reached, or not known),
    # and when it reached each step it reached (None: at a time not journalled).
    boot_steps: dict[str, float | None]
    boot_times: dict[str, float | None]
    stopped_for: float | None = None  # seconds stopped in a warm pool (None: not stopped)
    # Why elb keeps it when its last journalled step says so (``kept_why``): a removal refused
    # (a job landed, the node runs job processes the scheduler does not list, it could not be
    # asked) or a busy node whose provisioning failed. None: not kept.
    kept: str | None = None


KEPT = "kept: "  # how the actuator's journalled detail of a node it keeps begins


def kept_why(
    events: Sequence[Event], node: Node | None = None, now: float = 0.0, *, ordered: bool = False
) -> str | None:
    """Why elb keeps a node, from its journal events (oldest first): the detail of the last
    one when it says the node is kept, else None. With its record (``node``), one kept on its own
    word that the pass at ``now`` would not drain again (``elb.core.planner.witness_hold``;
    ``ordered``: an admin ordered its removal) says so, and for how long, as the pass does."""
    detail = events[-1].detail if events else None
    if detail is None or not detail.startswith(KEPT):
        return None
    held = witness_hold(node, now, ordered=ordered) if node is not None else None
    return held if held is not None else detail.removeprefix(KEPT)


def nodes_facts(
    records: Sequence[Node],
    snap: Snapshot | None,
    now: float,
    billing_period: float,
    timelines: Mapping[str, Timeline] | None = None,
    *,
    kept: Mapping[str, str] | None = None,
) -> list[NodeFacts]:
    """The facts of each of ``records``, from one join with the snapshot (``elb.core.state.join``):
    busy, idle since and lost for are the joined state's predicates, the pass's own. ``kept``:
    why elb keeps a node, by name (``kept_why``)."""
    kept = kept or {}
    if snap is None:
        facts = [_facts(n, None, now, billing_period, (timelines or {}).get(n.name)) for n in records]
    else:
        state = join(records, (), snap, include_gone=True)
        facts = [_facts(m.record, m, now, billing_period, (timelines or {}).get(m.name)) for m in state.nodes]
    return [replace(f, kept=kept[f.name]) if f.name in kept else f for f in facts]


def _facts(n: Node, m: ManagedNode | None, now: float, billing_period: float, timeline: Timeline | None) -> NodeFacts:
    pooled = n.state is NodeState.STOPPED
    uptime = 0.0 if pooled else max(0.0, now - n.launched_at)
    stopped_since = n.stopped_at if n.stopped_at is not None else n.updated_at
    idle_since = m.idle_since if m is not None else None
    return NodeFacts(
        name=n.name,
        state=n.state.value,
        instance_id=n.instance_id,
        instance_type=n.instance_type,
        private_ip=n.private_ip,
        slots=_slots(n, m),
        launched_at=n.launched_at,
        ready_at=n.ready_at,
        uptime=uptime,
        into_period=uptime % billing_period,
        jobs=sorted({j.job_id for j in m.jobs}) if m is not None else None,
        idle_for=None if idle_since is None else max(0.0, now - idle_since),
        lost_for=m.lost_for() if m is not None and m.ready else 0.0,
        boot_steps=timeline.durations() if timeline is not None else dict.fromkeys(DURATION_NAMES),
        boot_times={} if timeline is None else {s.value: at for s, at in timeline.steps.items()},
        stopped_for=max(0.0, now - stopped_since) if pooled and stopped_since is not None else None,
    )


def _slots(n: Node, m: ManagedNode | None) -> int | None:
    """A node's slots: its largest queue instance's as the scheduler shows them (a host's queues
    share its slots), else the journal's figure, else None."""
    host = m.host if m is not None else None
    shown = max((q.slots_total for q in host.queues), default=0) if host is not None else 0
    return shown if shown > 0 else n.slots
