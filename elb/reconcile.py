"""Reconcile three views of the cluster: the journal, the cloud's tagged workers, SGE's hosts.

``plan_repairs`` is pure: it compares the views and says what to repair, with a reason. The
daemon runs it at start and every pass, before the policy, and only when all three views
could be read (no action on partial data).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from elb.durations import minutes
from elb.interfaces import Instance
from elb.model import Node, NodeState, Snapshot
from elb.state import InstanceState, ManagedNode, instance_state

# Live: pending or running. Gone: shutting down or terminated. Any other state (stopping, stopped:
# a spot stop, a crash, an admin) is a machine that still exists, and costs (its disks), and can
# start again: it must be terminated when elb is done with it.
_LIVE_INSTANCE = frozenset({InstanceState.PENDING, InstanceState.RUNNING})


class RepairKind(enum.StrEnum):
    PROVISION = "provision"  # launched but never provisioned (crash mid-add): provision it now
    ADOPT = "adopt"  # journal lost track of a launch the cloud made: record it, then provision
    ABANDON = "abandon"  # launch or provisioning never finished within boot_timeout: clean up, terminate
    FORGET = "forget"  # a launch that never produced an instance: mark failed
    VANISHED = "vanished"  # instance gone under a registered node: deregister it from SGE, hosts, exports
    ORPHAN = "orphan"  # tagged worker unknown to the journal and absent from SGE: terminate
    FINISH_DRAIN = "finish_drain"  # node left draining/deregistered: finish the removal (or keep it)
    TERMINATE_GONE = "terminate_gone"  # journal says gone but the instance still runs: terminate
    DEREGISTER_STALE = "deregister_stale"  # SGE still lists a node elb removed: take it out of SGE
    UNREACHABLE = "unreachable"  # ready node SGE hasn't reached for unreachable_timeout, no job: remove
    # Not a repair: a lost node (instance gone, or out of SGE's reach) that SGE lists work on. elb never
    # kills or deletes a job, so it is kept and logged every pass, and scaling goes on around it.
    KEPT = "kept"


@dataclass(frozen=True, slots=True)
class Repair:
    kind: RepairKind
    node: str
    reason: str
    instance: Instance | None = None


def lost_for(n: Node, snapshot: Snapshot, now: float, watched_since: float | None = None) -> float:
    """Seconds a ready node has been out of SGE's reach (absent, or every queue instance in
    state ``u``); 0 while SGE reaches it. Counted from the last pass that saw it up, else
    from when it became ready, and never from before ``watched_since`` (when this run of elb
    began to watch: a node found lost at a restart gets the whole time-out, as elb can't tell
    how long it has been lost). The rule is ``elb.state.ManagedNode.lost_for``."""
    return ManagedNode(n, None, snapshot.host(n.name), (), False, now).lost_for(watched_since)


def _unreachable(
    n: Node, inst: Instance, snapshot: Snapshot, *, now: float, timeout: float, watched_since: float | None
) -> Repair | None:
    """A ready node SGE hasn't reached for ``timeout`` and that has nothing on it is removed.

    With a job (or a reservation) on it, it is kept: an execd that lost contact may still be
    running its jobs.
    """
    lost = lost_for(n, snapshot, now, watched_since)
    if lost < timeout:
        return None
    work = _work_on(n.name, snapshot)
    if work:
        why = (
            f"SGE hasn't reached it for {minutes(lost)} but lists {work} there; kept "
            "(elb never kills a job: check the node, restart its execd or qdel -f the jobs)"
        )
        return Repair(RepairKind.KEPT, n.name, why, inst)
    where = "absent from SGE" if snapshot.host(n.name) is None else "unreachable in SGE (state u)"
    why = f"{where} for {minutes(lost)} (unreachable_timeout {minutes(timeout)}), no job on it"
    return Repair(RepairKind.UNREACHABLE, n.name, why, inst)


def _work_on(name: str, snapshot: Snapshot) -> str:
    """What SGE lists on a host ('jobs 4, 7' or 'reserved slots'), '' for nothing."""
    jobs = snapshot.jobs_on(name)
    if jobs:
        more = f" and {len(jobs) - 5} more" if len(jobs) > 5 else ""
        return f"jobs {', '.join(str(j.job_id) for j in jobs[:5])}{more}"
    host = snapshot.host(name)
    return "reserved slots" if host is not None and host.busy else ""


def _unfinished(n: Node, watched_since: float | None) -> str:
    """Why a draining or deregistered node is there: left by a run of elb that stopped, or a
    removal of this run whose last step failed."""
    if watched_since is not None and n.updated_at is not None and n.updated_at >= watched_since:
        return f"{n.state.value}: its removal has not finished (its last step failed); trying again"
    return f"left {n.state.value} when elb stopped"


def _repair_pooled(n: Node, inst: Instance | None, present: Instance | None) -> Repair | None:
    """A node of the warm pool. Stopped: a stopped instance is what it should be (not lost, not
    a failed boot; the planner restarts or expires it); gone, it is still an exec host, taken
    out. A stop or a restart that did not finish (elb stopped, or its cloud call failed): its
    queue instances are disabled and nothing runs there: it is removed for good."""
    if n.state is NodeState.STOPPED:
        if present is None and inst is None:
            return Repair(RepairKind.VANISHED, n.name, "stopped in the warm pool, its instance gone")
        return None
    what = "stop" if n.state is NodeState.STOPPING else "restart"
    return Repair(
        RepairKind.FINISH_DRAIN, n.name, f"left {n.state.value} (a warm pool {what} that did not finish); removed", inst
    )


def _repair_node(  # noqa: PLR0911, PLR0912 (one return per lifecycle case reads best)
    n: Node,
    inst: Instance | None,
    snapshot: Snapshot,
    *,
    present: Instance | None,
    in_sge: set[str],
    now: float,
    boot_timeout: float,
    unreachable_timeout: float,
    watched_since: float | None,
) -> Repair | None:
    """The repair one journalled node needs, if any. ``inst``: its instance if pending or running;
    ``present``: its instance in any state but gone (stopped too)."""
    age = now - n.launched_at
    st = n.state
    if st in (NodeState.REQUESTED, NodeState.LAUNCHING):
        if inst is not None:
            return Repair(RepairKind.ADOPT, n.name, "the cloud has the instance of an interrupted launch", inst)
        if age >= boot_timeout:
            return Repair(RepairKind.FORGET, n.name, f"no instance {minutes(age)} after the launch")
        return None
    if st in (NodeState.RUNNING, NodeState.PROVISIONING):
        if inst is None:
            return Repair(RepairKind.VANISHED, n.name, "instance gone before provisioning finished")
        if age >= boot_timeout:
            why = f"not ready {minutes(age)} after launch (boot_timeout {minutes(boot_timeout)})"
            return Repair(RepairKind.ABANDON, n.name, why, inst)
        return Repair(RepairKind.PROVISION, n.name, "launched but never provisioned", inst)
    if st is NodeState.READY:
        if inst is not None:
            return _unreachable(n, inst, snapshot, now=now, timeout=unreachable_timeout, watched_since=watched_since)
        work = _work_on(n.name, snapshot)
        if work:  # dead with the machine, but a job is SGE's to end, or an admin's: not elb's
            why = (
                f"instance gone (terminated outside elb) but SGE lists {work} there; kept registered "
                "until SGE no longer lists them (qdel -f, or qmod -f -rj to rerun them)"
            )
            return Repair(RepairKind.KEPT, n.name, why)
        return Repair(RepairKind.VANISHED, n.name, "instance gone (terminated outside elb)")
    if st in (NodeState.DRAINING, NodeState.DEREGISTERED):
        return Repair(RepairKind.FINISH_DRAIN, n.name, _unfinished(n, watched_since), inst)
    if st in (NodeState.STOPPED, NodeState.STOPPING, NodeState.STARTING):
        return _repair_pooled(n, inst, present)
    # terminated or failed
    if n.name in in_sge:
        return Repair(RepairKind.DEREGISTER_STALE, n.name, f"{st.value} but still an SGE host")
    if present is not None and n.instance_id is not None:
        return Repair(RepairKind.TERMINATE_GONE, n.name, f"{st.value} but the instance is {present.state}", present)
    return None


def plan_repairs(
    nodes: Sequence[Node],
    instances: Sequence[Instance],
    snapshot: Snapshot,
    now: float,
    *,
    master: str,
    boot_timeout: float,
    orphan_timeout: float,
    unreachable_timeout: float,
    watched_since: float | None = None,
) -> list[Repair]:
    """What to repair so that journal, cloud and SGE agree. ``nodes`` includes gone ones.

    ``watched_since``: when the daemon's first pass ran (see ``lost_for``); None: trust the journal.
    """
    by_name = {n.name: n for n in nodes}
    present_list = [i for i in instances if instance_state(i.state) is not InstanceState.GONE and i.name != master]
    present_by_id = {i.instance_id: i for i in present_list}
    live_list = [i for i in present_list if instance_state(i.state) in _LIVE_INSTANCE]
    by_id = {i.instance_id: i for i in live_list}
    live: dict[str, Instance] = {}
    for i in live_list:
        live.setdefault(i.name, i)
    in_sge = {h.name for h in snapshot.hosts}
    out: list[Repair] = []
    for n in nodes:
        if n.name == master:
            continue
        inst = by_id.get(n.instance_id) if n.instance_id else live.get(n.name)
        repair = _repair_node(
            n,
            inst,
            snapshot,
            present=present_by_id.get(n.instance_id) if n.instance_id else None,
            in_sge=in_sge,
            now=now,
            boot_timeout=boot_timeout,
            unreachable_timeout=unreachable_timeout,
            watched_since=watched_since,
        )
        if repair is not None:
            out.append(repair)

    # Instances the journal does not account for.
    accounted = {r.instance.instance_id for r in out if r.instance is not None}
    accounted |= {n.instance_id for n in nodes if n.instance_id}
    for inst in present_list:
        if inst.instance_id in accounted:
            continue
        record = by_name.get(inst.name)
        if record is None and inst.name in in_sge:
            if instance_state(inst.state) in _LIVE_INSTANCE:
                why = "an SGE worker with elb's tags missing from the journal"
                out.append(Repair(RepairKind.ADOPT, inst.name, why, inst))
            continue  # stopped: not provisionable, and SGE still knows the name: left to an admin
        age = now - inst.launched_at
        if age < orphan_timeout:
            continue
        what = "unknown to the journal" if record is None else f"a second instance named {inst.name}"
        state = "" if instance_state(inst.state) in _LIVE_INSTANCE else f" ({inst.state})"
        why = f"tagged worker{state} {what}, not serving in SGE, for {minutes(age)}"
        out.append(Repair(RepairKind.ORPHAN, inst.name, why, inst))
    return out
