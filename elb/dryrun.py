"""``elb once --dry-run``: what SGE shows and what a pass would do, with the assumptions made.

The plan comes from the same pass the daemon runs, with the policy sized the way the daemon
sizes it (``elb.nodesize``): when ``policy.slots_per_node`` is unset the cloud is asked what a new
node has (the adapter is built for that read only); if it cannot say, the policy infers the size
from the workers, as the daemon's does. Nothing is launched, provisioned or written: the journal is
read (``mode=ro``) into a copy in memory, an empty one when there is none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from elb import nodesize
from elb.actuator import SgeClient
from elb.config import Config
from elb.daemon import Balancer, snapshot_summary
from elb.exitcodes import Exit
from elb.interfaces import Cloud
from elb.journal import Journal
from elb.model import Plan, Snapshot
from elb.policy.base import minutes
from elb.servable import NotDemand


def ask_node_size(cfg: Config, make_cloud: Callable[[Config], Cloud]) -> nodesize.NodeSize:
    """The size of a new node as the daemon learns it; the cloud is built only when needed."""
    provider = cfg.cloud.provider
    if cfg.policy.slots_per_node is not None:
        return nodesize.new_node_size(cfg.policy, None, provider)
    try:
        cloud = make_cloud(cfg)
    except Exception as err:  # the size is a hint: the dry run goes on as the daemon would
        return nodesize.new_node_size(cfg.policy, None, provider, f"{type(err).__name__}: {err}")
    return nodesize.new_node_size(cfg.policy, cloud, provider)


def dry_run(
    cfg: Config,
    sge: SgeClient,
    make_cloud: Callable[[Config], Cloud],
    out: Callable[[str], None] = print,
    *,
    as_json: bool = False,
) -> tuple[Exit, str | None]:
    """Print the snapshot, the assumptions and the plan with ``out`` (``as_json``: one JSON object,
    ``plan_json``). Returns the exit code and, when SGE could not be read, the error."""
    size = ask_node_size(cfg, make_cloud)
    journal = Journal.read_only(cfg.journal_path)  # a copy in memory: the file is not written
    try:
        balancer = Balancer(
            cfg, sge=sge, journal=journal, policy=nodesize.policy_with(cfg, size), node_slots=size.slots
        )
        result = balancer.run_pass(dry_run=True)
        nodes = journal.nodes(include_gone=True)
    finally:
        journal.close()
    if not result.ok:
        return Exit.UNREADABLE, result.error
    assert result.snapshot is not None and result.plan is not None
    master = cfg.cluster.master
    slots, source = nodesize.effective_slots(size, result.snapshot.hosts, nodes, master)
    p = cfg.policy
    if as_json:
        out(
            json.dumps(
                plan_json(cfg, result.snapshot, result.plan, balancer.last.not_demand, slots=slots, source=source),
                indent=2,
            )
        )
        return Exit.OK, None
    out("snapshot:")
    for line in snapshot_summary(result.snapshot, master):
        out(f"  {line}")
    out("assumptions:")
    out(f"  a new node has {slots} slot{'s' if slots != 1 else ''} ({source})")
    out(f"  a new node is ready {minutes(p.boot_time)} after launch (policy.boot_time)")
    out(f"  a pass every {minutes(cfg.poll_interval)} (poll_interval)")
    out(f"  policy {p.name}, {p.min_nodes}-{p.max_nodes} nodes")
    if balancer.last.not_demand:
        out("waiting jobs that are not demand (no node is launched for them):")
        for n in balancer.last.not_demand:
            out(f"  {n.describe()}")
    out("plan (dry run, nothing changed):")
    for line in result.plan.describe():
        out(f"  {line}")
    return Exit.OK, None


def plan_json(
    cfg: Config, snap: Snapshot, plan: Plan, not_demand: Sequence[NotDemand], *, slots: int, source: str
) -> dict[str, object]:
    """The dry run as data: what SGE shows, the assumptions, the nodes to add (by node group)
    and to remove, and the waiting jobs that are not demand, each with its reason."""
    master = cfg.cluster.master
    pending = snap.pending
    workers = [h for h in snap.hosts if h.name != master]
    p = cfg.policy
    return {
        "time": snap.now,
        "snapshot": {
            "jobs_running": sum(1 for j in snap.jobs if j.queue is not None),
            "jobs_waiting": len(pending),
            "waiting_slots": sum(j.total_slots for j in pending),
            "held_or_error": sum(1 for j in snap.jobs if not j.is_pending and j.queue is None),
            "workers": len(workers),
            "slots": sum(h.slots_total for h in workers),
            "slots_used": sum(h.slots_used for h in workers),
        },
        "assumptions": {
            "slots_per_node": slots,
            "slots_per_node_from": source,
            "boot_time": p.boot_time,
            "poll_interval": cfg.poll_interval,
            "policy": p.name,
            "min_nodes": p.min_nodes,
            "max_nodes": p.max_nodes,
        },
        "add": {"default": {"count": plan.add, "names": list(plan.add_names), "reason": plan.add_reason}},
        "remove": [{"node": r.node, "reason": r.reason} for r in plan.remove],
        "not_demand": [
            {
                "job_id": n.job.job_id,
                "tasks": n.job.tasks,
                "slots": n.job.slots,
                "unservable": n.unservable,
                "until": n.until,
                "reason": n.reason,
            }
            for n in not_demand
        ],
        "reason": plan.reason,
    }
