"""``elb once --dry-run``: what the scheduler shows and what a pass would do, with the assumptions.

The plan comes from the same pass the daemon runs, with the policy sized the way the daemon
sizes it (``elb.service.nodesize.known``: configured, else the daemon's answer in the journal, else the
cloud asked what a new node has, the adapter built for reads only; if it cannot say, the policy
infers the size from the workers, as the daemon's does). Nothing is launched, provisioned or
written: the journal is read (``mode=ro``) into a copy in memory, an empty one when there is none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from elb.core.config import Config
from elb.core.demand import NotDemand
from elb.core.durations import minutes
from elb.core.exitcodes import Exit
from elb.core.groups import NodeGroups
from elb.core.interfaces import Cloud
from elb.core.model import Node, Plan, Snapshot
from elb.core.planner import PassPlan
from elb.core.scheduler import Scheduler
from elb.core.spend import BudgetNow, budget_now
from elb.service import nodesize
from elb.service.daemon import Balancer, snapshot_summary
from elb.service.journal import Journal


def build_cloud(cfg: Config, make_cloud: Callable[[Config], Cloud]) -> tuple[Cloud | None, str]:
    """The cloud adapter, for reads only (a new node's size, the workers), or why there is none."""
    try:
        return make_cloud(cfg), ""
    except Exception as err:  # the dry run goes on as the daemon would without the cloud's answers
        return None, f"{type(err).__name__}: {err}"


@contextmanager
def _report_says_not_demand() -> Iterator[None]:
    """The daemon's "not demand" warnings left out while the dry pass runs: its report lists
    those jobs (``waiting jobs that are not demand``, ``not_demand`` in JSON), once."""

    def keep(record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith("not demand: "))

    logger = logging.getLogger("elb")  # elb.service.daemon's logger
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def dry_run(
    cfg: Config,
    make_scheduler: Callable[[Config, Journal], Scheduler],
    make_cloud: Callable[[Config], Cloud],
    out: Callable[[str], None] = print,
    *,
    as_json: bool = False,
) -> tuple[Exit, str | None]:
    """Print the snapshot, the assumptions and the plan with ``out`` (``as_json``: as one JSON
    object, ``plan_json``). Returns the exit code and, when the scheduler could not be read, the
    error."""
    cloud, cloud_error = build_cloud(cfg, make_cloud)
    journal = Journal.read_only(cfg.journal_path)  # a copy in memory: the file is not written
    size = nodesize.known(cfg, journal.node_size(), cloud, cloud_error)
    try:
        balancer = Balancer(
            cfg,
            scheduler=make_scheduler(cfg, journal),
            journal=journal,
            cloud=cloud,  # listed, never changed: the dry pass starts nothing
            policy=nodesize.policy_with(cfg, size),
            node_slots=size.slots,
        )
        with _report_says_not_demand():
            result = balancer.run_pass(dry_run=True)
        nodes = journal.nodes(include_gone=True)
        budget = budget_now(journal, cfg, result.now) if result.ok else None
        cloud_read = result.cloud_note or f"not read ({cloud_error})"
    finally:
        journal.close()
    if not result.ok:
        if as_json:
            out(json.dumps({"ok": False, "time": result.now, "error": result.error}, indent=2))
        return Exit.UNREADABLE, result.error
    assert result.snapshot is not None and result.plan is not None and result.planned is not None
    master = cfg.cluster.master
    slots, source = nodesize.effective_slots(size, result.snapshot.hosts, nodes, master)
    groups = cfg.groups(slots)
    if as_json:
        out(
            json.dumps(
                plan_json(
                    cfg,
                    result.snapshot,
                    result.plan,
                    groups=groups,
                    nodes=nodes,
                    not_demand=balancer.last.not_demand,
                    slots_from=source,
                    planned=result.planned,
                    cloud=cloud_read,
                    budget=budget,
                ),
                indent=2,
            )
        )
        return Exit.OK, None
    p = cfg.policy
    out("snapshot:")
    for line in snapshot_summary(result.snapshot, master):
        out(f"  {line}")
    out("assumptions:")
    if cfg.node_groups is None:
        out(f"  a new node has {slots} slot{'s' if slots != 1 else ''} ({source})")
    else:
        for g in groups.groups:
            own = g.scheduler_options.describe()  # the driver's words for its settings of the group
            out(
                f"  group {g.name}: {g.slots} slot{'s' if g.slots != 1 else ''} a node, {own + ', ' if own else ''}"
                f"{g.min_nodes}-{g.max_nodes} nodes"
            )
    out(f"  a new node is ready {minutes(p.boot_time)} after launch (policy.boot_time)")
    out(f"  a pass every {minutes(cfg.poll_interval)} (poll_interval)")
    out(f"  policy {p.name}, {p.min_nodes}-{p.max_nodes} nodes")
    out(f"  the cloud's workers: {cloud_read}")
    out("  operations a running elb has under way are not known here: it leaves a node it works on to that")
    if balancer.last.not_demand:
        out("waiting jobs that are not demand (no node is launched for them):")
        for n in balancer.last.not_demand:
            out(f"  {n.describe()}")
    out("plan (dry run, nothing changed):")
    for line in plan_lines(result.planned, budget):
        out(f"  {line}")
    return Exit.OK, None


def plan_lines(planned: PassPlan, budget: BudgetNow | None) -> list[str]:
    """The plan's lines; with a budget that paced no launch (scaling did not go on), the budget
    as it stands."""
    lines = planned.describe()
    if budget is not None and planned.budget is None:
        lines += budget.lines
    return lines


def plan_json(
    cfg: Config,
    snap: Snapshot,
    plan: Plan,
    *,
    groups: NodeGroups,
    nodes: Sequence[Node],
    not_demand: Sequence[NotDemand],
    slots_from: str,
    planned: PassPlan,
    cloud: str,
    budget: BudgetNow | None = None,
) -> dict[str, object]:
    """The dry run's plan as one JSON-ready object (docs/operations.md, "The dry run")."""
    master = cfg.cluster.master
    alive = [n for n in nodes if n.state.alive and n.name != master]
    return {
        "ok": True,
        "time": snap.now,
        "snapshot": _snapshot_json(snap, master, len(alive)),
        "groups": _groups_json(groups, alive),
        "max_nodes": groups.total_max_nodes,
        "assumptions": {
            "slots_per_node_from": slots_from,
            "boot_time": cfg.policy.boot_time,
            "poll_interval": cfg.poll_interval,
            "policy": cfg.policy.name,
        },
        "add": _adds_json(plan, groups.groups[0].name),
        "add_reason": plan.add_reason,
        "remove": [{"node": r.node, "reason": r.reason} for r in plan.remove],
        **_not_demand_json(not_demand),
        "reason": plan.reason,
        "repairs": [{"kind": r.kind.value, "node": r.node, "reason": r.reason} for r in planned.repairs],
        "kept": [{"node": r.node, "reason": r.reason} for r in planned.kept],
        "held": [{"node": r.node, "reason": r.reason} for r in planned.held],
        "group_tags": [
            {"node": t.node, "instance": t.instance_id, "group": t.group, "reason": t.reason}
            for t in planned.group_tags
        ],
        "tags_waiting": [u.as_json() for u in planned.tags_waiting],
        "pool": planned.pool.describe(),
        "scaling": planned.scaling is not None,
        "scaling_note": planned.scaling_note,
        "cloud": cloud,
        "budget": _budget_json(planned, budget),
        "lines": planned.describe(),
    }


def _snapshot_json(snap: Snapshot, master: str, managed: int) -> dict[str, object]:
    """The scheduler's view in figures: jobs running, waiting and held, the oldest wait, and the
    workers' slots (the master left out)."""
    workers = [h for h in snap.hosts if h.name != master]
    waiting = snap.pending
    oldest = min((j.submitted for j in waiting if j.submitted is not None), default=None)
    return {
        "jobs_running": sum(1 for j in snap.jobs if j.queue is not None),
        "jobs_waiting": len(waiting),
        "slots_waiting": sum(j.total_slots for j in waiting),
        "jobs_held_or_error": sum(1 for j in snap.jobs if not j.is_pending and j.queue is None),
        "oldest_wait": None if oldest is None else max(0.0, snap.now - oldest),
        "workers": len(workers),
        "slots": sum(h.slots_total for h in workers),
        "slots_used": sum(h.slots_used for h in workers),
        "nodes_managed": managed,
    }


def _groups_json(groups: NodeGroups, alive: Sequence[Node]) -> list[dict[str, object]]:
    """Each node group with its bounds, price and live nodes (a node of no known group counts in the
    first)."""
    first = groups.groups[0].name

    def group_of(n: Node) -> str:
        return (n.group or "") if groups.get(n.group or "") else first

    return [
        {
            "name": g.name,
            "slots": g.slots,
            "min_nodes": g.min_nodes,
            "max_nodes": groups.max_nodes_of(g),
            "nodes": sum(1 for n in alive if group_of(n) == g.name),
            "price_per_hour": g.price_per_hour,
        }
        for g in groups.groups
    ]


def _adds_json(plan: Plan, first: str) -> list[dict[str, object]]:
    """The planned launches by group, in the plan's order (a name of no group goes to the first)."""
    adding: dict[str, list[str]] = {}
    for name in plan.add_names:
        adding.setdefault(plan.add_groups.get(name, first), []).append(name)
    return [{"group": g, "count": len(names), "names": names} for g, names in adding.items()]


def _not_demand_json(not_demand: Sequence[NotDemand]) -> dict[str, list[dict[str, object]]]:
    """The waiting jobs that are not demand, by why: unservable, held, not yet eligible."""
    return {
        "unservable": [n.as_json() for n in not_demand if n.unservable],
        "held": [n.as_json() for n in not_demand if n.held],
        "not_yet": [n.as_json() for n in not_demand if n.until is not None],
    }


def _budget_json(planned: PassPlan, budget: BudgetNow | None) -> dict[str, object] | None:
    """The budget (``policy.budget``): the period's spend so far and its projection, whether it
    holds launches back (this plan's, or with none planned, one more node of any group), and the
    launches it held."""
    if budget is None:
        return None
    check = planned.budget
    held = list(check.held) if check is not None else []
    holding = check.holding if check is not None else budget.holding
    return budget.as_json() | {
        "holding": holding,
        "held": held,
        "too_wide": check.too_wide if check is not None else 0,
        "reason": check.reason if check is not None else "",
    }
