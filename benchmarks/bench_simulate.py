"""Seconds per replay of KTH-SP2 and NASA-iPSC under each policy, and a quarter / half / whole of
each log to show that time grows linearly with the log's length. Prints tables; asserts nothing.

    python benchmarks/bench_simulate.py [--policies elb,slurm] [--logs DIR] [--no-scaling]

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
from elb.simulate.swf import Workload, read_swf

REPO = Path(__file__).resolve().parents[1]
DEFAULT_LOGS = Path(os.environ.get("ELB_TRACES", REPO.parent / "shared" / "traces"))
LOGS = ("KTH-SP2-1996-2.2-cln.swf.gz", "NASA-iPSC-1993-3.1-cln.swf.gz")
SPN = 8


def _cap(wl: Workload) -> int:
    return 4 * math.ceil((wl.max_procs or 128) / SPN)


def time_replay(wl: Workload, policy_name: str, fast_forward: bool = True) -> tuple[float, float, int, int]:
    cap = _cap(wl)
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


if __name__ == "__main__":
    main()
