"""The daemon's own subcommands: run, once, status, nodes, jobs, history, pause, resume, keep,
release, remove, drain, validate, plot."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from elb.cli.dryrun import build_cloud, dry_run
from elb.cli.nodeview import NodeFacts, kept_why, nodes_facts
from elb.core import extras
from elb.core.config import DEFAULT_CONFIG_PATH, Config, ConfigError, load_config
from elb.core.demand import DemandSplit
from elb.core.durations import argument as duration
from elb.core.durations import minutes
from elb.core.exitcodes import Exit
from elb.core.interfaces import CloudError, TagsGroups
from elb.core.model import Node, NodeState, Snapshot, by_reason
from elb.core.poolplan import groups_of
from elb.core.scheduler import Scheduler, SchedulerError, SchedulerRead
from elb.core.spend import GroupSpend, budget_now, spend_by_group
from elb.core.state import join
from elb.core.tagplan import UntaggedWorker, untagged_workers
from elb.core.timeline import DAY, DURATION_NAMES, TimelineSummary, summarize
from elb.provision.ansible import ProvisionError
from elb.service import factory, nodesize
from elb.service.daemon import Balancer, run_forever, snapshot_summary
from elb.service.journal import Journal, JournalError, JournalVersionError
from elb.service.logs import setup_logging
from elb.service.stats import window_start

log = logging.getLogger("elb")


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", "-c", type=Path, default=None, help=f"config file (default {DEFAULT_CONFIG_PATH}; it must exist)"
    )


def _error(message: str) -> None:
    """One line on stderr."""
    print(f"elb: {message}", file=sys.stderr)


def _load(args: argparse.Namespace) -> Config | None:
    try:
        return load_config(args.config)
    except ConfigError as err:
        _error(str(err))
        return None


def _journal(cfg: Config, *, read_only: bool = False) -> Journal | None:
    """The journal in state_dir. Read-only: a copy in memory read with ``mode=ro`` (an empty one
    when there is none yet): nothing is created or written."""
    path = cfg.journal_path
    try:
        if read_only:
            return Journal.read_only(path)
        return Journal(path, keep_events_days=cfg.retention.journal_days)
    except JournalVersionError as err:
        _error(str(err))
        return None
    except (OSError, sqlite3.Error, JournalError) as err:
        _error(f"state_dir {cfg.state_dir}: cannot open the journal {path}: {err}")
        return None


def _live_balancer(cfg: Config, journal: Journal) -> Balancer | Exit:
    """A balancer for the configured scheduler with every adapter, or the exit code of the part
    that could not be built."""
    try:
        provisioner = factory.make_provisioner(cfg)
    except ProvisionError as err:
        _error(f"config: {err}")
        return Exit.CONFIG
    try:
        cloud = factory.make_cloud(cfg)
        notices = factory.make_notices(cfg)
    except Exception as err:  # boto3 without a region or credentials, a broken podman: one line
        _error(f"cloud {cfg.cloud.provider}: cannot be used: {err}")
        return Exit.UNREADABLE
    return Balancer(
        cfg,
        scheduler=factory.make_scheduler(cfg, journal),
        journal=journal,
        cloud=cloud,
        provisioner=provisioner,
        notices=notices,
    )


def _playbooks_missing(cfg: Config) -> bool:
    """True (and says why on stderr) when elb has no playbooks to provision nodes with."""
    problem = factory.playbooks_problem(cfg)
    if problem is not None:
        _error(f"config: {problem}")
    return problem is not None


def cmd_validate(args: argparse.Namespace) -> int:
    path = args.config or DEFAULT_CONFIG_PATH
    if not args.json:
        print(f"config: {path.resolve()}")
    cfg = _load(args)
    if cfg is None:
        if args.json:
            print(json.dumps({"config": str(path.resolve()), "ok": False, "checks": [], "failed": 1}, indent=2))
        return Exit.CONFIG
    from elb.cli.validate import run_checks  # noqa: PLC0415
    from elb.core.checks import Check  # noqa: PLC0415

    summary = (
        f"policy {cfg.policy.name}, {cfg.policy.min_nodes}-{cfg.policy.max_nodes} nodes, "
        f"scheduler {cfg.scheduler}, provider {cfg.cloud.provider}, master {cfg.cluster.master}"
    )
    checks: list[Check] = [Check("config", True, summary)]
    if not args.json:
        print(checks[0].line(), flush=True)
    for check in run_checks(cfg, offline=args.offline):
        checks.append(check)
        if not args.json:
            print(check.line(), flush=True)
    failed = sum(not c.ok for c in checks)
    if args.json:
        doc = {
            "config": str(path.resolve()),
            "ok": failed == 0,
            "offline": args.offline,
            "checks": [c.as_json() for c in checks],
            "failed": failed,
        }
        print(json.dumps(doc, indent=2))
        return Exit.CONFIG if failed else Exit.OK
    if args.offline:
        print("(offline: the scheduler and the cloud were not checked)")
    if failed:
        _error(f"{failed} check(s) failed: fix them before elb run")
        return Exit.CONFIG
    return Exit.OK


def cmd_run(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None or _playbooks_missing(cfg):
        return Exit.CONFIG
    setup_logging(cfg.log_format, cfg.log_level)
    journal = _journal(cfg)
    if journal is None:
        return Exit.CONFIG
    try:
        balancer = _live_balancer(cfg, journal)
        if isinstance(balancer, Exit):
            return balancer
        if cfg.metrics_port is not None:
            try:
                factory.start_metrics(cfg, balancer)
            except OSError as err:
                where = cfg.metrics_address
                _error(f"metrics_port {cfg.metrics_port}: cannot listen on {where}: {err.strerror or err}")
                return Exit.CONFIG
        log.info(
            "elb starting: scheduler %s, poll %s, policy %s, nodes %d-%d, provider %s",
            cfg.scheduler,
            minutes(cfg.poll_interval),
            cfg.policy.name,
            cfg.policy.min_nodes,
            cfg.policy.max_nodes,
            cfg.cloud.provider,
        )
        run_forever(balancer, cfg.poll_interval)
    finally:
        journal.close()
    return Exit.OK


def cmd_once(args: argparse.Namespace) -> int:
    if args.json and not args.dry_run:
        _error("--json goes with --dry-run (a live pass logs what it does)")
        return Exit.USAGE
    cfg = _load(args)
    if cfg is None or (not args.dry_run and _playbooks_missing(cfg)):
        return Exit.CONFIG
    setup_logging(cfg.log_format, logging.WARNING if args.dry_run else cfg.log_level)
    if args.json and not args.dry_run:
        _error("--json goes with --dry-run (a live pass logs what it does)")
        return Exit.USAGE
    if args.dry_run:
        code, error = dry_run(cfg, factory.make_scheduler, factory.make_cloud, as_json=args.json)
        if error is not None:
            _error(f"pass failed, nothing changed: {error}")
        return code
    return _once_live(cfg)


def _once_live(cfg: Config) -> Exit:
    """One live pass; its exit code."""
    journal = _journal(cfg)
    if journal is None:
        return Exit.CONFIG
    try:
        balancer = _live_balancer(cfg, journal)
        if isinstance(balancer, Exit):
            return balancer
        try:
            result = balancer.run_pass()
        except Exception as err:  # the journal holds the last step that started: the next pass repairs
            log.debug("the pass raised", exc_info=True)
            _error(f"pass failed: {type(err).__name__}: {err}")
            return Exit.PASS_FAILED
    finally:
        journal.close()
    if not result.ok:
        _error(result.summary())
        return Exit.UNREADABLE
    print(result.summary())
    if result.outcomes.failed:
        _error(f"pass failed: {'; '.join(by_reason(result.outcomes.failed.items()))}")
        return Exit.PASS_FAILED
    return Exit.OK


def cmd_status(args: argparse.Namespace) -> int:
    opened = _read_only_journal(args)
    if isinstance(opened, Exit):
        return opened
    cfg, journal = opened
    nodes = journal.nodes()
    scheduler, read = _read_or_none(cfg, journal)  # status shows the journal when it can't be read, then exits 4
    snap = read.snapshot if read is not None else None
    now = snap.now if snap is not None else time.time()
    if args.json:
        print(json.dumps(_status_json(cfg, journal, nodes, (scheduler, read), now), indent=2))
    else:
        _print_status_nodes(cfg, journal, nodes, snap, now)
        _print_status_scheduler(cfg, journal, nodes, scheduler, read)
        _print_status_orders(journal, now)
    journal.close()
    return Exit.OK if snap is not None else Exit.UNREADABLE


def _print_status_nodes(
    cfg: Config, journal: Journal, nodes: Sequence[Node], snap: Snapshot | None, now: float
) -> None:
    """``elb status``'s table of nodes, then the groups' spend and the boot steps' summary."""
    print(f"{'node':<12} {'state':<13} {'uptime':>8} {'into period':>12} {'jobs':>5}  instance")
    for f in nodes_facts(nodes, snap, now, cfg.policy.billing_period, journal.timelines()):
        note = _status_note(f)
        print(
            f"{f.name:<12} {f.state:<13} {minutes(f.uptime):>8} {minutes(f.into_period):>12} "
            f"{len(f.jobs or ()):>5}  {f.instance_id or '-'}{note}"
        )
    if not nodes:
        print("(no nodes managed by elb)")
    for line in _spend_lines(cfg, journal, nodes, now):
        print(line)
    print(_boot_summary(journal, now).describe(DAY / 3600))


def _print_status_scheduler(
    cfg: Config, journal: Journal, nodes: Sequence[Node], scheduler: Scheduler, read: SchedulerRead | None
) -> None:
    """The scheduler's summary and the waiting jobs that are not demand (nothing when it was not read)."""
    if read is None:
        return
    for line in snapshot_summary(read.snapshot, cfg.cluster.master):
        print(line)
    if read.names is not None and read.names.held:
        held = [p.name for p in read.names.held]
        print(f"held from {scheduler.name}'s asks (no room to launch them now): {', '.join(held)}")
    split = _demand_or_none(cfg, journal, scheduler, read, nodes)
    for refused in split.not_demand if split is not None else ():
        print(f"not demand, {refused.describe()}")


def _print_status_orders(journal: Journal, now: float) -> None:
    """An admin's pause, kept and to-remove nodes, and the last pass."""
    orders = journal.orders()
    if orders.paused:
        since = minutes(now - (orders.paused_since or now))
        print(f"scaling PAUSED by an admin {since} ago: {orders.pause_reason or '-'}")
    if orders.kept or orders.remove:
        kept, remove = ", ".join(sorted(orders.kept)) or "-", ", ".join(sorted(orders.remove)) or "-"
        print(f"kept by an admin: {kept}; to remove: {remove}")
    for p in journal.passes(limit=1):
        print(f"last pass: {'ok' if p.ok else 'FAILED'}, {minutes(now - p.time)} ago: {p.summary}")


def _status_note(f: NodeFacts) -> str:
    """What ``elb status`` adds after a node's line: out of the scheduler's reach, or stopped in a warm pool."""
    if f.stopped_for is not None:
        return f"  stopped in the warm pool for {minutes(f.stopped_for)} (its queue instances disabled)"
    return f"  the scheduler has not reached it for {minutes(f.lost_for)}" if f.lost_for else ""


def _status_json(
    cfg: Config, journal: Journal, nodes: Sequence[Node], reading: tuple[Scheduler, SchedulerRead | None], now: float
) -> dict[str, object]:
    orders = journal.orders()
    scheduler, read = reading
    snap = None if read is None else read.snapshot
    split = None if read is None else _demand_or_none(cfg, journal, scheduler, read, nodes)
    last = journal.passes(limit=1)
    boot = _boot_summary(journal, now)
    return {
        "time": now,
        "scheduler_read": snap is not None,
        "nodes": [asdict(f) for f in nodes_facts(nodes, snap, now, cfg.policy.billing_period, journal.timelines())],
        "boot_timeline": {
            "since": boot.since,
            "nodes": boot.nodes,
            "adopted": boot.adopted,
            "steps": {name: asdict(boot.steps[name]) for name in DURATION_NAMES},
        },
        "scheduler": None if snap is None else snapshot_summary(snap, cfg.cluster.master),
        "not_demand": None if split is None else [n.as_json() for n in split.not_demand],
        "names_held": None if read is None or read.names is None else [p.name for p in read.names.held],
        "groups": [asdict(s) for s in _spend(cfg, journal.nodes(), now)],
        "budget": budget.as_json() if (budget := budget_now(journal, cfg, now)) is not None else None,
        "orders": {
            "paused_since": orders.paused_since,
            "pause_reason": orders.pause_reason,
            "kept": sorted(orders.kept),
            "remove": sorted(orders.remove),
        },
        "last_pass": None if not last else asdict(last[-1]),
    }


def _boot_summary(journal: Journal, now: float) -> TimelineSummary:
    """Median and worst of each boot step over the nodes launched in the last day, those gone
    since included (``elb.core.timeline``)."""
    return summarize(journal.timelines(include_gone=True).values(), now, DAY)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _spend(cfg: Config, nodes: Sequence[Node], now: float) -> list[GroupSpend]:
    """Each node group's nodes up now and what they cost so far (``elb.core.spend``)."""
    p = cfg.policy
    return spend_by_group(nodes, cfg.groups(p.slots_per_node or 1), now, p.billing, p.billing_period)


def _spend_lines(cfg: Config, journal: Journal, nodes: Sequence[Node], now: float) -> list[str]:
    """Each group's spend, and with ``policy.budget`` the period's spend, projection and whether
    the budget holds launches (``elb.core.spend.budget_now``)."""
    lines = [spent.describe() for spent in _spend(cfg, nodes, now)]
    budget = budget_now(journal, cfg, now)
    return lines + list(budget.lines if budget is not None else ())


def _demand_or_none(
    cfg: Config, journal: Journal, scheduler: Scheduler, read: SchedulerRead, nodes: Sequence[Node]
) -> DemandSplit | None:
    """The daemon's split of the waiting jobs (the ``demand`` of the scheduler that made ``read``:
    a driver splits its own read, Slurm's with each job's reason; with the node size the daemon
    plans with: ``elb.service.nodesize.known``), or None (said on stderr) when it cannot be read."""
    try:
        return scheduler.demand(read, nodes, _node_size(cfg, journal).slots)
    except SchedulerError as err:
        _error(f"cannot tell the demand: {err}")
        return None


def _node_size(cfg: Config, journal: Journal) -> nodesize.NodeSize:
    """A new node's size, from the one place the daemon reads it (``elb.service.nodesize.known``)."""
    learnt = journal.node_size()
    if learnt is not None or cfg.policy.slots_per_node is not None or cfg.node_groups is not None:
        return nodesize.known(cfg, learnt, None)
    cloud, why = build_cloud(cfg, factory.make_cloud)
    return nodesize.known(cfg, None, cloud, why)


def _read_or_none(cfg: Config, journal: Journal) -> tuple[Scheduler, SchedulerRead | None]:
    """The scheduler and its read, or None (said on stderr) when it cannot be read."""
    scheduler = factory.make_scheduler(cfg, journal)
    try:
        return scheduler, scheduler.read(journal.nodes(), time.time())
    except Exception as err:  # the journal's view is still worth printing
        _error(f"cannot read {scheduler.name}: {err}")
        return scheduler, None


def cmd_nodes(args: argparse.Namespace) -> int:
    opened = _read_only_journal(args)
    if isinstance(opened, Exit):
        return opened
    cfg, journal = opened
    _, read = _read_or_none(cfg, journal)
    snap = read.snapshot if read is not None else None
    now = snap.now if snap is not None else time.time()
    timelines = journal.timelines(include_gone=args.all)
    nodes = journal.nodes(include_gone=args.all)
    ordered = journal.orders().by_admin
    kept = {
        n.name: why
        for n in nodes
        if (why := kept_why(journal.events(n.name), n, now, ordered=n.name in ordered)) is not None
    }
    facts = nodes_facts(nodes, snap, now, cfg.policy.billing_period, timelines, kept=kept)
    tags = _group_tags(cfg, journal, nodes, snap, now)
    journal.close()
    if args.json:
        doc: dict[str, object] = {"time": now, "scheduler_read": snap is not None, "nodes": [asdict(f) for f in facts]}
        if tags.shown:
            doc["untagged"] = None if tags.untagged is None else [u.as_json() for u in tags.untagged]
        print(json.dumps(doc, indent=2))
    else:
        _print_nodes_table(facts)
        _print_kept(facts)
        _print_untagged(tags.untagged or ())
    return Exit.OK if snap is not None else Exit.UNREADABLE


@dataclass(frozen=True, slots=True)
class _GroupTags:
    """What ``elb nodes`` says of the workers' node group tags."""

    shown: bool  # the cloud tags workers (``TagsGroups``); else nothing is said of tags
    untagged: tuple[UntaggedWorker, ...] | None = None  # None: its workers could not be listed


def _group_tags(cfg: Config, journal: Journal, nodes: Sequence[Node], snap: Snapshot | None, now: float) -> _GroupTags:
    """The workers whose instances the cloud lists without their node group's tag, each with
    whether the next pass asks for it or when (``elb.core.tagplan.untagged_workers``, the pass's
    rule, after the refusal the daemon journalled). Not shown on a cloud that does not tag;
    None (said on stderr) when its workers cannot be listed."""
    cloud, why = build_cloud(cfg, factory.make_cloud)
    if cloud is not None and not isinstance(cloud, TagsGroups):
        return _GroupTags(shown=False)
    try:
        if cloud is None:
            raise CloudError(why)
        instances = cloud.list_workers()
    except Exception as err:  # the journal's and the scheduler's view are still worth printing
        _error(f"cannot list {cfg.cloud.provider}'s workers (their node group tags not shown): {err}")
        return _GroupTags(shown=True)
    state = join(nodes, instances, snap or Snapshot(now, (), ()), now=now)
    return _GroupTags(True, untagged_workers(state, groups_of(cfg), journal.tags_refused(), now))


def _print_untagged(untagged: Sequence[UntaggedWorker]) -> None:
    """The workers still without their node group's tag, each with when it is set."""
    if untagged:
        print("\nnode group tags:")
        for u in untagged:
            print(f"  {u.tag.node}: {u.describe()}")


def _print_nodes_table(facts: Sequence[NodeFacts]) -> None:
    """``elb nodes``'s table: a line a node with its type, times, boot steps and jobs."""
    print(
        f"{'node':<12} {'state':<13} {'type':<12} {'uptime':>8} {'into period':>12} {'idle':>8} "
        f"{'boot':>5} {'ssh':>5} {'provision':>9} {'register':>8} {'first job':>9}  jobs"
    )
    for f in facts:
        idle = minutes(f.idle_for) if f.idle_for is not None else "-"
        boot, ssh, prov, reg, first = (_seconds(f.boot_steps[name]) for name in DURATION_NAMES)
        print(
            f"{f.name:<12} {f.state:<13} {f.instance_type or '-':<12} {minutes(f.uptime):>8} "
            f"{minutes(f.into_period):>12} {idle:>8} {boot:>5} {ssh:>5} {prov:>9} {reg:>8} {first:>9}  "
            f"{_jobs_column(f.jobs)}"
        )
    if not facts:
        print("(no nodes managed by elb)")


def _jobs_column(jobs: list[int] | None) -> str:
    """A node's jobs in ``elb nodes``: the first eight ("..." past them), "-" for none, "?" unread."""
    if jobs is None:
        return "?"
    return ",".join(map(str, jobs[:8])) + ("..." if len(jobs) > 8 else "") or "-"


def _print_kept(facts: Sequence[NodeFacts]) -> None:
    """The nodes elb keeps, each with why."""
    held = [f for f in facts if f.kept is not None]
    if held:
        print("\nkept by elb:")
        for f in held:
            print(f"  {f.name}: {f.kept}")


def _job_list(jobs: list[int] | None) -> str:
    if jobs is None:
        return "?"  # the scheduler not read
    if not jobs:
        return "-"
    return ",".join(map(str, jobs[:8])) + (f" and {len(jobs) - 8} more" if len(jobs) > 8 else "")


def cmd_history(args: argparse.Namespace) -> int:
    opened = _read_only_journal(args)
    if isinstance(opened, Exit):
        return opened
    _cfg, journal = opened
    events = journal.events(args.node)
    journal.close()
    if not events:
        if args.json:
            print("[]")  # what a script parses: no event
        _error(f"no journal events for {args.node!r} (elb nodes --all lists every node elb knows)")
        return Exit.FAILED
    if args.json:
        print(json.dumps([asdict(e) | {"state": e.state.value} for e in events], indent=2))
        return Exit.OK
    for e in events:
        when = datetime.fromtimestamp(e.time).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
        detail = f": {e.detail}" if e.detail else ""
        inst = f" [{e.instance_id}]" if e.instance_id else ""
        print(f"{when}  {e.state.value:<13}{inst}{detail}")
    return Exit.OK


def _read_only_journal(args: argparse.Namespace) -> tuple[Config, Journal] | Exit:
    """The config and the journal it names, opened read-only; or ``Exit.CONFIG`` when either
    cannot be read (said in one line)."""
    cfg = _load(args)
    if cfg is None:
        return Exit.CONFIG
    journal = _journal(cfg, read_only=True)
    return Exit.CONFIG if journal is None else (cfg, journal)


def _writable_journal(args: argparse.Namespace) -> tuple[Config, Journal] | Exit:
    cfg = _load(args)
    if cfg is None:
        return Exit.CONFIG
    if not cfg.journal_path.exists():
        _error(f"no journal at {cfg.journal_path}: elb has not run with this config yet")
        return Exit.CONFIG
    journal = _journal(cfg)
    return Exit.CONFIG if journal is None else (cfg, journal)


def cmd_pause(args: argparse.Namespace) -> int:
    opened = _writable_journal(args)
    if isinstance(opened, Exit):
        return opened
    _cfg, journal = opened
    journal.set_paused(time.time(), args.reason)
    journal.close()
    print("scaling paused: no launch and no removal by the policy; repairs go on (elb resume ends it)")
    return Exit.OK


def cmd_resume(args: argparse.Namespace) -> int:
    opened = _writable_journal(args)
    if isinstance(opened, Exit):
        return opened
    _cfg, journal = opened
    was = journal.orders().paused
    journal.set_paused(None)
    journal.close()
    print("scaling resumed" if was else "scaling was not paused")
    return Exit.OK


def cmd_order(args: argparse.Namespace) -> int:
    opened = _writable_journal(args)
    if isinstance(opened, Exit):
        return opened
    _cfg, journal = opened
    node = journal.node(args.node)
    withdraw = args.order == "release" or getattr(args, "cancel", False)
    order = "kept" if args.order in ("keep", "release") else "remove"
    if node is None and not withdraw:
        journal.close()
        _error(f"{args.node} is not a node elb manages (elb nodes lists them)")
        return Exit.FAILED
    orders = journal.orders()
    if withdraw and args.node not in (orders.kept if order == "kept" else orders.remove):
        journal.close()
        what = "kept" if order == "kept" else "ordered removed"
        _error(f"{args.node} is not {what} (elb status lists the orders)")
        return Exit.FAILED
    journal.set_order(order, args.node, on=not withdraw)
    journal.close()
    said = {
        ("kept", True): "kept: the policy will not remove it (elb release {} ends it)",
        ("kept", False): "released: the policy may remove it again",
        ("remove", True): "to be removed with the safe drain at the first pass that finds it idle",
        ("remove", False): "removal order withdrawn",
    }[(order, not withdraw)]
    print(f"{args.node}: {said.format(args.node)}")
    return Exit.OK


def cmd_drain(args: argparse.Namespace) -> int:
    opened = _writable_journal(args)
    if isinstance(opened, Exit):
        return opened
    cfg, journal = opened
    try:
        return _drain(cfg, journal, args.node, cancel=args.cancel)
    finally:
        journal.close()


def _drain(cfg: Config, journal: Journal, name: str, *, cancel: bool) -> Exit:
    from elb.core.planner import Drain, drain_verdict  # noqa: PLC0415

    node = journal.node(name)
    if node is None or node.state in (NodeState.TERMINATED, NodeState.FAILED):
        _error(f"{name} is not a node elb manages (elb nodes lists them)")
        return Exit.FAILED
    scheduler = factory.make_scheduler(cfg, journal)
    if cancel:
        journal.set_order("remove", name, on=False)
        try:
            scheduler.enable_host(name)
        except Exception as err:
            _error(f"{name}: removal order withdrawn, but it could not be enabled again: {err}")
            return Exit.UNREADABLE
        print(f"{name}: enabled again, removal order withdrawn")
        return Exit.OK
    if node.state is not NodeState.READY:
        _error(f"{name} is {node.state.value}, not ready: elb remove {name} orders its removal once it is")
        return Exit.FAILED
    try:
        scheduler.disable_host(name, "elb drain (an admin)")
        check = scheduler.drain_checks([name]).get(name)
        if check is None:
            raise SchedulerError(f"{scheduler.name} does not show the host")
    except Exception as err:
        _error(f"{name}: cannot drain: {err}")
        return Exit.UNREADABLE
    journal.set_order("remove", name, on=True)
    verdict = drain_verdict(check.jobs, check.reserved)
    if verdict.verdict is Drain.GO:
        print(f"{name}: disabled and idle ({verdict.reason}): elb removes it at its next pass")
    else:
        print(
            f"{name}: disabled, but {verdict.reason}: no new job lands there; elb removes it at the first pass "
            f"that finds it idle (elb drain {name} --cancel enables it again)"
        )
    return Exit.OK


def cmd_jobs(args: argparse.Namespace) -> int:
    from elb.cli.jobview import waiting_jobs  # noqa: PLC0415

    opened = _read_only_journal(args)
    if isinstance(opened, Exit):
        return opened
    cfg, journal = opened
    try:
        nodes = journal.nodes()
        scheduler, read = _read_or_none(cfg, journal)
        if read is None:
            return Exit.UNREADABLE
        snap = read.snapshot
        p = cfg.policy
        size = _node_size(cfg, journal)
        split = _demand_or_none(cfg, journal, scheduler, read, nodes)
    finally:
        journal.close()
    if split is None:
        return Exit.UNREADABLE
    reasons = {n.job.job_id: n.verdict for n in split.not_demand}
    spn, jobs = waiting_jobs(snap, nodes, cfg.cluster.master, size.slots, reasons)
    if args.json:
        print(json.dumps({"time": snap.now, "slots_per_node": spn, "jobs": [asdict(j) for j in jobs]}, indent=2))
        return Exit.OK
    print(f"{'job':>8} {'owner':<10} {'state':<6} {'slots':>9} {'pe':<10} {'waited':>8}  demand / requests")
    for j in jobs:
        slots = f"{j.tasks}x{j.slots}" if j.tasks > 1 else str(j.slots)
        waited = minutes(j.waited) if j.waited is not None else "-"
        verdict = "yes" if j.demand else f"no: {j.why_not}"
        requests = ",".join(f"{k}={v}" for k, v in sorted(j.requests.items()))
        print(
            f"{j.job_id:>8} {j.owner[:10]:<10} {j.state:<6} {slots:>9} {(j.pe or '-')[:10]:<10} {waited:>8}  "
            f"{verdict}{'  [' + requests + ']' if requests else ''}"
        )
    if not jobs:
        print("(no waiting job)")
    demand = sum(j.demand for j in jobs)
    print(f"{demand} of {len(jobs)} waiting job(s) count as demand; a new node has {spn} slots, at most {p.max_nodes}")
    return Exit.OK


def cmd_plot(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None:
        return Exit.CONFIG
    if (missing := extras.plot_missing()) is not None:
        _error(missing)
        return Exit.FAILED
    from elb.cli.plot import plot_file  # noqa: PLC0415 (matplotlib is slow to import: only here)

    path = args.stats or cfg.stats_path
    since = args.since if args.since is not None else -math.inf
    if args.last is not None:
        since = time.time() - args.last
    try:
        points = plot_file(path, args.output, title=f"elb: cluster {cfg.cluster.name}", since=since)
    except (OSError, ValueError) as err:
        _error(f"cannot plot {path}: {err}")
        return Exit.FAILED
    print(f"wrote {args.output} ({points} points)")
    return Exit.OK


@dataclass(frozen=True, slots=True)
class Arg:
    """One ``add_argument`` call: its flags (or name) and its options."""

    flags: tuple[str, ...]
    options: Mapping[str, Any]


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


@dataclass(frozen=True, slots=True)
class Verb:
    """One of this module's commands: what ``elb --help`` and ``elb VERB --help`` say, the function
    that runs it, its arguments (each takes ``--config`` first), and the ones of which at most one
    may be given (``exclusive``)."""

    name: str
    help: str
    description: str
    func: Callable[[argparse.Namespace], int]
    args: tuple[Arg, ...] = ()
    exclusive: tuple[Arg, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)


NODE = arg("node", help="node name, e.g. node003")


def _order(name: str, text: str, *args: Arg) -> Verb:
    return Verb(name, text, text[0].upper() + text[1:] + ".", cmd_order, (NODE, *args), defaults={"order": name})


VERBS: tuple[Verb, ...] = (
    Verb(
        "run",
        "run the balancer: a pass every poll_interval until SIGTERM",
        "The daemon: reads the scheduler and the cloud, plans and acts every poll_interval until SIGTERM "
        "(under systemd: Type=notify with a watchdog). Needs a config file; exit 3 without a usable one.",
        cmd_run,
    ),
    Verb(
        "once",
        "run one pass",
        "One pass of the daemon, then exit: 0 when it went well, 4 when the scheduler or the cloud could "
        "not be read, 5 when a node operation or repair in it failed. --dry-run reads the same sources "
        "(the journal read-only), prints the plan and the assumptions it made, and changes nothing.",
        cmd_once,
        (
            arg("--dry-run", action="store_true", help="print the snapshot and the plan; change nothing"),
            arg(
                "--json",
                action="store_true",
                help="with --dry-run: the plan as one JSON object (nodes to add per group, "
                "nodes to remove, unservable jobs with their reasons, the snapshot's totals)",
            ),
        ),
    ),
    Verb(
        "status",
        "nodes with state, uptime, billing period and jobs; boot timeline; queue summary",
        "Each managed node with its state, uptime, position in its billing period and jobs; "
        "the median and worst seconds of each boot step (boot, ssh, provision, register, first job) over "
        "the nodes launched in the last 24 h; the scheduler's queue summary; pending orders and the last pass. "
        "Reads the journal read-only. "
        "Exit 4 (after printing what it could) when the scheduler cannot be read.",
        cmd_status,
        (
            arg(
                "--json",
                action="store_true",
                help="one JSON object: nodes, boot timeline, the scheduler's summary, orders, last pass",
            ),
        ),
    ),
    Verb(
        "nodes",
        "every node elb manages: state, instance, age, billing period, boot steps, jobs (--json for scripts)",
        "The nodes elb manages, from its journal, with the seconds of each step of their boot "
        "(boot, ssh, provision, register, first job; '-' when not reached) and the jobs the scheduler lists on each. "
        "Exit 4 (after printing) when the scheduler cannot be read.",
        cmd_nodes,
        (
            arg("--json", action="store_true", help="one JSON object: {'nodes': [...], 'scheduler_read': bool}"),
            arg("--all", action="store_true", help="also the nodes elb removed or gave up on"),
        ),
    ),
    Verb(
        "history",
        "a node's journal: every step elb took on it, with when and why",
        "Every lifecycle step elb journalled for NODE, oldest first.",
        cmd_history,
        (NODE, arg("--json", action="store_true", help="a JSON list of events")),
    ),
    Verb(
        "pause",
        "stop scaling (no launch, no removal by the policy); repairs go on",
        "Stops scaling until elb resume: the daemon launches nothing and the policy removes "
        "nothing; repairs go on. Kept in the journal, so a restarted daemon stays paused.",
        cmd_pause,
        (arg("--reason", default="", help="why, shown in every pass line and in status"),),
    ),
    Verb("resume", "scale again after elb pause", "Ends an elb pause: the next pass scales again.", cmd_resume),
    _order("keep", "never let the policy remove NODE (until elb release NODE)"),
    _order("release", "let the policy remove NODE again"),
    _order(
        "remove",
        "remove NODE with the safe drain as soon as the scheduler shows nothing on it (--cancel withdraws)",
        arg("--cancel", action="store_true", help="withdraw the removal order"),
    ),
    Verb(
        "drain",
        "drain NODE now: disable it; removed by elb once the scheduler shows nothing on it (--cancel undoes)",
        "Disables NODE in the scheduler at once (Grid Engine: its queue instances; Slurm: DRAIN; no "
        "new job lands), reads the scheduler again and orders its removal, as elb remove does: the daemon "
        "removes it with the safe drain at the first pass that finds it idle. With jobs on it, the node stays "
        "disabled until they end. --cancel enables it again and withdraws the order. Exit 4 when the scheduler "
        "cannot be changed or read.",
        cmd_drain,
        (NODE, arg("--cancel", action="store_true", help="enable the node again and withdraw the removal")),
    ),
    Verb(
        "jobs",
        "the waiting jobs: slots, PE, requests, wait, and whether elb counts each as demand (or why not)",
        "Every job the scheduler lists as waiting, oldest first, with the policy's verdict. Exit 4 "
        "when the scheduler cannot be read.",
        cmd_jobs,
        (arg("--json", action="store_true", help="one JSON object: {'slots_per_node': N, 'jobs': [...]}"),),
    ),
    Verb(
        "validate",
        f"check a config file and what a first run needs; exit {Exit.CONFIG:d} on any failure",
        "Prints the config file read, then one line per check (ok or FAIL, with how to fix it): "
        "playbooks, SSH key, the scheduler answers, state directory writable, journal, cloud reachable.",
        cmd_validate,
        (
            arg(
                "--offline",
                action="store_true",
                help="skip the checks that need the network (the scheduler, the cloud)",
            ),
            arg("--json", action="store_true", help="one JSON object: {'config': path, 'checks': [...], 'failed': N}"),
        ),
    ),
    Verb(
        "plot",
        "draw waiting jobs, running jobs and nodes over time from the stats file",
        "Draws nodes by state and jobs waiting, running, held and in error over time from the "
        "stats file (rotated files included), reading only the window asked for (--since, --last) and "
        "resampling it. Needs the plot extra: pip install 'elb[plot]'.",
        cmd_plot,
        (
            arg("--stats", type=Path, default=None, help="stats file (default: the config's)"),
            arg("--output", "-o", type=Path, default=Path("elb.png"), help="PNG to write"),
        ),
        exclusive=(
            arg("--since", type=window_start, help="from this time (ISO 8601, e.g. 2026-11-01T08:00)"),
            arg("--last", type=duration, help="the last DURATION before now (e.g. 90m, 12h, 7d, 4w)"),
        ),
    ),
)


def register(sub: Any) -> None:
    """This module's verbs (``VERBS``) on the ``elb`` parser's subcommands, in their order."""
    for verb in VERBS:
        p = sub.add_parser(verb.name, help=verb.help, description=verb.description)
        _add_config(p)
        for a in verb.args:
            p.add_argument(*a.flags, **a.options)
        if verb.exclusive:
            group = p.add_mutually_exclusive_group()
            for a in verb.exclusive:
                group.add_argument(*a.flags, **a.options)
        p.set_defaults(func=verb.func, **verb.defaults)
