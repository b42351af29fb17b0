"""Reconcile: each difference between journal, cloud and SGE maps to one repair."""

from __future__ import annotations

from elb.interfaces import Instance
from elb.model import Node, NodeState
from elb.reconcile import RepairKind, plan_repairs
from tests.unit.factories import T0, host, running, snap

BOOT = 600.0
ORPHAN = 600.0


def inst(name: str, iid: str, age: float = 100.0, state: str = "running") -> Instance:
    return Instance(iid, name, state, T0 - age, "10.0.0.9")


def rec(name: str, state: NodeState, age: float = 100.0, iid: str | None = "i-1") -> Node:
    return Node(name, state, T0 - age, instance_id=iid, private_ip="10.0.0.9")


def kinds(nodes: list[Node], instances: list[Instance], hosts: list[str] | None = None) -> list[tuple[str, str]]:
    s = snap([], [host(h) for h in hosts or []])
    repairs = plan_repairs(nodes, instances, s, T0, master="master", boot_timeout=BOOT, orphan_timeout=ORPHAN)
    return [(r.kind, r.node) for r in repairs]


def test_all_agree_nothing_to_do() -> None:
    assert kinds([rec("node001", NodeState.READY)], [inst("node001", "i-1")], ["node001"]) == []


def test_crash_mid_add_provisions_or_abandons_after_boot_timeout() -> None:
    assert kinds([rec("node001", NodeState.PROVISIONING)], [inst("node001", "i-1")]) == [
        (RepairKind.PROVISION, "node001")
    ]
    old = rec("node001", NodeState.RUNNING, age=BOOT)
    assert kinds([old], [inst("node001", "i-1", age=BOOT)]) == [(RepairKind.ABANDON, "node001")]


def test_interrupted_launch_adopts_the_instance_by_name() -> None:
    node = rec("node001", NodeState.LAUNCHING, iid=None)
    assert kinds([node], [inst("node001", "i-7")]) == [(RepairKind.ADOPT, "node001")]


def test_launch_that_never_produced_an_instance_is_forgotten_after_boot_timeout() -> None:
    assert kinds([rec("node001", NodeState.LAUNCHING, age=60, iid=None)], []) == []
    assert kinds([rec("node001", NodeState.LAUNCHING, age=BOOT, iid=None)], []) == [(RepairKind.FORGET, "node001")]


def test_vanished_instance_is_deregistered_with_its_jobs_named() -> None:
    s = snap([running(42, "node001")], [host("node001", used=1)])
    repairs = plan_repairs(
        [rec("node001", NodeState.READY)], [], s, T0, master="master", boot_timeout=BOOT, orphan_timeout=ORPHAN
    )
    assert [(r.kind, r.node) for r in repairs] == [(RepairKind.VANISHED, "node001")]
    assert "SGE had jobs 42 there" in repairs[0].reason


def test_terminated_instance_state_counts_as_vanished() -> None:
    gone = inst("node001", "i-1", state="shutting-down")
    assert kinds([rec("node001", NodeState.READY)], [gone], ["node001"]) == [(RepairKind.VANISHED, "node001")]


def test_orphan_terminated_only_after_orphan_timeout_and_only_if_absent_from_sge() -> None:
    assert kinds([], [inst("node009", "i-9", age=ORPHAN - 1)]) == []
    assert kinds([], [inst("node009", "i-9", age=ORPHAN)]) == [(RepairKind.ORPHAN, "node009")]
    # tagged, unknown to the journal, but serving in SGE: adopted, not killed
    assert kinds([], [inst("node009", "i-9", age=ORPHAN)], ["node009"]) == [(RepairKind.ADOPT, "node009")]


def test_second_instance_under_a_live_name_is_an_orphan() -> None:
    node = rec("node001", NodeState.READY)
    dup = inst("node001", "i-2", age=ORPHAN)
    assert kinds([node], [inst("node001", "i-1"), dup], ["node001"]) == [(RepairKind.ORPHAN, "node001")]


def test_interrupted_drain_is_finished() -> None:
    for st in (NodeState.DRAINING, NodeState.DEREGISTERED):
        assert kinds([rec("node001", st)], [inst("node001", "i-1")], ["node001"]) == [
            (RepairKind.FINISH_DRAIN, "node001")
        ]


def test_gone_in_journal_but_running_or_registered() -> None:
    assert kinds([rec("node001", NodeState.TERMINATED)], [inst("node001", "i-1")]) == [
        (RepairKind.TERMINATE_GONE, "node001")
    ]
    assert kinds([rec("node001", NodeState.FAILED)], [], ["node001"]) == [(RepairKind.DEREGISTER_STALE, "node001")]


def test_master_is_never_touched() -> None:
    assert kinds([], [inst("master", "i-m", age=10 * ORPHAN)]) == []
    assert kinds([rec("master", NodeState.READY)], [], ["master"]) == []
