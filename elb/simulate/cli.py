"""``elb simulate``: replay an SWF job log under scaling policies and compare cost and wait."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from elb.core.budget import Budget
from elb.core.config import PolicyConfig
from elb.core.durations import minutes
from elb.core.extras import plot_missing
from elb.core.naming import MAX_NODES
from elb.core.warmpool import WarmPool
from elb.schedulers.sge.groupoptions import sge_options
from elb.simulate.accounting import read_log
from elb.simulate.bound import Bound, clairvoyant
from elb.simulate.budgetcli import add_budget_options, anchored, budget_json, budget_of, report_budget
from elb.simulate.engine import SimSettings
from elb.simulate.frontier import Point, bound_line, compare, frontiers
from elb.simulate.frontier import plot as frontier_plot
from elb.simulate.frontier import table as frontier_table
from elb.simulate.groups import SimGroups, SimGroupsError, load_groups, one_group
from elb.simulate.powersave import SUSPEND_TIME, Behind
from elb.simulate.report import Billing, Metrics, group_table, plot, pool_table, table
from elb.simulate.runner import Prepared, SimError, prepare
from elb.simulate.sweep import Replayed, RunSpec, Setup, default_workers, plan_runs, replay_all, run_all
from elb.simulate.swf import SwfError, Workload, overrun

ALL_POLICIES = ("elb", "starcluster", "parallelcluster", "slurm", "static")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="replay a job log (SWF) through a simulated elastic cluster and compare policies",
        description=(
            "Replay a Standard Workload Format log through a simulated SGE cluster whose nodes boot "
            "with a delay and are billed like EC2, under each policy, and report cost and waits."
        ),
    )
    p.add_argument(
        "log", type=Path, help="job log: SWF (plain or .gz) or Grid Engine's accounting file (what qacct reads)"
    )
    p.add_argument(
        "--policies",
        default="elb,starcluster,parallelcluster,slurm,static",
        help="comma-separated: " + ",".join(ALL_POLICIES),
    )
    p.add_argument(
        "--billing",
        choices=("second", "hour"),
        default="second",
        help="per second with a 60 s minimum, or every started hour (default second)",
    )
    p.add_argument("--price", type=float, default=1.0, help="price per node-hour (default 1.0)")
    p.add_argument("--slots-per-node", type=int, default=8, help="slots per node (default 8)")
    p.add_argument("--boot-time", type=float, default=300.0, help="launch to ready, seconds (default 300)")
    p.add_argument("--boot-jitter", type=float, default=0.0, help="extra random boot delay up to this (s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the boot jitter")
    p.add_argument("--poll", type=float, default=60.0, help="balancer poll interval, seconds (default 60)")
    p.add_argument(
        "--peek",
        type=float,
        default=_LIVE.peek_interval,
        help="elb's quick reaction: a pass at the first peek (this often, seconds) that sees a job submitted since "
        f"the last pass still waiting, as the daemon's policy.peek_interval (default {_LIVE.peek_interval:g}; "
        "0: plain polling; the peers keep their own cadence)",
    )
    p.add_argument(
        "--peek-gap",
        type=float,
        default=_LIVE.peek_gap,
        help=f"the least seconds from a pass to one a peek starts, as policy.peek_gap (default {_LIVE.peek_gap:g})",
    )
    p.add_argument(
        "--max-nodes",
        default=None,
        help="cluster cap: N nodes, or Kx for K times the log's machine (MaxProcs; an accounting file: the most "
        "slots its jobs held at once; default: the zero-wait peak of the log)",
    )
    p.add_argument(
        "--dispatch",
        choices=("sge", "fifo", "easy"),
        default="sge",
        help="how waiting jobs start: SGE's default without reservations (a later job that fits starts "
        "around a blocked one; default), strict FIFO, or EASY backfill",
    )
    p.add_argument("--backfill", action="store_true", help="the same as --dispatch easy")
    p.add_argument(
        "--placement",
        choices=("first", "best"),
        default="first",
        help="a narrow job goes on the lowest-numbered ready node that fits (first, default) or the fullest (best)",
    )
    p.add_argument(
        "--overrun",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="make this share (0..1) of the jobs with a requested time run past it (seeded by --seed)",
    )
    p.add_argument(
        "--overrun-hours", type=float, default=4.0, help="an overrun is 1 min to this many hours (default 4)"
    )
    p.add_argument("--start", type=float, default=0.0, help="skip the log's first DAYS days")
    p.add_argument("--days", type=float, default=None, help="replay only DAYS days")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy parameter, for every listed policy that has it (repeatable)",
    )
    p.add_argument(
        "--sweep",
        action="append",
        nargs="?",
        const="",
        default=None,
        metavar="KEY=V1,V2,...",
        help="replay each policy that has parameter KEY once per value (repeatable: a policy with two swept "
        "keys gets every pair); alone: each policy over its own knob (elb idle_factor x launch_delay, slurm "
        "suspend_time, parallelcluster idle_time, starcluster wait_time); prints each policy's frontier "
        "(cost against p95 wait) and --plot draws them",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="replay in N processes at once (default: one per CPU this process may use)",
    )
    p.add_argument(
        "--bound",
        action="store_true",
        help="also the clairvoyant replay (every arrival and run time known): the cost no policy beats at its "
        "waits, and elb's distance from it",
    )
    p.add_argument(
        "--groups",
        type=Path,
        default=None,
        metavar="FILE.yml",
        help="node groups (elb's node_groups list, an optional max_nodes and how the log's memory, queue "
        "and partition fields map to requests; docs/simulate.md): each job goes to the cheapest group "
        "that can run it and costs are given per group",
    )
    p.add_argument(
        "--warm-pool",
        type=int,
        default=0,
        metavar="N",
        help="replay each policy also with a warm pool of up to N stopped nodes (one group only; "
        "docs/simulate.md) and compare the two",
    )
    p.add_argument(
        "--restart-time", type=float, default=60.0, help="warm pool: start of a stopped node to ready (default 60)"
    )
    p.add_argument(
        "--volume-price",
        type=float,
        default=0.03,
        help="warm pool: a stopped node's volumes per hour, in --price's money (default 0.03)",
    )
    p.add_argument(
        "--pool-max-age", type=float, default=86400.0, help="warm pool: longest a node stays stopped (default 86400)"
    )
    p.add_argument(
        "--provision-failure-rate",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="make this share (0..1) of the bring-ups fail after their boot time (seeded by --seed): "
        "the launch back-off then holds launches as it does live",
    )
    p.add_argument(
        "--scheduler",
        type=Behind,
        choices=tuple(Behind),
        default=Behind.SGE,
        help="the scheduler elb runs behind: Grid Engine (sge, default: elb's policy counts the demand) or Slurm "
        "(Slurm's power saving asks for nodes by name and elb launches, gives back and removes on its asks; "
        "elb's policy only; one node group)",
    )
    p.add_argument(
        "--slurm-nodes",
        type=int,
        default=None,
        metavar="N",
        help="behind Slurm: the cloud nodes slurm.conf names, which Slurm may ask for (default: the cap, "
        "--max-nodes); more than the cap: elb gives back what Slurm asks past it",
    )
    p.add_argument(
        "--suspend-time",
        type=float,
        default=SUSPEND_TIME,
        help=f"behind Slurm: Slurm's SuspendTime, after which it releases an idle node (default {SUSPEND_TIME:g}, "
        "docs/slurm.md's slurm.conf: elb's idle rule decides first)",
    )
    p.add_argument("--no-fast-forward", action="store_true", help="call the policy at every poll")
    add_budget_options(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE.png", help="draw cost against p95 wait")
    p.set_defaults(func=cmd_simulate)


def _kv(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise SimError(f"{what} wants KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _max_nodes(raw: str | None, max_procs: int | None, spn: int) -> int | None:
    """``--max-nodes`` as a count of nodes, from 1 to the most a cluster may have (None: not given)."""
    if raw is None:
        return None
    n = _nodes_asked(raw, max_procs, spn)
    if n > MAX_NODES:
        raise SimError(f"--max-nodes {raw}: more than the {MAX_NODES} nodes a cluster may have")
    return n


def _nodes_asked(raw: str, max_procs: int | None, spn: int) -> int:
    """``--max-nodes``' count (N, or K times the log's machine), at least 1."""
    try:
        if raw.endswith("x"):
            if max_procs is None:
                raise SimError("--max-nodes Kx needs the log's MaxProcs header; give a node count")
            k = float(raw[:-1])
            machine = -(-max_procs // spn)
            if not (math.isfinite(k) and k > 0):
                raise SimError(f"--max-nodes {raw}: K must be a number above 0")
            n = round(min(k * machine, MAX_NODES + 1.0))  # K so large the product is inf: past the most
            if n < 1:
                raise SimError(
                    f"--max-nodes {raw}: {k:g} times the log's machine ({machine} nodes of {spn} slots) is less "
                    "than one node"
                )
            return n
        n = int(raw)
    except ValueError:
        raise SimError(f"--max-nodes: not a count or Kx: {raw!r}") from None
    if n < 1:
        raise SimError("--max-nodes must be at least 1")
    return n


class _Progress:
    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, fraction: float) -> None:
        width = 30
        done = int(fraction * width)
        sys.stderr.write(f"\r{self.label:<24} [{'#' * done}{'.' * (width - done)}] {fraction * 100:5.1f}%")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.plot is not None and (missing := plot_missing()) is not None:
        print(f"elb simulate: --plot: {missing}", file=sys.stderr)
        return 2
    try:
        return _simulate(args)
    except (SimError, SwfError) as err:
        print(f"elb simulate: {err}", file=sys.stderr)
        return 2


_POOL_FLAGS = {
    "max_nodes": "--warm-pool",
    "restart_time": "--restart-time",
    "volume_price_per_hour": "--volume-price",
    "max_age": "--pool-max-age",
}


def _warm_pool(args: argparse.Namespace) -> WarmPool | None:
    """The warm pool the options ask for, or None (``--warm-pool 0``)."""
    try:
        pool = WarmPool(
            max_nodes=args.warm_pool,
            restart_time=args.restart_time,
            volume_price_per_hour=args.volume_price,
            max_age=args.pool_max_age,
        )
    except ValidationError as err:
        raise SimError(
            "; ".join(f"{_POOL_FLAGS.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in err.errors())
        ) from None
    if not pool.enabled:
        return None
    if args.groups is not None:
        raise SimError("--warm-pool applies to the one group of a replay without --groups; set warm_pool in the file")
    return pool


_LIVE = PolicyConfig()  # the daemon's defaults, which a replay follows unless told otherwise
_NUMBERS = (
    "--price",
    "--boot-time",
    "--boot-jitter",
    "--poll",
    "--peek",
    "--peek-gap",
    "--overrun",
    "--overrun-hours",
    "--start",
    "--days",
    "--restart-time",
    "--volume-price",
    "--pool-max-age",
    "--provision-failure-rate",
    "--suspend-time",
)


def _checked_policies(args: argparse.Namespace) -> list[str]:
    """The policies asked for; ``SimError`` for an unknown one or a number out of its range."""
    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_POLICIES]
    if unknown or not names:
        raise SimError(f"unknown policy {', '.join(unknown) or '(none)'}; known: {', '.join(ALL_POLICIES)}")
    _check_finite(args)
    _check_signs(args)
    _check_bounds(args)
    return names


def _check_finite(args: argparse.Namespace) -> None:
    """``SimError`` for a number that is not finite."""
    for flag in _NUMBERS:  # NaN passes every comparison below, and inf makes a replay without end
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and not math.isfinite(value):
            raise SimError(f"{flag} must be a finite number, got {value:g}")


def _check_signs(args: argparse.Namespace) -> None:
    """``SimError`` for a size, poll or price not positive, or a time negative."""
    for flag, value in (("--slots-per-node", args.slots_per_node), ("--poll", args.poll), ("--price", args.price)):
        if value <= 0:
            raise SimError(f"{flag} must be positive")
    if args.boot_time < 0 or args.boot_jitter < 0 or args.start < 0 or (args.days is not None and args.days <= 0):
        raise SimError("--boot-time, --boot-jitter and --start must be >= 0, --days > 0")


def _check_bounds(args: argparse.Namespace) -> None:
    """``SimError`` for a pacing time over a year (the live config's bound, ``PolicyConfig``), a
    peek neither off nor at least a second, or a failure rate that is not a share."""
    year = 365 * 86400.0
    for flag, seconds in (
        ("--boot-time", args.boot_time),
        ("--boot-jitter", args.boot_jitter),
        ("--poll", args.poll),
        ("--peek", args.peek),
        ("--peek-gap", args.peek_gap),
        ("--overrun-hours", args.overrun_hours * 3600.0),
    ):
        if seconds > year:
            raise SimError(f"{flag} must be at most a year")
    if args.peek < 0 or 0 < args.peek < 1 or args.peek_gap < 0:
        raise SimError("--peek must be 0 (plain polling) or at least 1 s, --peek-gap at least 0")
    if not 0 <= args.provision_failure_rate < 1:
        raise SimError("--provision-failure-rate must be a share: 0 <= SHARE < 1")
    _check_slurm(args)


def _check_slurm(args: argparse.Namespace) -> None:
    """``SimError`` for Slurm's options out of range, or given behind Grid Engine; a replay behind
    Slurm has one node group."""
    slurm = args.scheduler is Behind.SLURM
    if not slurm and (args.slurm_nodes is not None or args.suspend_time != SUSPEND_TIME):
        raise SimError("--slurm-nodes and --suspend-time are Slurm's: they go with --scheduler slurm")
    if args.slurm_nodes is not None and not 1 <= args.slurm_nodes <= MAX_NODES:
        raise SimError(f"--slurm-nodes must be from 1 to {MAX_NODES}")
    if not 0 < args.suspend_time <= 365 * 86400.0:
        raise SimError("--suspend-time must be above 0 and at most a year")
    if slurm and args.groups is not None:
        raise SimError("--scheduler slurm replays one node group: --groups is not for it")


def _simulate(args: argparse.Namespace) -> int:
    names = _checked_policies(args)
    budget = budget_of(args)
    spn = args.slots_per_node
    billing: Billing = args.billing
    groups = _groups_file(args)
    pool = _warm_pool(args)
    wl = overrun(
        read_log(args.log, start=args.start * 86400.0, days=args.days), args.overrun, args.overrun_hours, args.seed
    )
    if budget is not None or args.budget_sweep:  # the replay starts at a budget period's start
        wl = anchored(wl)
    prepared = prepare(wl, spn, _max_nodes(args.max_nodes, wl.max_procs, spn), groups=groups)
    if groups is not None:  # the first group's size stands for "a node" where one figure is needed
        spn = groups.groups.groups[0].slots
    settings = _settings(args, spn, prepared.max_nodes, budget)
    # The same replay with the one group's warm pool, beside each run without it.
    pooled = None if pool is None else dataclasses.replace(prepared, groups=one_group(spn, prepared.max_nodes, pool))
    setup = Setup(prepared, pooled, settings, billing, args.price, args.boot_time, args.poll, groups)
    specs = plan_runs(setup, names, [_kv(s, "--set") for s in args.set], args.sweep or [])
    tty = sys.stderr.isatty() and not args.json
    results, replays = _replayed(args, setup, specs, tty)
    pairs = [(results[i - 1], results[i]) for i, spec in enumerate(specs) if spec.pooled]
    bound = clairvoyant(prepared, settings, price=args.price) if args.bound else None
    points = [Point.of(spec, m) for spec, m in zip(specs, results, strict=True) if not spec.pooled]
    _report(
        args, wl, prepared, results, groups, billing, spn, pairs, _Frontiers(points, bound, bool(args.sweep), args.poll)
    )
    if replays is not None:
        runs = [(setup.policy(spec), spec.label, replays[i]) for i, spec in enumerate(specs) if not spec.pooled]
        report_budget(args, prepared, runs, settings, replays=(results, [out for _, out in replays]), tty=tty)
    return 0


def _replayed(
    args: argparse.Namespace, setup: Setup, specs: Sequence[RunSpec], tty: bool
) -> tuple[list[Metrics], list[Replayed] | None]:
    """Every replay's metrics, and their raw outcomes (per-job waits, node lives) only when the
    budget's reports or ``--spend-by`` read them: a sweep's replays of a large log would otherwise
    all be held here at once."""
    workers = args.workers or default_workers()
    progress, done = (_Progress, _count_done) if tty else (None, None)
    if args.budget is None and not args.budget_sweep and args.spend_by is None:
        return run_all(setup, specs, workers, progress=progress, done=done), None
    replays = replay_all(setup, specs, workers, progress=progress, done=done)
    return [m for m, _ in replays], replays


def _groups_file(args: argparse.Namespace) -> SimGroups | None:
    """The node groups of ``--groups``, or None; ``SimError`` for one that cannot be read, or
    with ``--max-nodes`` too."""
    if args.groups is None:
        return None
    if args.max_nodes is not None:
        raise SimError("--max-nodes and --groups: give max_nodes in the groups file")
    try:
        return load_groups(args.groups)
    except SimGroupsError as err:
        raise SimError(str(err)) from None


def _settings(args: argparse.Namespace, spn: int, max_nodes: int, budget: Budget | None) -> SimSettings:
    """The replay's settings from the command line (``spn``: a node's slots)."""
    return SimSettings(
        slots_per_node=spn,
        max_nodes=max_nodes,
        boot_time=args.boot_time,
        boot_jitter=args.boot_jitter,
        seed=args.seed,
        poll_interval=args.poll,
        peek_interval=args.peek,
        peek_gap=args.peek_gap,
        dispatch="easy" if args.backfill else args.dispatch,
        placement=args.placement,
        fast_forward=not args.no_fast_forward,
        price_per_hour=args.price,
        provision_failure_rate=args.provision_failure_rate,
        budget=budget,
        billing=args.billing,
        record=args.spend_by is not None,
        scheduler=args.scheduler,
        slurm_nodes=args.slurm_nodes,
        suspend_time=args.suspend_time,
    )


@dataclass(frozen=True, slots=True)
class _Frontiers:
    """What a sweep (or ``--bound``) adds to the report."""

    points: list[Point]
    bound: Bound | None
    swept: bool
    slack: float  # a poll: elb's decisions come that often, Slurm's every 10 s

    @property
    def shown(self) -> bool:
        return self.swept or self.bound is not None

    def as_dict(self) -> dict[str, object]:
        fronts = frontiers(self.points)
        return {
            "points": [p.as_dict() for p in self.points],
            "frontiers": {name: [p.as_dict() for p in front] for name, front in fronts.items()},
            "elb_against_peers": [a.as_dict() for a in compare(fronts, slack=self.slack)],
            "bound": None if self.bound is None else self.bound.as_dict(),
        }


def _count_done(done: int, total: int) -> None:
    sys.stderr.write(f"\rreplays done: {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _report(  # noqa: PLR0917 (the replay's parts, passed on from _simulate)
    args: argparse.Namespace,
    wl: Workload,
    prepared: Prepared,
    results: list[Metrics],
    groups: SimGroups | None,
    billing: Billing,
    spn: int,
    pairs: list[tuple[Metrics, Metrics]],
    fronts: _Frontiers,
) -> None:
    """Print the replay's results: a table (and one per group, the frontiers of a sweep), or
    JSON with --json."""
    warnings = [_saturation(m, prepared.max_nodes) for m in results if m.saturated]
    if args.json:
        doc = _report_json(args, wl, prepared, results, groups, billing, spn, pairs, fronts)
        print(json.dumps(doc | {"warnings": warnings}, indent=2))
    else:
        _print_head(args, wl, prepared, groups, billing, spn)
        print(table(results, prepared.floors, args.price))
        for m in results:
            if m.scheduler == Behind.SLURM:
                print(f"{m.label} behind Slurm: {m.asked} nodes asked for, {m.given_back} given back")
        for part in _more_tables(args, prepared, results, groups, pairs, fronts):
            print()
            print(part)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
    for job, why in prepared.unservable[:5]:
        print(f"unservable job {job.job_id}: {why}", file=sys.stderr)
    if args.plot is not None:
        _draw(args, results, fronts, f"{args.log.name}: {spn}-slot nodes, {args.boot_time:g} s boot, per {billing}")


def _report_json(  # noqa: PLR0917 (the replay's parts, passed on from _report)
    args: argparse.Namespace,
    wl: Workload,
    prepared: Prepared,
    results: list[Metrics],
    groups: SimGroups | None,
    billing: Billing,
    spn: int,
    pairs: list[tuple[Metrics, Metrics]],
    fronts: _Frontiers,
) -> dict[str, object]:
    """The replay's results as ``--json`` prints them, but for the warnings."""
    return {
        "log": str(args.log),
        "jobs": len(prepared.jobs),
        "skipped": dict(wl.skipped),
        "failed": wl.failed,
        "unservable": {
            "jobs": len(prepared.unservable),
            "reasons": _unservable_reasons(prepared),
            "first": [{"job_id": j.job_id, "reason": why} for j, why in prepared.unservable[:20]],
        },
        "groups": [g.model_dump() for g in prepared.groups.groups.groups] if groups else None,
        "floor_node_hours_by_group": {k: f.floor_node_hours for k, f in prepared.group_floors.items()},
        "overrun": wl.overrun,
        "settings": {
            "billing": billing,
            "price": args.price,
            "slots_per_node": spn,
            "boot_time": args.boot_time,
            "poll": args.poll,
            "peek": args.peek,
            "peek_gap": args.peek_gap,
            "max_nodes": prepared.max_nodes,
            "dispatch": "easy" if args.backfill else args.dispatch,
            "placement": args.placement,
            "scheduler": args.scheduler,
            "slurm": {"nodes": args.slurm_nodes or prepared.max_nodes, "suspend_time": args.suspend_time}
            if args.scheduler is Behind.SLURM
            else None,
            "budget": budget_json(budget_of(args)),
            "warm_pool": {
                "max_nodes": args.warm_pool,
                "restart_time": args.restart_time,
                "volume_price_per_hour": args.volume_price,
                "max_age": args.pool_max_age,
            }
            if pairs
            else None,
        },
        "floor_node_hours": prepared.floors.floor_node_hours,
        "zero_wait_node_hours": prepared.floors.zero_wait_node_hours,
        "results": [m.as_dict() for m in results],
        "sweep": fronts.as_dict() if fronts.shown else None,
    }


def _print_head(  # noqa: PLR0917 (the replay's parts, passed on from _report)
    args: argparse.Namespace,
    wl: Workload,
    prepared: Prepared,
    groups: SimGroups | None,
    billing: Billing,
    spn: int,
) -> None:
    """The table's head: the log, its jobs, the nodes and the settings; the jobs the log changed or
    left out, and the unservable by why."""
    if groups is None:
        size = f"{prepared.max_nodes} nodes max of {spn} slots"
    else:
        size = f"{len(groups.groups)} node groups ({_describe(groups)}), {prepared.max_nodes} nodes max"
    print(
        f"{args.log.name}: {len(prepared.jobs)} jobs, {size}, "
        f"boot {args.boot_time:g} s, poll {args.poll:g} s"
        f"{f' (elb peeks every {args.peek:g} s)' if 0 < args.peek < args.poll else ''}, billing per {billing}"
        f", dispatch {'easy' if args.backfill else args.dispatch}"
    )
    if args.scheduler is Behind.SLURM:
        nodes = args.slurm_nodes or prepared.max_nodes
        print(
            f"behind Slurm: its power saving asks elb for nodes by name ({nodes} cloud nodes in slurm.conf, "
            f"SuspendTime {args.suspend_time:g} s); the peers are replayed as themselves"
        )
    _print_changes(dict(wl.skipped), wl.overrun, wl.failed)
    reasons = _unservable_reasons(prepared)
    if reasons:
        print(
            f"unservable: {len(prepared.unservable)} jobs no node group can run (in the replay, never "
            "started, not demand): " + "; ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        )


def _unservable_reasons(prepared: Prepared) -> dict[str, int]:
    """How many jobs are unservable for each reason."""
    reasons: dict[str, int] = {}
    for _, why in prepared.unservable:
        reasons[why] = reasons.get(why, 0) + 1
    return reasons


def _saturation(m: Metrics, cap: int) -> str:
    """Why a replay's queue never drains: the cap when the replay had that many nodes up at once
    and every job started; else the budget when it held launches, else the policy, which left
    jobs waiting with room to launch (a job that never started waited at the replay's end with
    no job running and every node it needs within the cap: unservable jobs are apart)."""
    head = (
        f"{m.label}: the queue never drains (longest backlog {minutes(m.longest_backlog)}, "
        f"{m.never_started} jobs never started)"
    )
    if m.peak_nodes >= cap and not m.never_started:
        return f"{head}: the cluster saturates at {cap} nodes"
    if m.never_started and not m.budget_held:  # the replay gave up with no job to end: room to launch
        return (
            f"{head}: the policy left them waiting though the cap's {cap} nodes could run them "
            f"(at most {m.peak_nodes} up at once, {m.launches} launches in the replay)"
        )
    if m.budget_held:
        return (
            f"{head} with at most {m.peak_nodes} of the {cap} nodes up at once: the budget held launches at "
            f"{m.budget_held} passes, not the cap"
        )
    return (
        f"{head} with at most {m.peak_nodes} of the {cap} nodes up at once ({m.launches} launches): "
        "the policy left them waiting, not the cap"
    )


def _draw(args: argparse.Namespace, results: list[Metrics], fronts: _Frontiers, title: str) -> None:
    """``--plot``: the frontiers of a sweep (or with ``--bound``), else a point per policy."""
    if fronts.shown:
        frontier_plot(fronts.points, args.plot, title, fronts.bound)
    else:
        plot(results, args.plot, title)
    if not args.json:
        print(f"plot: {args.plot}")


def _more_tables(  # noqa: PLR0917 (the replay's parts, passed on from _report)
    args: argparse.Namespace,
    prepared: Prepared,
    results: list[Metrics],
    groups: SimGroups | None,
    pairs: list[tuple[Metrics, Metrics]],
    fronts: _Frontiers,
) -> list[str]:
    """The tables after the main one: the warm pool's, the groups', the frontiers of a sweep."""
    parts = []
    if pairs:
        parts.append(
            f"warm pool: up to {args.warm_pool} stopped nodes, restart {args.restart_time:g} s, volumes "
            f"{args.volume_price:g}/h, max age {args.pool_max_age:g} s (cost: compute + volumes)\n" + pool_table(pairs)
        )
    if groups is not None:
        parts.append(group_table(results, prepared.group_floors))
    if fronts.swept:
        parts.append(frontier_table(fronts.points, frontiers(fronts.points), fronts.bound, fronts.slack))
    elif fronts.bound is not None:
        parts.append(bound_line(fronts.points, fronts.bound))
    return parts


def _describe(groups: SimGroups) -> str:
    return ", ".join(
        f"{g.name}: {g.slots} slots"
        + (f" {', '.join(f'{k}={v}' for k, v in sge_options(g).offers.items())}" if sge_options(g).offers else "")
        + f", max {groups.groups.max_nodes_of(g)}"
        + (f", {g.price_per_hour:g}/h" if g.price_per_hour is not None else "")
        for g in groups.groups.groups
    )


def _print_changes(skipped: dict[str, int], overrun: int, failed: int) -> None:
    """What the replay left out of the log, or changed in it, and the failed jobs it kept."""
    if skipped:
        print("skipped: " + "; ".join(f"{n} {why}" for why, n in skipped.items()))
    if failed:
        print(
            f"failed: {failed} job{'s' if failed != 1 else ''} ended with a failure code "
            f"(replayed as {'they' if failed != 1 else 'it'} ran)"
        )
    if overrun:
        print(f"overrun: {overrun} jobs made to run past their requested time (--overrun)")
