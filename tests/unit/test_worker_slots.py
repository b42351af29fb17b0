"""A worker's slots, one rule (``elb.core.state.worker_slots``): its host's count as the scheduler
shows it, else its record's (what it was launched with), else the caller's size of a node it knows
nothing of."""

from __future__ import annotations

from elb.core.demand import DemandSplit, NotDemand
from elb.core.model import Host, Node, NodeState, Plan, QueueInstance, Removal
from elb.core.planner import kept_for_due
from elb.core.state import join, worker_slots
from tests.unit.factories import T0, host, node, pending, snap


def _host(name: str, *totals: int) -> Host:
    return Host(name, tuple(QueueInstance(f"q{i}.q", name, t, 0, 0) for i, t in enumerate(totals)))


def _record(slots: int | None) -> Node:
    return Node("node001", NodeState.READY, T0 - 900, "i-1", slots=slots)


def test_the_host_s_count_comes_first_every_queue_instance_of_it() -> None:
    assert worker_slots(_record(4), _host("node001", 8), otherwise=1) == 8
    assert worker_slots(_record(4), _host("node001", 8, 2), otherwise=1) == 10  # ``Host.slots_total``
    assert worker_slots(None, _host("node001", 8), otherwise=1) == 8  # a host elb does not manage


def test_a_host_that_shows_no_slot_falls_back_to_the_record() -> None:
    assert worker_slots(_record(4), _host("node001", 0), otherwise=1) == 4
    assert worker_slots(_record(4), Host("node001", ()), otherwise=1) == 4


def test_without_a_host_the_record_s_slots() -> None:
    """A booting worker is counted by its record: no host is passed."""
    assert worker_slots(_record(16), otherwise=8) == 16


def test_unknown_slots_are_the_caller_s_size() -> None:
    assert worker_slots(_record(None), otherwise=8) == 8
    assert worker_slots(_record(0), otherwise=8) == 8  # 0: not known
    assert worker_slots(_record(None), _host("node001", 0), otherwise=1) == 1
    assert worker_slots(None, None, otherwise=3) == 3


def _kept(need: int, hosts: list[Host], records: list[Node]) -> tuple[str, ...]:
    """The nodes ``kept_for_due`` keeps of a plan removing every record, for a job of ``need``
    slots due in a minute."""
    job = pending(5, 10.0, slots=need)
    state = join(records, (), snap([], hosts))
    plan = Plan(remove=tuple(Removal(r.name, "idle") for r in records))
    due = DemandSplit(state.snapshot, (NotDemand(job, "not yet", until=T0 + 60),))
    kept = kept_for_due(plan, due, state, lead=120.0, now=T0)
    return tuple(sorted({r.name for r in records} - {r.node for r in kept.remove}))


def test_the_nodes_kept_for_a_due_job_count_their_slots_by_the_one_rule() -> None:
    a = node("node001", 900, slots=4)
    b = node("node002", 900, slots=4)
    assert _kept(8, [host("node001", 8), host("node002", 8)], [a, b]) == ("node001",)  # the host's 8
    assert _kept(8, [host("node001", 0), host("node002", 0)], [a, b]) == ("node001", "node002")  # 4 + 4
    unknown = [node("node001", 900), node("node002", 900), node("node003", 900)]
    assert _kept(2, [], unknown) == ("node001", "node002")  # 1 each
