"""Where elb's cost above the clairvoyant bound goes: one replay of elb's defaults and the bound
(``elb.simulate.bound``) on the same jobs, their node-hours split side by side.

    python benchmarks/bound_gap.py                                  # NASA-iPSC, its held-out half
    python benchmarks/bound_gap.py --log KTH-SP2-1996-2.2-cln.swf.gz --start 173.4 --days 60
    python benchmarks/bound_gap.py --start 0 --days 46 --set idle_factor=0.25
    python benchmarks/bound_gap.py --known-runtimes 1   # had every job requested its true run time

The replay is ``benchmarks/bench_frontier.py``'s (8-slot nodes, 300 s boot, 60 s polls with elb's
peek, per-second billing, the cap 4x the log's machine). Each node's life is split into its boot
(launch to ready), the time a job ran on it, the time it stood idle between its ready and its last
job, and its idle tail (last job to removal); the bound's into its boots (one a stretch), its jobs'
time and the gaps it kept (each shorter than a boot). Packing is node-time with a job on it less
the cost floor (slot-seconds / slots per node): slots left empty on a busy node. A node that ran
nothing cost its boot and its tail alone: the launches a replay made for jobs that other nodes
took first: their boots and idle tails are also given apart. The replay switches every node off
at the last job's end, as the bound does: no final drain is billed.

``--known-runtimes FACTOR`` replays the same jobs as if each had requested FACTOR times its true
run time (``h_rt``; 1: exactly), both elb and the bound: what the forecast would save knowing
when each running job ends (NASA-iPSC records no requested time; KTH-SP2 does, and its own
requests are replaced).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from elb.simulate.bound import busy_periods, clairvoyant
from elb.simulate.engine import NodeLife, SimSettings
from elb.simulate.runner import build_policy, prepare, replay, with_param
from elb.simulate.swf import SimJob, read_swf

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("ELB_TRACES", REPO.parent / "shared" / "traces"))
SPN, BOOT, POLL, CAP, PEEK, PEEK_GAP = 8, 300.0, 60.0, 4.0, 5.0, 10.0
HOUR = 3600.0


def split(lives: list[NodeLife], periods: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Node-seconds of ``lives`` by part (boot, jobs, idle before the last job, idle tail), and the
    nodes that ran nothing with their node-seconds, their boots and their idle tails."""
    keys = ("boot", "jobs", "idle between", "idle tail", "ran nothing", "ran nothing s", "ran nothing boot")
    out = dict.fromkeys((*keys, "ran nothing tail"), 0.0)
    for n in lives:
        busy = [(s, e) for s, e in periods.get(n.name, []) if n.ready_at <= s < n.terminated_at]
        ran = sum(min(e, n.terminated_at) - s for s, e in busy)
        last = max((min(e, n.terminated_at) for _, e in busy), default=n.ready_at)
        out["boot"] += n.ready_at - n.launched_at
        out["jobs"] += ran
        out["idle between"] += last - n.ready_at - ran
        out["idle tail"] += n.terminated_at - last
        if not busy:
            out["ran nothing"] += 1
            out["ran nothing s"] += n.terminated_at - n.launched_at
            out["ran nothing boot"] += n.ready_at - n.launched_at
            out["ran nothing tail"] += n.terminated_at - n.ready_at
    return out


def known_runtimes(jobs: Sequence[SimJob], factor: float) -> list[SimJob]:
    """``jobs`` as if each had requested ``factor`` times its run time."""
    return [dataclasses.replace(j, requested=j.run * factor) for j in jobs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", default="NASA-iPSC-1993-3.1-cln.swf.gz")
    ap.add_argument("--start", type=float, default=46.0, help="skip the log's first DAYS days")
    ap.add_argument("--days", type=float, default=None, help="replay only DAYS days")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an elb parameter")
    ap.add_argument("--traces", type=Path, default=TRACES)
    ap.add_argument(
        "--known-runtimes", type=float, default=None, metavar="FACTOR", help="every job requests FACTOR x its run time"
    )
    args = ap.parse_args()
    wl = read_swf(args.traces / args.log, args.start * 86400.0, args.days)
    if args.known_runtimes is not None:
        wl.jobs = known_runtimes(wl.jobs, args.known_runtimes)
    cap = max(1, round(CAP * -(-(wl.max_procs or max(j.slots for j in wl.jobs)) // SPN)))
    prepared = prepare(wl, SPN, cap)
    settings = SimSettings(
        slots_per_node=SPN,
        max_nodes=cap,
        boot_time=BOOT,
        poll_interval=POLL,
        peek_interval=PEEK,
        peek_gap=PEEK_GAP,
        record=True,
    )
    policy = build_policy("elb", billing="second", slots_per_node=SPN, boot_time=BOOT, max_nodes=cap)
    for pair in args.set:
        key, _, value = pair.partition("=")
        policy = with_param(policy, key, value)
    metrics, out = replay(prepared, policy, settings, billing="second", price=1.0)
    bound = clairvoyant(prepared, settings, price=1.0)
    floor = prepared.floors.floor_node_hours
    parts = split(out.nodes, busy_periods(out.placements))
    bound_boot = bound.launches * BOOT / HOUR
    rows = [
        ("billed node-h", metrics.cost, bound.cost),
        ("  boots", parts["boot"] / HOUR, bound_boot),
        ("    of nodes that ran nothing", parts["ran nothing boot"] / HOUR, 0.0),
        ("  idle between jobs (bound: gaps kept)", parts["idle between"] / HOUR, bound.idle_node_hours - bound_boot),
        ("  idle tail (last job to removal)", parts["idle tail"] / HOUR, 0.0),
        ("    of nodes that ran nothing", parts["ran nothing tail"] / HOUR, 0.0),
        ("  node-time with a job on it", parts["jobs"] / HOUR, bound.cost - bound.idle_node_hours),
        (
            "    of which packing (above the floor)",
            parts["jobs"] / HOUR - floor,
            bound.cost - bound.idle_node_hours - floor,
        ),
        ("launches", float(out.launches), float(bound.launches)),
        ("nodes that ran nothing", parts["ran nothing"], 0.0),
        ("  their node-h", parts["ran nothing s"] / HOUR, 0.0),
    ]
    sets = " ".join(args.set) or "defaults"
    if args.known_runtimes is not None:
        sets += f"; every job requesting {args.known_runtimes:g} x its run time"
    print(
        f"{args.log}, days {args.start:g}-{'end' if args.days is None else f'{args.start + args.days:g}'}: "
        f"{len(wl.jobs):,} jobs, cap {cap} nodes; cost floor {floor:,.0f} node-h"
    )
    print(
        f"elb ({sets}): {metrics.cost:,.0f} node-h at p95 {metrics.wait_p95:.0f} s; "
        f"bound {bound.cost:,.0f} at p95 {bound.wait_p95:.0f} s: {(metrics.cost / bound.cost - 1) * 100:+.1f}%"
    )
    print(f"{'':42} {'elb':>10} {'bound':>10} {'elb - bound':>12}")
    for name, ours, theirs in rows:
        print(f"{name:42} {ours:10,.0f} {theirs:10,.0f} {ours - theirs:+12,.0f}")


if __name__ == "__main__":
    main()
