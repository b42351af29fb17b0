"""CPU per job of an ``elb simulate`` replay (the live planner, ``elb.core.planner.plan_pass``, driving
the policy) as the cluster grows, against a plain event-driven replay of the same policy, and a
year of a 4,000-node cluster extrapolated. Every figure is measured in this one run and printed
beside its target.

    python benchmarks/bench_replay_scale.py [--logs DIR] [--days 60] [--small 20] [--large 77]
                                            [--policy elb] [--year]

The workload is the first ``--days`` of KTH-SP2 interleaved into copies
(``bench_simulate.scaled``: each job submitted once per copy, copy c shifted by c x 937 s mod 1 h,
the cap the copies times KTH's 52 nodes): ``--small`` copies (20: 1,040 nodes) and ``--large``
(77: 4,004 nodes), the same mix of jobs per node. Setting: 8-slot nodes, 300 s boot, 60 s polls,
per-second billing, fast-forward on.

1. scale: CPU ms per job at the small and at the large cluster, and their ratio. Target <= 1.5.
2. planner: at the large cluster, the replay against the plain one: the same simulator with each
   pass the policy's own ``decide`` on the simulated cluster's state (no planner, no join of
   journal, cloud and scheduler), and the ratio of their CPU. Target <= 3. Both replays must give
   the same node-hours, waits and decisions (checked: the benchmark stops if they differ).
3. year: a year of the large cluster extrapolated: the large replay's CPU per job times the jobs
   of KTH's whole year (Sep 1996 - Aug 1997) as that many copies. Target < 300 s. ``--year``
   replays the whole year as well (2.19 million jobs at 77 copies) and prints its CPU.

CPU time (``time.process_time``) is what is compared: other work on the machine inflates wall
time much more. Each replay runs in a forked child of its own, one at a time.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_simulate import DEFAULT_LOGS, LOGS, SPN, in_child, scaled

from elb.core.planner import PassPlan
from elb.simulate import runner
from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.runner import build_policy, prepare
from elb.simulate.swf import Workload, read_swf

KTH_NODES = 52  # KTH-SP2's 100 processors as 8-slot nodes, times 4 (``bench_simulate._cap``)
SCALE_TARGET = 1.5
PLANNER_TARGET = 3.0
YEAR_TARGET_CPU_S = 300.0
Figures = tuple[int, float, dict[str, object]]  # jobs, CPU s, the replay's figures


class PlainSimulator(Simulator):
    """The replay without the planner: each pass is the policy's ``decide`` on the joined state
    of the simulated cluster, carried out as the planner's plan would be (a replay with no
    failures, orders, warm pool or notices gets the same plan from both)."""

    def _plan(self, now: float) -> PassPlan:
        plan = self.policy.decide(self.state(now), self.history)
        return PassPlan(scaling=plan, wanted=plan.add)


def _replay(wl: Workload, copies: int, days: float | None, policy_name: str, plain: bool) -> Figures:
    big = scaled(wl, copies, days)
    cap = KTH_NODES * copies
    prepared = prepare(big, SPN, cap)
    policy = build_policy(policy_name, billing="second", slots_per_node=SPN, boot_time=300, max_nodes=cap)
    settings = SimSettings(slots_per_node=SPN, max_nodes=cap, fast_forward=True)
    if plain:  # ``replay`` builds a ``Simulator``: the plain one in this (forked, one-replay) child
        # runner imports Simulator without exporting it; replay looks it up in runner's globals.
        runner.Simulator = PlainSimulator  # type: ignore[attr-defined]
    cpu = time.process_time()
    m, _ = runner.replay(prepared, policy, settings, billing="second", price=1.0)
    cpu = time.process_time() - cpu
    figures = {k: v for k, v in m.as_dict().items() if k != "replay_seconds"}
    return len(big.jobs), cpu, figures


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--small", type=int, default=20, help="copies of the small cluster (x 52 nodes)")
    ap.add_argument("--large", type=int, default=77, help="copies of the large cluster (x 52 nodes)")
    ap.add_argument("--policy", default="elb")
    ap.add_argument("--year", action="store_true", help="also replay the whole year at the large cluster")
    args = ap.parse_args()
    if min(args.small, args.large) < 1 or args.days <= 0:
        ap.error("--small and --large must be at least 1, --days above 0")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; load {os.getloadavg()}")
    whole = read_swf(args.logs / LOGS[0])
    print(f"{LOGS[0]}: its first {args.days:g} days; policy {args.policy}")

    runs: dict[tuple[int, bool], Figures] = {}
    for copies, plain in ((args.small, False), (args.large, False), (args.large, True)):
        runs[copies, plain] = in_child(_replay, whole, copies, args.days, args.policy, plain)
        jobs, cpu, _ = runs[copies, plain]
        kind = "plain" if plain else "planner"
        print(
            f"  {kind:<7} {copies:>3} copies {KTH_NODES * copies:>5} nodes {jobs:>8} jobs {cpu:>8.2f} cpu s "
            f"{1000 * cpu / jobs:>7.3f} ms/job",
            flush=True,
        )
    (sj, sc, _), (lj, lc, lf), (pj, pc, pf) = runs[args.small, False], runs[args.large, False], runs[args.large, True]
    if lf != pf:
        differ = sorted(k for k in lf if lf[k] != pf.get(k))
        raise SystemExit(f"the plain replay's figures differ from the planner's: {', '.join(differ)}")
    small, large, plain_ms = 1000 * sc / sj, 1000 * lc / lj, 1000 * pc / pj
    year_jobs = len(whole.jobs) * args.large
    year = large / 1000 * year_jobs

    print("\nfigure                                                     measured   target")
    scale = large / small
    print(
        f"1. CPU per job, {KTH_NODES * args.large} against {KTH_NODES * args.small} nodes "
        f"({large:.3f} / {small:.3f} ms)".ljust(58)
        + f"{scale:>9.2f}x  <= {SCALE_TARGET:g}x "
        f"{_verdict(scale <= SCALE_TARGET)}"
    )
    ratio = large / plain_ms
    print(
        f"2. planner-driven against plain replay ({large:.3f} / {plain_ms:.3f} ms)".ljust(58)
        + f"{ratio:>9.2f}x  <= {PLANNER_TARGET:g}x {_verdict(ratio <= PLANNER_TARGET)}"
    )
    print(
        f"3. a year at {KTH_NODES * args.large} nodes ({year_jobs:,} jobs x {large:.3f} ms)".ljust(58)
        + f"{year:>8.0f} s  < {YEAR_TARGET_CPU_S:g} s {_verdict(year < YEAR_TARGET_CPU_S)}"
    )
    print(f"   (same node-hours, waits and decisions in both replays: {lf['node_hours']:.1f} node-hours)")
    if args.year:
        jobs, cpu, _ = in_child(_replay, whole, args.large, None, args.policy, False)
        print(
            f"3'. the whole year replayed: {jobs:,} jobs, {cpu:.0f} cpu s".ljust(58)
            + f"{cpu:>8.0f} s  < {YEAR_TARGET_CPU_S:g} s {_verdict(cpu < YEAR_TARGET_CPU_S)}"
        )


if __name__ == "__main__":
    main()
