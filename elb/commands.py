"""The daemon's own subcommands: run, once, status, validate, plot."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from elb import assets, extras, factory
from elb.config import Config, ConfigError, load_config
from elb.daemon import Balancer, run_forever, snapshot_summary
from elb.journal import Journal
from elb.logs import setup_logging
from elb.model import NodeState
from elb.policy.base import minutes
from elb.reconcile import lost_for
from elb.stats import read_rows

log = logging.getLogger("elb")


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", type=Path, default=None, help="config file (default /etc/elb/elb.yml)")


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run the balancer: a pass every poll_interval until SIGTERM")
    _add_config(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("once", help="run one pass")
    _add_config(p)
    p.add_argument("--dry-run", action="store_true", help="print the snapshot and the plan; change nothing")
    p.set_defaults(func=cmd_once)

    p = sub.add_parser("status", help="nodes with state, uptime, billing period and jobs; queue summary")
    _add_config(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("validate", help="check a config file; exit 1 on errors")
    _add_config(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("plot", help="draw waiting jobs, running jobs and nodes over time from the stats file")
    _add_config(p)
    p.add_argument("--stats", type=Path, default=None, help="stats file (default: the config's)")
    p.add_argument("--output", "-o", type=Path, default=Path("elb.png"), help="PNG to write")
    p.set_defaults(func=cmd_plot)


def _load(args: argparse.Namespace) -> Config | None:
    try:
        return load_config(args.config)
    except ConfigError as err:
        print(f"elb: config error: {err}", file=sys.stderr)
        return None


def _playbooks_missing(cfg: Config) -> bool:
    """True (and says why on stderr) when elb has no playbooks to provision nodes with."""
    problem = assets.playbook_dir_problem(cfg.provision.playbook_dir)
    if problem is not None:
        print(f"elb: config error: {problem}", file=sys.stderr)
    return problem is not None


def cmd_validate(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None or _playbooks_missing(cfg):
        return 1
    print(
        f"ok: policy {cfg.policy.name}, {cfg.policy.min_nodes}-{cfg.policy.max_nodes} nodes, "
        f"provider {cfg.cloud.provider}"
    )
    print(f"playbooks: {(cfg.provision.playbook_dir or assets.default_playbook_dir()).resolve()}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None or _playbooks_missing(cfg):
        return 1
    setup_logging(cfg.log_format)
    journal = Journal(cfg.journal_path)
    balancer = Balancer(
        cfg,
        sge=factory.make_sge(cfg),
        journal=journal,
        cloud=factory.make_cloud(cfg),
        provisioner=factory.make_provisioner(cfg),
    )
    if cfg.metrics_port is not None:
        factory.start_metrics(cfg, balancer)
    log.info(
        "elb starting: poll %s, policy %s, nodes %d-%d, provider %s",
        minutes(cfg.poll_interval),
        cfg.policy.name,
        cfg.policy.min_nodes,
        cfg.policy.max_nodes,
        cfg.cloud.provider,
    )
    try:
        run_forever(balancer, cfg.poll_interval)
    finally:
        journal.close()
    return 0


def cmd_once(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None or (not args.dry_run and _playbooks_missing(cfg)):
        return 1
    setup_logging(cfg.log_format, logging.WARNING if args.dry_run else logging.INFO)
    sge = factory.make_sge(cfg)
    if args.dry_run:
        # Read-only: an existing journal is read, never written; cloud and provisioner are not built.
        journal = Journal(cfg.journal_path if cfg.journal_path.exists() else ":memory:")
        balancer = Balancer(cfg, sge=sge, journal=journal)
    else:
        journal = Journal(cfg.journal_path)
        balancer = Balancer(
            cfg,
            sge=sge,
            journal=journal,
            cloud=factory.make_cloud(cfg),
            provisioner=factory.make_provisioner(cfg),
        )
    try:
        result = balancer.run_pass(dry_run=args.dry_run)
    finally:
        journal.close()
    if not result.ok:
        print(f"elb: {result.summary()}", file=sys.stderr)
        return 2
    assert result.snapshot is not None and result.plan is not None
    if args.dry_run:
        print("snapshot:")
        for line in snapshot_summary(result.snapshot, cfg.cluster.master):
            print(f"  {line}")
        print("plan (dry run, nothing changed):")
        for line in result.plan.describe():
            print(f"  {line}")
    else:
        print(result.summary())
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None:
        return 1
    journal = Journal(cfg.journal_path if cfg.journal_path.exists() else ":memory:")
    try:
        snap = factory.make_sge(cfg).read_snapshot()
    except Exception as err:  # status still shows the journal when SGE can't be read
        print(f"warning: cannot read SGE: {err}", file=sys.stderr)
        snap = None
    now = snap.now if snap is not None else time.time()
    nodes = journal.nodes()
    period = cfg.policy.billing_period
    print(f"{'node':<12} {'state':<13} {'uptime':>8} {'into period':>12} {'jobs':>5}  instance")
    for n in nodes:
        up = now - n.launched_at
        jobs = len(snap.jobs_on(n.name)) if snap is not None else 0
        lost = lost_for(n, snap, now) if snap is not None and n.state is NodeState.READY else 0.0
        note = f"  SGE has not reached it for {minutes(lost)}" if lost else ""
        print(
            f"{n.name:<12} {n.state.value:<13} {minutes(up):>8} {minutes(up % period):>12} {jobs:>5}  "
            f"{n.instance_id or '-'}{note}"
        )
    if not nodes:
        print("(no nodes managed by elb)")
    if snap is not None:
        for line in snapshot_summary(snap, cfg.cluster.master):
            print(line)
    for p in journal.passes(limit=1):
        print(f"last pass: {'ok' if p.ok else 'FAILED'}, {minutes(now - p.time)} ago: {p.summary}")
    journal.close()
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    cfg = _load(args)
    if cfg is None:
        return 1
    if (missing := extras.plot_missing()) is not None:
        print(f"elb: {missing}", file=sys.stderr)
        return 1
    from elb.plot import plot_stats  # noqa: PLC0415 (matplotlib is slow to import: only here)

    path = args.stats or cfg.stats_path
    try:
        rows = list(read_rows(path))
        plot_stats(rows, args.output, title=f"elb: cluster {cfg.cluster.name}")
    except (OSError, ValueError) as err:
        print(f"elb: cannot plot {path}: {err}", file=sys.stderr)
        return 1
    print(f"wrote {args.output} ({len(rows)} passes)")
    return 0
