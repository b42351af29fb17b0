"""``nodes --json`` and ``status --json`` give a node's slots: what the scheduler shows the host
has (what jobs get), else the journal's figure (the cloud's), never ``null`` for a node the
scheduler shows."""

from __future__ import annotations

from elb.cli.nodeview import nodes_facts
from elb.core.model import Host, Node, NodeState, QueueInstance, Snapshot
from elb.schedulers.sge.states import queue_flags
from tests.unit.factories import T0


def test_a_node_without_slots_in_the_journal_has_the_scheduler_hosts() -> None:
    records = [
        Node("node001", NodeState.READY, T0 - 900, "i-1", ready_at=T0 - 800),  # the local cloud: no slots
        Node("node002", NodeState.READY, T0 - 900, "i-2", ready_at=T0 - 800, slots=4),
        Node("node003", NodeState.PROVISIONING, T0 - 60, "i-3"),  # not in the scheduler yet
    ]
    hosts = (
        Host(
            "node001",
            (
                QueueInstance("all.q", "node001", 2, 0, 0, queue_flags("")),
                QueueInstance("big.q", "node001", 2, 0, 0, queue_flags("")),
            ),
        ),
        Host("node002", (QueueInstance("all.q", "node002", 2, 0, 0, queue_flags("")),)),
    )
    facts = {f.name: f for f in nodes_facts(records, Snapshot(T0, (), hosts), T0, 3600.0)}
    assert facts["node001"].slots == 2  # a queue instance's slots: the host's two queues share them
    assert facts["node002"].slots == 2  # the scheduler's, over the cloud's figure the journal has
    assert facts["node003"].slots is None
    unread = {f.name: f for f in nodes_facts(records, None, T0, 3600.0)}
    assert unread["node001"].slots is None and unread["node002"].slots == 4
