"""Reconcile three views of the cluster: the journal, the cloud's tagged workers, the scheduler's hosts.

``repairs_of`` is pure: it reads the three views joined once (``elb.core.state.ClusterState``) and
says what to repair, with a reason; every fact of a node it asks (booting, ready, draining, busy,
lost for, its instance gone or live) is a predicate of the joined state's managed node. The
planner runs it every pass, before the policy, and only when all three views could be read (no
action on partial data). ``plan_repairs`` joins the three views and runs it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from elb.core.durations import minutes
from elb.core.interfaces import TAG_GROUP, Instance, InstanceState
from elb.core.model import Job, Node, NodeState, Snapshot
from elb.core.state import GONE, LIVE, ClusterState, ManagedNode, instance_state, is_busy, join


class RepairKind(enum.StrEnum):
    PROVISION = "provision"  # launched but never provisioned (crash mid-add): provision it now
    ADOPT = "adopt"  # journal lost track of a launch the cloud made: record it, then provision
    ABANDON = "abandon"  # launch or provisioning never finished within boot_timeout: clean up, terminate
    FORGET = "forget"  # a launch that never produced an instance: mark failed
    VANISHED = "vanished"  # instance gone under a registered node: deregister it from the scheduler, hosts, exports
    ORPHAN = "orphan"  # tagged worker unknown to the journal and absent from the scheduler: terminate
    FINISH_DRAIN = "finish_drain"  # node left draining/deregistered: finish the removal (or keep it)
    TERMINATE_GONE = "terminate_gone"  # journal says gone but the instance still runs: terminate
    DEREGISTER_STALE = "deregister_stale"  # the scheduler still lists a node elb removed: take it out
    UNREACHABLE = "unreachable"  # ready node the scheduler hasn't reached for unreachable_timeout, no job: remove
    # Not a repair: a lost node (instance gone, or out of the scheduler's reach) that the scheduler
    # lists work on. elb never kills or deletes a job, so it is kept and logged every pass, and
    # scaling goes on around it.
    KEPT = "kept"


@dataclass(frozen=True, slots=True)
class Repair:
    kind: RepairKind
    node: str
    reason: str
    instance: Instance | None = None
    # PROVISION, ADOPT: what the scheduler lists on the node ("jobs 4, 7"), None when nothing: a
    # node running jobs (an adopted worker) is never removed because its provisioning failed (the
    # actuator keeps it, and the next pass provisions it again).
    work: str | None = None
    # ADOPT of an instance the journal does not know: the node group its ``TAG_GROUP`` label names,
    # when that group is configured (its play then gets the group's variables); None otherwise.
    group: str | None = None


def lost_for(n: Node, snapshot: Snapshot, now: float, watched_since: float | None = None) -> float:
    """Seconds a ready node has been out of the scheduler's reach (absent, or every queue instance
    unreachable); 0 while the scheduler reaches it. Counted from the last pass that saw it up, else
    from when it became ready, and never from before ``watched_since`` (when this run of elb
    began to watch: a node found lost at a restart gets the whole time-out, as elb can't tell
    how long it has been lost). The rule is ``elb.core.state.ManagedNode.lost_for``."""
    return ManagedNode(n, None, snapshot.host(n.name), (), False, now).lost_for(watched_since)


def _unreachable(
    m: ManagedNode, inst: Instance, *, timeout: float, watched_since: float | None, scheduler: str
) -> Repair | None:
    """A ready node the scheduler hasn't reached for ``timeout`` and that has nothing on it is removed.

    With a job (or a reservation) on it, it is kept: an execd that lost contact may still be
    running its jobs.
    """
    lost = m.lost_for(watched_since)
    if lost < timeout:
        return None
    if m.busy:
        why = (
            f"{scheduler} hasn't reached it for {minutes(lost)} but lists {_work_on(m)} there; kept "
            "(elb never kills a job: check the node, restart its daemon, or end the jobs)"
        )
        return Repair(RepairKind.KEPT, m.name, why, inst)
    where = f"absent from {scheduler}" if m.host is None else f"unreachable in {scheduler}"
    why = f"{where} for {minutes(lost)} (unreachable_timeout {minutes(timeout)}), no job on it"
    return Repair(RepairKind.UNREACHABLE, m.name, why, inst)


def _work_on(m: ManagedNode) -> str:
    """What the scheduler lists on a busy node: 'jobs 4, 7', or 'reserved slots'."""
    return _work(m.jobs)


def _work(jobs: Sequence[Job]) -> str:
    """What the scheduler lists on a busy host with these jobs: 'jobs 4, 7', or 'reserved slots'."""
    if jobs:
        more = f" and {len(jobs) - 5} more" if len(jobs) > 5 else ""
        return f"jobs {', '.join(str(j.job_id) for j in jobs[:5])}{more}"
    return "reserved slots"


def _unfinished(n: Node, watched_since: float | None) -> str:
    """Why a draining or deregistered node is there: left by a run of elb that stopped, or a
    removal of this run whose last step failed."""
    if watched_since is not None and n.updated_at is not None and n.updated_at >= watched_since:
        return f"{n.state.value}: its removal has not finished (its last step failed); trying again"
    return f"left {n.state.value} when elb stopped"


def _repair_pooled(m: ManagedNode, inst: Instance | None) -> Repair | None:
    """A node of the warm pool. Stopped: a stopped instance is what it should be (not lost, not
    a failed boot; the planner restarts or expires it); gone, it is still an exec host, taken
    out. A restart that did not finish with its instance running (the wait for the scheduler
    ended unanswered, or elb stopped during it): that instance is the node's, started and paid
    for, and is provisioned again (its play, the scheduler's wait). Any other stop or restart
    that did not finish (elb stopped, or its cloud call failed): its queue instances are disabled
    and nothing runs there: it is removed for good."""
    st = m.record.state
    if st is NodeState.STOPPED:
        if m.instance_gone:
            return Repair(RepairKind.VANISHED, m.name, "stopped in the warm pool, its instance gone")
        return None
    if st is NodeState.STARTING and inst is not None and instance_state(inst.state) is InstanceState.RUNNING:
        why = "a warm pool restart that did not finish, its instance running: provisioning it again"
        return Repair(RepairKind.PROVISION, m.name, why, inst, work=_work_on(m) if m.busy else None)
    what = "stop" if st is NodeState.STOPPING else "restart"
    return Repair(
        RepairKind.FINISH_DRAIN, m.name, f"left {st.value} (a warm pool {what} that did not finish); removed", inst
    )


def _machine_lost(m: ManagedNode) -> str:
    """What became of a ready node's machine that neither runs nor starts: stopped (or stopping,
    shutting down) outside elb, its instance still listed; or gone."""
    if m.instance is not None:
        return f"instance {m.instance.state} outside elb"
    return "instance gone (terminated outside elb)"


def _repair_node(  # noqa: PLR0911, PLR0912 (one return per lifecycle case reads best)
    m: ManagedNode,
    inst: Instance | None,
    *,
    boot_timeout: float,
    unreachable_timeout: float,
    watched_since: float | None,
    scheduler: str,
) -> Repair | None:
    """The repair one journalled node needs, if any. ``inst``: its instance if pending or running."""
    n = m.record
    age = m.now - n.launched_at
    st = n.state
    if st in (NodeState.REQUESTED, NodeState.LAUNCHING):
        if inst is not None:
            why = "the cloud has the instance of an interrupted launch"
            return Repair(RepairKind.ADOPT, n.name, why, inst, work=_work_on(m) if m.busy else None)
        if age >= boot_timeout:
            return Repair(RepairKind.FORGET, n.name, f"no instance {minutes(age)} after the launch")
        return None
    if st.pooled or st is NodeState.STARTING:  # the warm pool's
        return _repair_pooled(m, inst)
    if m.booting:  # launched (running, provisioning)
        if inst is None:
            return Repair(RepairKind.VANISHED, n.name, "instance gone before provisioning finished")
        if m.busy:  # an adopted worker running jobs: never abandoned, provisioned again until it is ready
            why = f"not ready, and {scheduler} lists {_work_on(m)} there: provisioning it again (never removed)"
            return Repair(RepairKind.PROVISION, n.name, why, inst, work=_work_on(m))
        if age >= boot_timeout:
            why = f"not ready {minutes(age)} after launch (boot_timeout {minutes(boot_timeout)})"
            return Repair(RepairKind.ABANDON, n.name, why, inst)
        return Repair(RepairKind.PROVISION, n.name, "launched but never provisioned", inst)
    if m.ready:
        if inst is not None:
            return _unreachable(m, inst, timeout=unreachable_timeout, watched_since=watched_since, scheduler=scheduler)
        lost = _machine_lost(m)
        if m.busy:  # dead with the machine, but a job is the scheduler's to end, or an admin's: not elb's
            why = (
                f"{lost} but {scheduler} lists {_work_on(m)} there; kept "
                f"registered until {scheduler} no longer lists them (an admin ends or requeues them)"
            )
            if m.down:
                why += "; it takes no place under max_nodes meanwhile"
            return Repair(RepairKind.KEPT, n.name, why)
        return Repair(RepairKind.VANISHED, n.name, lost)
    if m.draining:
        return Repair(RepairKind.FINISH_DRAIN, n.name, _unfinished(n, watched_since), inst)
    # terminated or failed
    if m.host is not None:
        return Repair(RepairKind.DEREGISTER_STALE, n.name, f"{st.value} but still a host of {scheduler}")
    if m.instance is not None and n.instance_id:
        return Repair(
            RepairKind.TERMINATE_GONE, n.name, f"{st.value} but the instance is {m.instance.state}", m.instance
        )
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
    scheduler: str,
) -> list[Repair]:
    """``repairs_of`` the journal's records (``nodes``, gone ones included), the cloud's
    instances and the scheduler's snapshot, joined at ``now``."""
    return repairs_of(
        join(nodes, instances, snapshot, include_gone=True, now=now),
        master=master,
        boot_timeout=boot_timeout,
        orphan_timeout=orphan_timeout,
        unreachable_timeout=unreachable_timeout,
        watched_since=watched_since,
        scheduler=scheduler,
    )


def repairs_of(
    state: ClusterState,
    *,
    master: str,
    boot_timeout: float,
    orphan_timeout: float,
    unreachable_timeout: float,
    watched_since: float | None = None,
    scheduler: str,
    skip: Collection[str] = frozenset(),
    groups: Collection[str] = (),
) -> list[Repair]:
    """What to repair so that journal, cloud and the scheduler agree. ``state``: the three joined with
    the journal's gone records included (``join(..., include_gone=True)``); the master and its
    instance are never repaired.

    ``watched_since``: when the daemon's first pass ran (see ``lost_for``); None: trust the journal.
    ``scheduler``: its name, in the reasons. ``skip``: nodes left alone (an operation of elb's
    runs on them: it owns their next steps); their instances are theirs, not orphans.
    ``groups``: the configured node groups' names (an adopted instance joins the one it is labelled with).
    """
    out: list[Repair] = []
    for m in state.suspects_apart(skip):  # a steady node needs nothing
        if m.name == master:
            continue
        if m.instance is not None and m.instance.name == master:
            m = dataclasses.replace(m, instance=None)  # noqa: PLW2901 (the master's is never a worker's)
        repair = _repair_node(
            m,
            m.instance if m.instance_live else None,
            boot_timeout=boot_timeout,
            unreachable_timeout=unreachable_timeout,
            watched_since=watched_since,
            scheduler=scheduler,
        )
        if repair is not None:
            out.append(repair)
    # Instances the journal does not account for (the skipped nodes' are theirs, not orphans).
    unaccounted = state.unaccounted
    if not unaccounted:
        return out
    accounted = {r.instance.instance_id for r in out if r.instance is not None}
    accounted.update(inst.instance_id for name, inst in state.skipped_instances(skip) if name != master)
    for inst in unaccounted:
        if inst.instance_id in accounted or inst.name == master:
            continue
        repair = _repair_unaccounted(state, inst, orphan_timeout=orphan_timeout, scheduler=scheduler, groups=groups)
        if repair is not None:
            out.append(repair)
    return out


def _repair_unaccounted(
    state: ClusterState, inst: Instance, *, orphan_timeout: float, scheduler: str, groups: Collection[str]
) -> Repair | None:
    """What to do with an instance the journal does not account for: adopt a live one the scheduler
    serves with (into the configured node group of ``groups`` its label names, if any); an orphan
    once it is older than ``orphan_timeout`` and serves nowhere; else nothing (a stopped one the
    scheduler still knows is left to an admin)."""
    live = instance_state(inst.state) in LIVE
    found = state.record(inst.name)
    record = found if found is not None and (state.include_gone or found.state not in GONE) else None
    host = state.host(inst.name)
    if record is None and host is not None:
        if not live:
            return None  # stopped: not provisionable, and the scheduler still knows the name: left to an admin
        why = f"a worker of {scheduler} with elb's tags missing from the journal"
        jobs = state.jobs_on.get(inst.name, ())
        work = _work(jobs) if is_busy(bool(jobs), host.busy) else None
        tagged = inst.tags.get(TAG_GROUP)
        group = tagged if tagged in groups else None
        return Repair(RepairKind.ADOPT, inst.name, why, inst, work=work, group=group)
    age = state.now - inst.launched_at
    if age < orphan_timeout:
        return None
    what = "unknown to the journal" if record is None else f"a second instance named {inst.name}"
    state_note = "" if live else f" ({inst.state})"
    why = f"tagged worker{state_note} {what}, not serving in {scheduler}, for {minutes(age)}"
    return Repair(RepairKind.ORPHAN, inst.name, why, inst)
