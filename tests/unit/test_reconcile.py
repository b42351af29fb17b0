"""Reconcile: each difference between journal, cloud and SGE maps to one repair."""

from __future__ import annotations

from pathlib import Path

from elb.core.interfaces import Instance, InstanceWord
from elb.core.model import Host, Node, NodeState, QueueInstance, Snapshot
from elb.core.reconcile import Repair, RepairKind, plan_repairs
from elb.schedulers.sge.states import queue_flags
from elb.service.journal import Journal
from tests.unit.factories import T0, host, running, snap

BOOT = 600.0
ORPHAN = 600.0
UNREACHABLE = 600.0


def inst(name: str, iid: str, age: float = 100.0, state: InstanceWord = "running") -> Instance:
    return Instance(iid, name, state, T0 - age, "10.0.0.9")


def rec(name: str, state: NodeState, age: float = 100.0, iid: str | None = "i-1", up_ago: float | None = None) -> Node:
    up = None if up_ago is None else T0 - up_ago
    return Node(name, state, T0 - age, instance_id=iid, private_ip="10.0.0.9", last_up_at=up)


def kinds(nodes: list[Node], instances: list[Instance], hosts: list[str] | None = None) -> list[tuple[str, str]]:
    s = snap([], [host(h) for h in hosts or []])
    return [(r.kind, r.node) for r in repairs_for(nodes, instances, s)]


def repairs_for(nodes: list[Node], instances: list[Instance], s: Snapshot) -> list[Repair]:
    return plan_repairs(
        nodes,
        instances,
        s,
        T0,
        master="master",
        boot_timeout=BOOT,
        orphan_timeout=ORPHAN,
        unreachable_timeout=UNREACHABLE,
        scheduler="SGE",
    )


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


def test_vanished_instance_is_deregistered_unless_sge_lists_jobs_there() -> None:
    assert kinds([rec("node001", NodeState.READY)], [], ["node001"]) == [(RepairKind.VANISHED, "node001")]
    # SGE still lists jobs there: they died with the machine, but ending them is SGE's or an admin's
    # job; kept registered (and logged) until SGE no longer lists them
    s = snap([running(42, "node001"), running(43, "node001")], [host("node001", used=2)])
    (r,) = repairs_for([rec("node001", NodeState.READY)], [], s)
    assert (r.kind, r.node) == (RepairKind.KEPT, "node001")
    assert "instance gone (terminated outside elb) but SGE lists jobs 42, 43 there; kept" in r.reason


def test_a_ready_nodes_instance_stopped_outside_elb_is_said_stopped_not_gone() -> None:
    """A machine that went down (a crash, a kill, an admin's stop) is still there, stopped: the
    repair says so, kept under the jobs the scheduler lists there, else taken out as vanished."""
    stopped = inst("node001", "i-1", state="stopped")
    s = snap([running(42, "node001")], [host("node001", used=1)])
    (kept,) = repairs_for([rec("node001", NodeState.READY)], [stopped], s)
    assert (kept.kind, kept.node) == (RepairKind.KEPT, "node001")
    assert kept.reason.startswith("instance stopped outside elb but SGE lists jobs 42 there; kept"), kept.reason
    (gone,) = repairs_for([rec("node001", NodeState.READY)], [stopped], snap([], [host("node001")]))
    assert (gone.kind, gone.reason) == (RepairKind.VANISHED, "instance stopped outside elb")


def test_terminated_instance_state_counts_as_vanished() -> None:
    gone = inst("node001", "i-1", state="gone")
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


def test_ready_node_sge_cannot_reach_is_removed_after_unreachable_timeout() -> None:
    lost = [host("node001", states="au")]
    i = [inst("node001", "i-1", age=5 * UNREACHABLE)]
    old = 5 * UNREACHABLE  # ready long ago; what counts is when SGE last reached it
    assert repairs_for([rec("node001", NodeState.READY, old, up_ago=UNREACHABLE - 1)], i, snap([], lost)) == []
    (r,) = repairs_for([rec("node001", NodeState.READY, old, up_ago=UNREACHABLE)], i, snap([], lost))
    assert (r.kind, r.node, r.instance) == (RepairKind.UNREACHABLE, "node001", i[0])
    assert "unreachable in SGE for 10 min" in r.reason
    # reachable now: however long ago the journal last saw it up, nothing to do
    assert repairs_for([rec("node001", NodeState.READY, old, up_ago=old)], i, snap([], [host("node001")])) == []


def test_ready_node_absent_from_sge_counts_from_ready_when_never_seen_up() -> None:
    i = [inst("node001", "i-1", age=UNREACHABLE)]
    assert kinds([rec("node001", NodeState.READY, age=UNREACHABLE - 1)], i) == []
    (r,) = repairs_for([rec("node001", NodeState.READY, age=UNREACHABLE)], i, snap())
    assert r.kind is RepairKind.UNREACHABLE and r.reason.startswith("absent from SGE for 10 min")


def test_unreachable_node_with_a_job_or_reservation_is_kept_and_named() -> None:
    node = rec("node001", NodeState.READY, 5 * UNREACHABLE, up_ago=2 * UNREACHABLE)
    i = [inst("node001", "i-1", age=5 * UNREACHABLE)]

    def only(s: Snapshot) -> Repair:
        (r,) = repairs_for([node], i, s)
        return r

    r = only(snap([running(42, "node001")], [host("node001", used=1, states="u")]))
    assert (r.kind, r.instance) == (RepairKind.KEPT, i[0])
    assert r.reason.startswith("SGE hasn't reached it for 20 min but lists jobs 42 there; kept")
    r = only(snap([], [host("node001", reserved=2, states="u")]))
    assert r.kind is RepairKind.KEPT and "lists reserved slots there" in r.reason
    # nothing on it: removed. (``only``: the instance, older than orphan_timeout, is never an orphan.)
    assert only(snap([], [host("node001", states="u")])).kind is RepairKind.UNREACHABLE


def test_unreachable_applies_to_ready_nodes_only() -> None:
    i = [inst("node001", "i-1", age=5 * UNREACHABLE)]
    lost = [host("node001", states="u")]
    for st in (NodeState.PROVISIONING, NodeState.DRAINING):
        got = kinds([rec("node001", st, 5 * UNREACHABLE, up_ago=5 * UNREACHABLE)], i, ["node001"])
        assert RepairKind.UNREACHABLE not in [k for k, _ in got]
    node = rec("node001", NodeState.READY, 5 * UNREACHABLE, up_ago=5 * UNREACHABLE)
    # one of its two queues still reached: SGE reaches the host, nothing to do
    both = Host(
        "node001", (QueueInstance("all.q", "node001", 8, 0, 0, queue_flags("u")), QueueInstance("b.q", "node001", 8, 0))
    )
    assert repairs_for([node], i, snap([], [both])) == []
    assert repairs_for([node], i, snap([], lost)) != []


def test_stopped_instances_are_terminated_once_elb_is_done_with_them() -> None:
    stopped = inst("node001", "i-1", age=2 * ORPHAN, state="stopped")
    # a ready node whose machine stopped (a spot stop, a crash): out of SGE like a vanished one...
    assert kinds([rec("node001", NodeState.READY)], [stopped], ["node001"]) == [(RepairKind.VANISHED, "node001")]
    # ...and once its record is gone, the stopped machine (its disks still cost) is terminated
    (r,) = repairs_for([rec("node001", NodeState.FAILED)], [stopped], snap())
    assert (r.kind, r.instance) == (RepairKind.TERMINATE_GONE, stopped)
    assert r.reason == "failed but the instance is stopped"
    # unknown to the journal and absent from SGE: an orphan, after orphan_timeout
    (r,) = repairs_for([], [inst("node009", "i-9", age=ORPHAN, state="stopping")], snap())
    assert r.kind is RepairKind.ORPHAN and r.reason.startswith("tagged worker (stopping) unknown to the journal")
    assert kinds([], [inst("node009", "i-9", age=ORPHAN - 1, state="stopped")]) == []
    # unknown, stopped, but SGE knows the name: not adopted (it can't be provisioned), not killed
    assert kinds([], [inst("node009", "i-9", age=ORPHAN, state="stopped")], ["node009"]) == []
    # gone for good: nothing to do
    assert kinds([rec("node001", NodeState.FAILED)], [inst("node001", "i-1", state="gone")]) == []


def test_node_found_lost_at_a_restart_gets_the_whole_timeout() -> None:
    node = rec("node001", NodeState.READY, 5 * UNREACHABLE, up_ago=4 * UNREACHABLE)  # journal: up long ago
    i = [inst("node001", "i-1", age=5 * UNREACHABLE)]
    lost = snap([], [host("node001", states="u")])

    def kinds_watched(since: float) -> list[RepairKind]:
        return [
            r.kind
            for r in plan_repairs(
                [node],
                i,
                lost,
                T0,
                master="master",
                boot_timeout=BOOT,
                orphan_timeout=ORPHAN,
                unreachable_timeout=UNREACHABLE,
                scheduler="SGE",
                watched_since=since,
            )
        ]

    assert kinds_watched(T0 - UNREACHABLE + 1) == []  # elb (re)started just under a time-out ago
    assert kinds_watched(T0 - UNREACHABLE) == [RepairKind.UNREACHABLE]


def test_a_pooled_node_with_its_stopped_instance_is_left_to_the_planner() -> None:
    # Stopped in the warm pool: still an exec host (its queue instances disabled and out of
    # reach), its instance stopped for days: neither lost, nor a failed boot, nor stale.
    stopped = rec("node001", NodeState.STOPPED, age=5 * 86400)
    words: tuple[InstanceWord, ...] = ("stopped", "stopping", "pending", "running")
    for state in words:
        assert kinds([stopped], [inst("node001", "i-1", age=5 * 86400, state=state)], ["node001"]) == []


def test_a_pooled_node_whose_instance_went_is_deregistered() -> None:
    assert kinds([rec("node001", NodeState.STOPPED)], [], ["node001"]) == [(RepairKind.VANISHED, "node001")]


def test_a_restart_left_unfinished_with_its_instance_running_is_provisioned_again_not_removed() -> None:
    """A warm pool restart whose wait for the scheduler ended unanswered (a busy controller), or
    that elb's stop cut short, left its node starting with its instance running: that instance is
    the node's, started and paid for; it is provisioned again (its play, the scheduler's wait),
    not removed for good and launched anew. One still pending is not running yet: removed."""
    found = repairs_for([rec("node001", NodeState.STARTING)], [inst("node001", "i-1")], snap([], [host("node001")]))
    assert [(r.kind, r.node) for r in found] == [(RepairKind.PROVISION, "node001")]
    assert "restart" in found[0].reason
    pending = repairs_for(
        [rec("node001", NodeState.STARTING)], [inst("node001", "i-1", state="pending")], snap([], [host("node001")])
    )
    assert [(r.kind, r.node) for r in pending] == [(RepairKind.FINISH_DRAIN, "node001")]


def test_a_stop_or_restart_left_unfinished_is_removed_for_good() -> None:
    for state in (NodeState.STOPPING, NodeState.STARTING):
        found = repairs_for(
            [rec("node001", state)], [inst("node001", "i-1", state="stopped")], snap([], [host("node001")])
        )
        assert [(r.kind, r.node) for r in found] == [(RepairKind.FINISH_DRAIN, "node001")]
        assert "did not finish" in found[0].reason


def relaunched(tmp_path: Path) -> list[Node]:
    """The journal's records of node002 relaunched under its old name 8 s ago, its previous node
    terminated 13 minutes ago (elb stopped during the relaunch: requested and launching journalled)."""
    j = Journal(tmp_path / "journal.sqlite")
    j.record("node002", NodeState.REQUESTED, T0 - 3600)
    j.record("node002", NodeState.LAUNCHING, T0 - 3599)
    j.record("node002", NodeState.RUNNING, T0 - 3590, instance_id="i-1", private_ip="10.0.0.2", launched_at=T0 - 3598)
    j.record("node002", NodeState.READY, T0 - 3500)
    j.mark_seen(T0 - 1000, busy=["node002"], up=["node002"])
    j.record("node002", NodeState.TERMINATED, T0 - 13 * 60)
    j.record("node002", NodeState.REQUESTED, T0 - 8)
    j.record("node002", NodeState.LAUNCHING, T0 - 8)
    records = j.nodes(include_gone=True)
    j.close()
    return records


def test_a_reused_name_s_interrupted_relaunch_waits_for_its_instance_then_adopts_it(tmp_path: Path) -> None:
    """The relaunch's age is its own, not the gone node's: no instance yet is no failed launch
    before ``boot_timeout``; the instance the interrupted launch made is adopted."""
    records = relaunched(tmp_path)
    old = inst("node002", "i-1", age=3598, state="gone")
    assert kinds(records, [old]) == []
    new = inst("node002", "i-2", age=5, state="pending")
    assert kinds(records, [old, new]) == [(RepairKind.ADOPT, "node002")]
    [adopt] = repairs_for(records, [old, new], snap())
    assert adopt.instance == new
