"""Seconds per replay of KTH-SP2 and NASA-iPSC under each policy, and a quarter / half / whole of
each log to show that time grows linearly with the log's length. Prints tables; asserts nothing.

    python benchmarks/bench_simulate.py [--policies elb,slurm] [--logs DIR] [--no-scaling]
                                        [--no-size] [--copies 20] [--days 10]

A third table shows what a replay costs per job as the cluster grows: the first ``--days`` of
KTH-SP2 on its own (52 nodes) and as ``--copies`` interleaved copies (each job submitted once per
copy, copy c shifted by c x 937 s mod 1 h, the cap ``--copies`` times larger: a synthetic cluster
of over 1,000 nodes with the same mix of jobs). Target: CPU ms per job at most 1.5x KTH's alone
(a replay whose work per decision walked every node would grow with the cluster: 20x).

Setting: 8-slot nodes, 300 s boot, 60 s polls, per-second billing, cluster capped at 4x the
original machine. Wall time and CPU time of this process are both printed: other work on the
machine inflates wall time, CPU time much less.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from pathlib import Path

from elb.simulate.engine import SimSettings
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload, read_swf

REPO = Path(__file__).resolve().parents[1]
DEFAULT_LOGS = Path(os.environ.get("ELB_TRACES", REPO.parent / "shared" / "traces"))
LOGS = ("KTH-SP2-1996-2.2-cln.swf.gz", "NASA-iPSC-1993-3.1-cln.swf.gz")
SPN = 8


def _cap(wl: Workload) -> int:
    return 4 * math.ceil((wl.max_procs or 128) / SPN)


def time_replay(
    wl: Workload, policy_name: str, fast_forward: bool = True, cap: int | None = None
) -> tuple[float, float, int, int]:
    cap = cap or _cap(wl)
    prepared = prepare(wl, SPN, cap)
    policy = build_policy(policy_name, billing="second", slots_per_node=SPN, boot_time=300, max_nodes=cap)
    settings = SimSettings(slots_per_node=SPN, max_nodes=cap, fast_forward=fast_forward)
    wall, cpu = time.perf_counter(), time.process_time()
    m, out = replay(prepared, policy, settings, billing="second", price=1.0)
    return time.perf_counter() - wall, time.process_time() - cpu, m.decisions, out.polls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", default="elb,starcluster,parallelcluster,slurm,static")
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    ap.add_argument("--no-scaling", action="store_true", help="skip the quarter/half/whole table")
    ap.add_argument("--no-size", action="store_true", help="skip the cluster-size table")
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--days", type=float, default=10.0)
    args = ap.parse_args()
    policies = args.policies.split(",")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; load {os.getloadavg()}")
    logs = {name: read_swf(args.logs / name) for name in LOGS}
    print("\nseconds per replay (8-slot nodes, 300 s boot, per-second billing, 4x machine)")
    print(f"{'log':<32} {'policy':<16} {'wall s':>7} {'cpu s':>7} {'decide calls':>12} {'polls':>8}")
    for name, wl in logs.items():
        for p in policies:
            wall, cpu, decisions, polls = time_replay(wl, p)
            print(f"{name:<32} {p:<16} {wall:>7.2f} {cpu:>7.2f} {decisions:>12} {polls:>8}", flush=True)
    if not args.no_size:
        _cluster_size(logs[LOGS[0]], policies, args.copies, args.days)
    if args.no_scaling:
        return
    print("\nlinearity: the first quarter, half and the whole of each log (cpu s, and per 1000 jobs)")
    print(f"{'log':<32} {'policy':<16} {'part':>6} {'jobs':>6} {'cpu s':>7} {'ms/job':>7}")
    for name, wl in logs.items():
        span = wl.jobs[-1].submit - wl.jobs[0].submit
        for p in policies:
            for frac in (0.25, 0.5, 1.0):
                days = span * frac / 86400 + 1e-6
                part = Workload(wl.source, [j for j in wl.jobs if j.submit - wl.jobs[0].submit <= days * 86400])
                part.header = wl.header
                _, cpu, _, _ = time_replay(part, p)
                n = len(part.jobs)
                print(f"{name:<32} {p:<16} {frac:>6.2f} {n:>6} {cpu:>7.2f} {1000 * cpu / n:>7.3f}", flush=True)


def scaled(wl: Workload, copies: int, days: float) -> Workload:
    """The first ``days`` of ``wl``, each job submitted ``copies`` times, interleaved."""
    t0 = wl.jobs[0].submit
    base = [j for j in wl.jobs if j.submit - t0 <= days * 86400]
    jobs = [
        SimJob(j.job_id * copies + c, j.submit + (c * 937) % 3600, j.run, j.slots, j.requested)
        for j in base
        for c in range(copies)
    ]
    out = Workload(f"{wl.source} x{copies}", jobs)
    out.header = wl.header
    return out


def _cluster_size(wl: Workload, policies: list[str], copies: int, days: float) -> None:
    print(f"\ncluster size: the first {days:g} days of {LOGS[0]} alone and as {copies} interleaved copies")
    print(
        f"{'policy':<16} {'nodes':>6} {'jobs':>6} {'cpu s':>7} {'ms/job':>7} {'nodes':>6} {'jobs':>6} {'cpu s':>7} "
        f"{'ms/job':>7} {'ratio':>6}  target <= 1.5"
    )
    small, big = scaled(wl, 1, days), scaled(wl, copies, days)
    for p in policies:
        _, cpu1, _, _ = time_replay(small, p)
        _, cpu2, _, _ = time_replay(big, p, cap=_cap(wl) * copies)
        per1, per2 = 1000 * cpu1 / len(small.jobs), 1000 * cpu2 / len(big.jobs)
        verdict = "met" if per2 <= 1.5 * per1 else "NOT met"
        print(
            f"{p:<16} {_cap(wl):>6} {len(small.jobs):>6} {cpu1:>7.2f} {per1:>7.3f} {_cap(wl) * copies:>6} "
            f"{len(big.jobs):>6} {cpu2:>7.2f} {per2:>7.3f} {per2 / per1:>6.2f}  {verdict}",
            flush=True,
        )


if __name__ == "__main__":
    main()
