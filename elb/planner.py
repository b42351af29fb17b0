"""Pure decisions of a pass that are not the scaling policy's: no I/O, time passed in.

- ``limit_launches``: the policy's plan with its launches cut by the back-off;
- ``drain_verdict``: after ``qmod -d`` and a fresh read, may the node go on to deregistration?
- ``cleanup_verdict``: a node whose deregistration play failed: terminate it, or keep it?
- ``repairs_hold_scaling``: do this pass's repairs make scaling wait for the next pass (a
  fresh read), or have they all failed so often that scaling must go on around them?
- ``count_repair_failures``: the failed-passes-in-a-row count of each repair, after a pass.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from elb.backoff import Backoff
from elb.model import Job, Node, Plan
from elb.policy.base import minutes
from elb.reconcile import Repair, RepairKind

RepairKey = tuple[RepairKind, str]  # a repair of one kind on one node


def limit_launches(plan: Plan, backoff: Backoff, now: float) -> Plan:
    """``plan`` with no more launches than the back-off allows at ``now`` (removals untouched)."""
    allowed = backoff.cap(plan.add, now)
    if allowed >= plan.add:
        return plan
    wait = backoff.waiting(now)
    if allowed == 0:
        why = f"launch backed off for {minutes(wait)} more"
    else:
        why = f"launching {allowed} of {plan.add} (a probe)"
    why += f" after {backoff.rounds} failed launch round(s) in a row ({backoff.cause}: {backoff.last_failure})"
    held = f"{plan.add_reason}; " if plan.add_reason and allowed else ""
    return dataclasses.replace(
        plan,
        add=allowed,
        add_names=plan.add_names[:allowed],
        add_reason=f"{held}{why}" if allowed else "",
        reason="; ".join(r for r in (plan.reason, why) if r),
    )


class Drain(enum.StrEnum):
    GO = "go"  # nothing on the node: deregister it
    KEEP = "keep"  # a job landed, or a slot is reserved: re-enable it, it stays ready


@dataclass(frozen=True, slots=True)
class DrainVerdict:
    verdict: Drain
    reason: str


def drain_verdict(jobs: Sequence[Job], reserved_slots: int) -> DrainVerdict:
    """What a disabled node's fresh read says: anything there keeps the node."""
    if jobs:
        ids = ", ".join(str(j.job_id) for j in jobs[:5])
        return DrainVerdict(Drain.KEEP, f"job {ids} landed")
    if reserved_slots:
        return DrainVerdict(Drain.KEEP, f"{reserved_slots} slots reserved")
    return DrainVerdict(Drain.GO, "no job, no reservation")


class Cleanup(enum.StrEnum):
    TERMINATE = "terminate"  # nothing left to deregister: terminate the instance
    RETRY = "retry"  # SGE lists it (or can't be read): keep it draining, alarm, try again next pass


def cleanup_verdict(node: Node, listed_in_sge: bool | None, failure: str) -> tuple[Cleanup, str]:
    """A node whose deregistration play failed (``failure``). ``listed_in_sge``: None if SGE
    could not be read.

    A node that never became ready and that SGE does not list can run no job: its instance is
    terminated at once, and the (master-side) deregistration is retried each pass until what the
    failed play left on the master (a hosts line, an export) is gone. Any other node is kept
    draining, and billed, with an ALARM every pass until the play goes through: a node SGE lists
    is never terminated.
    """
    if node.ready_at is None and listed_in_sge is False:
        why = (
            f"deregistration failed ({failure}); never ready and SGE does not list it: instance terminated, "
            "deregistration retried each pass"
        )
        return Cleanup.TERMINATE, why
    where = "SGE cannot be read" if listed_in_sge is None else "SGE lists it" if listed_in_sge else "it was ready"
    return Cleanup.RETRY, f"deregistration failed ({failure}); kept draining and retried each pass ({where})"


@dataclass(frozen=True, slots=True)
class RepairHold:
    """Whether scaling waits for the next pass, and the repairs stuck for ``alarm`` passes or
    more (an ALARM when every repair is stuck: scaling then goes on around them)."""

    scaling_waits: bool
    stuck: tuple[Repair, ...]


def repairs_hold_scaling(repairs: Sequence[Repair], fails: Mapping[RepairKey, int], alarm: int) -> RepairHold:
    """Repairs change the cluster, so scaling decides again next pass on a fresh read; unless
    every one of them has failed ``alarm`` passes in a row: a repair that never succeeds must not
    hold growth (or shrinking) for ever. No repair: scaling goes on at once."""
    if not repairs:
        return RepairHold(False, ())
    stuck = tuple(r for r in repairs if fails.get((r.kind, r.node), 0) >= alarm)
    return RepairHold(len(stuck) < len(repairs), stuck if len(stuck) == len(repairs) else ())


def count_repair_failures(
    before: Mapping[RepairKey, int], repairs: Sequence[Repair], failed: Collection[str], in_flight: Collection[str]
) -> dict[RepairKey, int]:
    """Failed passes in a row per repair after a pass that started ``repairs``: one more for
    each whose node failed, back to none for each that went through; a repair still in flight
    keeps its count (its outcome is not known yet); repairs no longer planned are forgotten."""
    counts = {k: n for k, n in before.items() if k[1] in in_flight}
    for r in repairs:
        key = (r.kind, r.node)
        counts[key] = before.get(key, 0) + 1 if r.node in failed else 0
    return {k: n for k, n in counts.items() if n}
