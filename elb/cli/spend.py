"""``elb spend``: who spent the money. The billed node-hours and US dollars of elb's nodes over a
window, by user, project, queue or node group, and the cost of elasticity apart
(``elb.core.attribution``); from the journal (the nodes' lives) and the scheduler's accounting (which
job ran where: each driver's ``usage``). Text, ``--json`` or ``--csv``; docs/spend.md."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from elb.cli.commands import _add_config, _error, _read_only_journal
from elb.core.attribution import BY, Attribution, Part, UsageError, attribute, placed
from elb.core.durations import argument as duration
from elb.core.durations import minutes, utc_minute
from elb.core.exitcodes import Exit
from elb.core.spend import lives
from elb.service import factory

ELASTICITY_WORDS = {
    "booting": "booting (launch to ready, restarts)",
    "idle": "idle (ready, slots no job held)",
    "draining": "draining (and billed after the end)",
    "volumes": "warm pool volumes (stopped nodes)",
}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spend",
        help="who spent the money: billed node-hours and US dollars by user, project, queue or node group",
        description="Attributes every billed node-second of elb's nodes over the window (--since) to the jobs that "
        "ran on the node, in proportion to their slots, and the rest (booting, idle, draining, the warm pool's "
        "volumes) to the cost of elasticity, shown apart; the parts add up to the bill. Reads the journal "
        "(read-only) and the scheduler's accounting: Grid Engine's accounting file, or Slurm's sacct. Exit 3 "
        "when there is no journal, 4 when the accounting cannot be read (a new Grid Engine cell without its "
        "accounting file yet: no job has finished, exit 0).",
    )
    _add_config(p)
    p.add_argument("--by", choices=BY, default="user", help="attribute the jobs' share to each (default user)")
    p.add_argument("--since", type=duration, default="30d", metavar="DURATION", help="the last DURATION (default 30d)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object: the parts, their total and the bill")
    fmt.add_argument("--csv", action="store_true", help="CSV: one row per part (key, kind, jobs, node_hours, dollars)")
    p.add_argument(
        "--accounting",
        type=Path,
        default=None,
        metavar="FILE",
        help="Grid Engine's accounting file (default <sge.root>/<sge.cell>/common/accounting)",
    )
    p.set_defaults(func=cmd_spend)


def cmd_spend(args: argparse.Namespace) -> int:
    opened = _read_only_journal(args)
    if isinstance(opened, Exit):
        return opened
    cfg, journal = opened
    if not cfg.journal_path.exists():  # the read-only journal would be an empty one: an all-zero bill
        journal.close()
        _error(f"no journal at {cfg.journal_path}: elb has not run with this config yet, so nothing was billed")
        return Exit.CONFIG
    until = time.time()
    since = until - args.since
    try:
        found = lives(journal.nodes(include_gone=True), journal.events(), cfg.groups(cfg.policy.slots_per_node or 1))
        seen = journal.job_hosts(since - cfg.retention.journal_days * 86400.0, until)  # a job may start before
    finally:
        journal.close()
    note = factory.accounting_note(cfg, args.accounting)
    try:
        uses = factory.job_uses(cfg, since, until, args.accounting)
    except UsageError as err:
        _error(str(err))
        return Exit.UNREADABLE
    uses = placed(uses, seen)
    p = cfg.policy
    result = attribute(found, uses, by=args.by, since=since, until=until, billing=p.billing, period=p.billing_period)
    if args.json:
        print(json.dumps(result.as_json() | {"billing": p.billing}, indent=2))
    elif args.csv:
        print(to_csv(result), end="")
    else:
        for line in to_text(result, p.billing):
            print(line)
    if note is not None:
        if args.json or args.csv:
            print(f"elb: {note}", file=sys.stderr)  # the document on stdout stays the document
        else:
            print(f"({note})")
    return Exit.OK


def to_csv(result: Attribution) -> str:
    """One row per part, then the total and the bill (kind ``total``, ``billed``)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([result.by, "kind", "jobs", "node_hours", "dollars"])
    for part in result.parts:
        w.writerow([part.key, part.kind, part.jobs, f"{part.node_hours:.6f}", _money_csv(result, part.money)])
    w.writerow(["", "total", "", f"{result.node_seconds / 3600.0:.6f}", _money_csv(result, result.money)])
    bill = result.billed
    w.writerow(
        ["", "billed", "", f"{bill.node_seconds / 3600.0:.6f}", _money_csv(result, bill.money + bill.volume_money)]
    )
    return out.getvalue()


def _money_csv(result: Attribution, money: float) -> str:
    return f"{money:.4f}" if result.priced else ""


def to_text(result: Attribution, billing: str) -> list[str]:
    """The attribution as a table: the jobs' parts, the cost of elasticity apart, the total
    beside the bill."""
    total_money = result.money or 1.0
    total_seconds = result.node_seconds or 1.0
    labels = [part.key for part in result.jobs] + [f"  {_elasticity_label(p)}" for p in result.elasticity]
    width = max([42, *(len(label) for label in labels)])  # a label is never cut

    def row(label: str, part_jobs: str, seconds: float, money: float | None) -> str:
        share = (money / total_money) if result.priced and money is not None else seconds / total_seconds
        dollars = f"{money:>12.2f}" if result.priced and money is not None else f"{'-':>12}"
        return f"{label:<{width}} {part_jobs:>6} {seconds / 3600.0:>11.2f} {dollars} {share * 100:>6.1f}%"

    lines = [
        f"spend from {utc_minute(result.since)} to {utc_minute(result.until)} "
        f"({minutes(result.until - result.since)}), "
        f"by {result.by}; billing per {billing}",
        f"{result.by:<{width}} {'jobs':>6} {'node-hours':>11} {'US dollars':>12} {'share':>7}",
    ]
    for part in result.jobs:
        lines.append(row(part.key, str(part.jobs), part.node_seconds, part.money))
    if not result.jobs:
        lines.append("(no job of the accounting ran on elb's nodes in the window)")
    lines.append("cost of elasticity (no job on the node, or slots no job held):")
    for part in result.elasticity:
        lines.append(row(f"  {_elasticity_label(part)}", "", part.node_seconds, part.money))
    lines.append(row("total", "", result.node_seconds, result.money))
    bill = result.billed
    billed_money = f"{bill.money + bill.volume_money:.2f} US dollars" if result.priced else "no prices"
    lines.append(
        f"billed: {bill.node_seconds / 3600.0:.2f} node-hours, {billed_money}, over {bill.lives} node "
        f"stretch(es) in the journal"
    )
    if result.master_only:
        lines.append(
            f"({result.master_only} parallel job(s) charged to their master's host alone though they held more "
            "slots than it has: the accounting has no line of their tasks on other hosts, whose slots count as idle)"
        )
    if result.placed:
        lines.append(
            f"({result.placed} parallel job(s) charged on every host elb's own reads saw them hold: the accounting "
            "names only their master's host)"
        )
    if result.unmatched:
        lines.append(f"({result.unmatched} job record(s) of the accounting ran on hosts that are not elb's nodes)")
    return lines


def _elasticity_label(part: Part) -> str:
    words = ELASTICITY_WORDS[part.kind]
    return f"{words} [{part.key}]" if part.key else words
