"""CPU of ``elb simulate``'s replays (the live planner, ``elb.core.planner.plan_pass``, driving the
policy) against an independent plain event-driven replay of the same policy
(``benchmarks/plain_replay.py``), their costs side by side, CPU per job as the cluster grows, and a
year of a 4,000-node cluster extrapolated. Every figure is measured in this one run and printed
beside its target.

    python benchmarks/bench_replay_scale.py [--logs DIR] [--days 60] [--small 20] [--large 77]
                                            [--policy elb] [--compare elb,slurm,parallelcluster,starcluster]
                                            [--compare-copies 20,77] [--year] [--against DIR]
                                            [--steps]

The workload is the first ``--days`` of KTH-SP2 interleaved into copies
(``bench_simulate.scaled``: each job submitted once per copy, copy c shifted by c x 937 s mod 1 h,
the cap the copies times KTH's 52 nodes): ``--small`` copies (20: 1,040 nodes) and ``--large``
(77: 4,004 nodes), the same mix of jobs per node. Setting: 8-slot nodes, 300 s boot, 60 s polls
(Slurm's power saving: 10 s), per-second billing, fast-forward on.

1. plain: for each ``--compare`` policy at each of ``--compare-copies``, ``elb simulate``'s replay
   with ``--dispatch fifo`` and the plain replay (its own SWF reader, FIFO dispatch, the policy
   in a few lines, no code of elb's): the CPU of each and their ratio (target <= 3), and the cost
   (node-hours billed) by each and their difference: the plain replay is a second opinion on the
   figures as well as a yardstick. With ``--against DIR`` (an export of another commit, e.g.
   ``git archive main | tar -x -C DIR``), the same ``elb simulate`` replay with DIR's code, right
   after this code's, and the CPU of this code over DIR's: a change measured side by side.
1'. steps (``--steps``): each ``--compare`` policy's replay of figure 1 at the first of
   ``--compare-copies`` again, its CPU by step (``replay_steps``: a sampling of the stack), beside
   the plain replay's: the events, the planner and carrying out plans are what a replay costs
   whatever the policy, a floor under the ratio to the plain replay.
2. scale: CPU ms per job of ``--policy`` (default dispatch, SGE's) at the small and at the large
   cluster, and their ratio. Target <= 1.5.
3. year: a year of the large cluster extrapolated: the large replay's CPU per job times the jobs
   of KTH's whole year (Sep 1996 - Aug 1997) as that many copies. Target < 300 s. ``--year``
   replays the whole year as well (2.19 million jobs at 77 copies) and prints its CPU.

CPU time (``time.process_time``) is what is compared: other work on the machine inflates wall
time much more. Each replay runs in a forked child of its own, one at a time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plain_replay
import replay_steps
from bench_simulate import DEFAULT_LOGS, LOGS, SPN, in_child, scaled

from elb.simulate.engine import SimSettings
from elb.simulate.report import Metrics
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import Workload, read_swf

KTH_NODES = 52  # KTH-SP2's 100 processors as 8-slot nodes, times 4 (``bench_simulate._cap``)
SCALE_TARGET = 1.5
PLAIN_TARGET = 3.0
YEAR_TARGET_CPU_S = 300.0
Figures = tuple[int, float, dict[str, object]]  # jobs, CPU s, the replay's figures
Replay = Callable[[], Metrics]
PEERS = "elb,slurm,parallelcluster,starcluster"


def _set_up(wl: Workload, copies: int, days: float | None, policy_name: str, dispatch: str) -> tuple[int, Replay]:
    """The jobs of ``elb simulate``'s replay, and the replay itself, to run."""
    big = scaled(wl, copies, days)
    cap = KTH_NODES * copies
    prepared = prepare(big, SPN, cap)
    policy = build_policy(policy_name, billing="second", slots_per_node=SPN, boot_time=300, max_nodes=cap)
    settings = SimSettings(slots_per_node=SPN, max_nodes=cap, fast_forward=True, dispatch=dispatch)  # type: ignore[arg-type]
    return len(big.jobs), lambda: replay(prepared, policy, settings, billing="second", price=1.0)[0]


def _replay(wl: Workload, copies: int, days: float | None, policy_name: str, dispatch: str = "sge") -> Figures:
    """``elb simulate``'s replay (in a child: ``in_child``)."""
    jobs, run = _set_up(wl, copies, days, policy_name, dispatch)
    cpu = time.process_time()
    m = run()
    cpu = time.process_time() - cpu
    figures = {k: v for k, v in m.as_dict().items() if k != "replay_seconds"}
    return jobs, cpu, figures


def _replay_steps(wl: Workload, copies: int, days: float, policy_name: str) -> tuple[float, dict[str, float]]:
    """``_replay`` (``--dispatch fifo``) sampled by step (in a child): its CPU s, each step's share."""
    _, run = _set_up(wl, copies, days, policy_name, "fifo")
    cpu = time.process_time()
    _, samples = replay_steps.sampled(run)
    return time.process_time() - cpu, replay_steps.shares(samples)


def _plain(jobs: list[plain_replay.Job], copies: int, days: float, policy_name: str) -> Figures:
    """The plain replay of the same jobs (in a child), read by its own reader."""
    big = plain_replay.interleave(jobs, copies, days)
    figures = plain_replay.replay(big, policy_name, spn=SPN, max_nodes=KTH_NODES * copies, boot=300.0)
    return len(big), figures.pop("cpu"), dict(figures)


# ``_replay`` with another tree's code (``--against``): its elb and benchmarks first on the path.
_AGAINST = """
import json, sys, time
from pathlib import Path
tree, logs, copies, days, name = sys.argv[1:]
sys.path[:0] = [tree, tree + "/benchmarks"]
from bench_simulate import LOGS, SPN, scaled
from elb.simulate.engine import SimSettings
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import read_swf
big = scaled(read_swf(Path(logs) / LOGS[0]), int(copies), float(days))
cap = 52 * int(copies)
prepared = prepare(big, SPN, cap)
policy = build_policy(name, billing="second", slots_per_node=SPN, boot_time=300, max_nodes=cap)
settings = SimSettings(slots_per_node=SPN, max_nodes=cap, fast_forward=True, dispatch="fifo")
cpu = time.process_time()
m, _ = replay(prepared, policy, settings, billing="second", price=1.0)
print(json.dumps([len(big.jobs), time.process_time() - cpu, m.as_dict()["cost"]]))
"""


def _against(tree: Path, logs: Path, copies: int, days: float, name: str) -> tuple[int, float, float]:
    """Jobs, CPU s and cost of ``elb simulate --dispatch fifo`` with ``tree``'s code (a process
    of its own, started from nothing: its modules are not this code's)."""
    tree = tree.resolve()
    argv = [sys.executable, "-c", _AGAINST, str(tree), str(logs.resolve()), str(copies), str(days), name]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=True)
    jobs, cpu, cost = json.loads(out.stdout.splitlines()[-1])
    return int(jobs), float(cpu), float(cost)


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def _compare(args: argparse.Namespace, whole: Workload) -> None:
    """Figure 1: each policy by ``elb simulate --dispatch fifo`` and by the plain replay."""
    jobs = plain_replay.read_swf(args.logs / LOGS[0])
    print(
        "\n1. elb simulate --dispatch fifo against the plain replay (benchmarks/plain_replay.py), CPU s and "
        "cost (node-hours)"
    )
    print(
        f"{'policy':<16} {'nodes':>5} {'jobs':>7} {'elb cpu':>8} {'plain cpu':>9} {'ratio':>6}  target       "
        f"{'elb cost':>10} {'plain cost':>10} {'diff':>8}  {'elb wait':>8} {'plain wait':>10}"
    )
    for copies in (int(c) for c in args.compare_copies.split(",")):
        for name in args.compare.split(","):
            n, cpu, elb = in_child(_replay, whole, copies, args.days, name, "fifo")
            pn, pcpu, plain = in_child(_plain, jobs, copies, args.days, name)
            if pn != n:
                raise SystemExit(f"the plain replay read {pn} jobs, elb's {n}")
            ratio = cpu / pcpu
            cost, pcost = float(elb["cost"]), float(plain["cost"])  # type: ignore[arg-type]
            against = ""
            if args.against is not None:
                an, acpu, acost = _against(args.against, args.logs, copies, args.days, name)
                if (an, round(acost, 3)) != (n, round(cost, 3)):
                    against = f"  {args.against}: {an} jobs, cost {acost:.1f}: NOT the same replay"
                else:
                    against = f"  {args.against}: {acpu:.2f} cpu s ({acpu / pcpu:.1f}x), this / it {cpu / acpu:.2f}"
            print(
                f"{name:<16} {KTH_NODES * copies:>5} {n:>7} {cpu:>8.2f} {pcpu:>9.2f} {ratio:>5.1f}x  <= "
                f"{PLAIN_TARGET:g}x {_verdict(ratio <= PLAIN_TARGET):<7} {cost:>10.1f} {pcost:>10.1f} "
                f"{100 * (pcost - cost) / cost:>+7.3f}%  {float(elb['wait_mean']):>8.1f} "  # type: ignore[arg-type]
                f"{plain['wait_mean']:>10.1f}{against}",
                flush=True,
            )


def _steps(args: argparse.Namespace, whole: Workload) -> None:
    """Figure 1': each policy's replay by step, beside the plain replay's CPU."""
    jobs = plain_replay.read_swf(args.logs / LOGS[0])
    copies = int(args.compare_copies.split(",")[0])
    print(
        f"\n1'. elb simulate --dispatch fifo by step at {KTH_NODES * copies} nodes (a sampling of the stack), "
        "CPU s; floor: events + planner + carry out"
    )
    print(
        f"{'policy':<16} {'cpu':>6} {'plain':>6} "
        + " ".join(f"{step:>10}" for step in replay_steps.STEPS)
        + f" {'floor':>6} {'floor / plain':>13}"
    )
    for name in args.compare.split(","):
        cpu, share = in_child(_replay_steps, whole, copies, args.days, name)
        _, pcpu, _ = in_child(_plain, jobs, copies, args.days, name)
        floor = cpu * (share["events"] + share["planner"] + share["carry out"])
        print(
            f"{name:<16} {cpu:>6.2f} {pcpu:>6.2f} "
            + " ".join(f"{cpu * share[step]:>10.2f}" for step in replay_steps.STEPS)
            + f" {floor:>6.2f} {floor / pcpu:>12.1f}x",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--small", type=int, default=20, help="copies of the small cluster (x 52 nodes)")
    ap.add_argument("--large", type=int, default=77, help="copies of the large cluster (x 52 nodes)")
    ap.add_argument("--policy", default="elb", help="the policy of figures 2 and 3")
    ap.add_argument("--compare", default=PEERS, help="the policies of figure 1 (empty: none)")
    ap.add_argument("--compare-copies", default="20", help="figure 1's clusters, in copies (x 52 nodes)")
    ap.add_argument("--no-scale", action="store_true", help="figure 1 only")
    ap.add_argument("--year", action="store_true", help="also replay the whole year at the large cluster")
    ap.add_argument("--against", type=Path, help="figure 1 with another tree's code too (an export of a commit)")
    ap.add_argument("--steps", action="store_true", help="figure 1': each --compare policy's replay by step")
    args = ap.parse_args()
    if min(args.small, args.large) < 1 or args.days <= 0:
        ap.error("--small and --large must be at least 1, --days above 0")
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"{started}; python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; "
        f"load {os.getloadavg()}"
    )
    whole = read_swf(args.logs / LOGS[0])
    print(f"{LOGS[0]}: its first {args.days:g} days")
    if args.compare:
        _compare(args, whole)
        if args.steps:
            _steps(args, whole)
    if args.no_scale:
        print(f"load at the end {os.getloadavg()}")
        return

    print(f"\n2. and 3. elb simulate, policy {args.policy}, SGE's dispatch")
    runs: dict[int, Figures] = {}
    for copies in (args.small, args.large):
        runs[copies] = in_child(_replay, whole, copies, args.days, args.policy)
        jobs, cpu, _ = runs[copies]
        print(
            f"  {copies:>3} copies {KTH_NODES * copies:>5} nodes {jobs:>8} jobs {cpu:>8.2f} cpu s "
            f"{1000 * cpu / jobs:>7.3f} ms/job",
            flush=True,
        )
    (sj, sc, _), (lj, lc, _) = runs[args.small], runs[args.large]
    small, large = 1000 * sc / sj, 1000 * lc / lj
    year_jobs = len(whole.jobs) * args.large
    year = large / 1000 * year_jobs

    print("\nfigure                                                     measured   target")
    scale = large / small
    print(
        f"2. CPU per job, {KTH_NODES * args.large} against {KTH_NODES * args.small} nodes "
        f"({large:.3f} / {small:.3f} ms)".ljust(58)
        + f"{scale:>9.2f}x  <= {SCALE_TARGET:g}x "
        f"{_verdict(scale <= SCALE_TARGET)}"
    )
    print(
        f"3. a year at {KTH_NODES * args.large} nodes ({year_jobs:,} jobs x {large:.3f} ms)".ljust(58)
        + f"{year:>8.0f} s  < {YEAR_TARGET_CPU_S:g} s {_verdict(year < YEAR_TARGET_CPU_S)}"
    )
    if args.year:
        jobs, cpu, _ = in_child(_replay, whole, args.large, None, args.policy)
        print(
            f"3'. the whole year replayed: {jobs:,} jobs, {cpu:.0f} cpu s".ljust(58)
            + f"{cpu:>8.0f} s  < {YEAR_TARGET_CPU_S:g} s {_verdict(cpu < YEAR_TARGET_CPU_S)}"
        )
    print(f"load at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
