"""What ``elb status`` and ``elb nodes`` show of each node comes from the joined state
(``elb.core.state.join``): its predicates, not a second definition of busy, idle or lost."""

from __future__ import annotations

from elb.cli.nodeview import nodes_facts
from elb.core.model import Host, Node, NodeState, QueueInstance, Snapshot
from elb.core.state import join
from elb.schedulers.sge.states import queue_flags
from tests.unit.factories import T0, running

RECORDS = [
    Node("node001", NodeState.READY, T0 - 900, "i-1", ready_at=T0 - 800, last_busy_at=T0 - 100),
    # busy last under an earlier life of the name: idle since it became ready again
    Node("node002", NodeState.READY, T0 - 900, "i-2", ready_at=T0 - 300, last_busy_at=T0 - 5000),
    Node("node003", NodeState.PROVISIONING, T0 - 60, "i-3"),
    Node("node004", NodeState.READY, T0 - 900, "i-4", ready_at=T0 - 800, last_up_at=T0 - 300),
    Node("node005", NodeState.TERMINATED, T0 - 9000, "i-5", ready_at=T0 - 8000),
    Node("node006", NodeState.READY, T0 - 900, "i-6", ready_at=T0 - 800),
]


def _host(name: str, used: int = 0, states: str = "") -> Host:
    return Host(name, (QueueInstance("all.q", name, 8, used, 0, queue_flags(states)),))


SNAP = Snapshot(
    T0,
    (running(7, "node006", slots=2), running(8, "node006"), running(9, "node005")),
    (_host("node001"), _host("node002"), _host("node004", states="u"), _host("node006", used=3)),
)


def test_facts_are_the_joined_states_predicates() -> None:
    facts = {f.name: f for f in nodes_facts(RECORDS, SNAP, T0, 3600.0)}
    state = join(RECORDS, (), SNAP, include_gone=True)
    assert list(facts) == [n.name for n in RECORDS]  # the journal's order, gone records too when given
    for m in state.nodes:
        f = facts[m.name]
        assert f.jobs == sorted(j.job_id for j in m.jobs)
        assert f.idle_for == (None if m.idle_since is None else T0 - m.idle_since)
        assert f.lost_for == (m.lost_for() if m.ready else 0.0)
    assert facts["node001"].idle_for == 100
    assert facts["node002"].idle_for == 300  # not 5000: the one rule, Node.quiet_since
    assert facts["node004"].lost_for == 300
    assert facts["node006"].jobs == [7, 8] and facts["node006"].idle_for is None
    assert facts["node005"].jobs == [9]


def test_without_sge_the_facts_are_the_journals() -> None:
    facts = nodes_facts(RECORDS, None, T0, 3600.0)
    assert [f.jobs for f in facts] == [None] * len(RECORDS)
    assert {f.idle_for for f in facts} == {None}
    assert {f.lost_for for f in facts} == {0.0}
