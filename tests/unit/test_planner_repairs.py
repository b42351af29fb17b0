"""The planner's rules for repairs: repairs make scaling wait for a fresh read, unless every
one of them has failed ``failed_passes_alarm`` passes in a row (then scaling goes on around
them); and how the failed-passes count of each repair moves from pass to pass."""

from __future__ import annotations

from elb.core.planner import count_repair_failures, repairs_hold_scaling
from elb.core.reconcile import Repair, RepairKind

A = Repair(RepairKind.PROVISION, "node001", "never provisioned")
B = Repair(RepairKind.VANISHED, "node002", "instance gone")


def test_no_repair_holds_nothing() -> None:
    hold = repairs_hold_scaling([], {(A.kind, A.node): 9}, alarm=3)
    assert not hold.scaling_waits and hold.stuck == ()


def test_repairs_make_scaling_wait_for_a_fresh_read() -> None:
    hold = repairs_hold_scaling([A, B], {}, alarm=3)
    assert hold.scaling_waits and hold.stuck == ()


def test_one_repair_stuck_among_others_still_holds_scaling() -> None:
    hold = repairs_hold_scaling([A, B], {(A.kind, A.node): 5}, alarm=3)
    assert hold.scaling_waits and hold.stuck == ()


def test_when_every_repair_is_stuck_scaling_goes_on_and_they_are_named() -> None:
    fails = {(A.kind, A.node): 3, (B.kind, B.node): 7}
    hold = repairs_hold_scaling([A, B], fails, alarm=3)
    assert not hold.scaling_waits and hold.stuck == (A, B)


def test_failure_counts_grow_reset_and_wait_for_operations_in_flight() -> None:
    before = {(A.kind, A.node): 2, (B.kind, B.node): 4, (RepairKind.ORPHAN, "node009"): 1}
    after = count_repair_failures(before, [A, B], failed={"node001"}, in_flight={"node009"})
    # A failed again: 3; B went through: forgotten; node009's repair is still running: kept as it was
    assert after == {(A.kind, A.node): 3, (RepairKind.ORPHAN, "node009"): 1}
    assert count_repair_failures(after, [], failed=set(), in_flight=set()) == {}
