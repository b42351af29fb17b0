"""Seconds per replay of KTH-SP2 and NASA-iPSC under each policy, and a quarter / half / whole of
each log to show that time grows linearly with the log's length. Prints tables; asserts nothing.

    python benchmarks/bench_simulate.py [--policies elb,slurm] [--logs DIR] [--no-scaling]
                                        [--no-size] [--copies 20] [--days 10]
    python benchmarks/bench_simulate.py --year-at-scale [--nodes 4000 | --year-copies N]
                                        [--policies elb,slurm,static] [--profile]

A third table shows what a replay costs per job as the cluster grows: the first ``--days`` of
KTH-SP2 on its own (52 nodes) and as ``--copies`` interleaved copies (each job submitted once per
copy, copy c shifted by c x 937 s mod 1 h, the cap ``--copies`` times larger: a synthetic cluster
of over 1,000 nodes with the same mix of jobs). Target: CPU ms per job at most 1.5x KTH's alone
(a replay whose work per decision walked every node would grow with the cluster: 20x).

``--year-at-scale`` answers "a year of a 4,000-node cluster replays in minutes": the whole of
KTH-SP2 (28,467 jobs, Sep 1996 - Aug 1997) interleaved the same way into enough copies that the cap
is about ``--nodes`` (default 4,000: 77 copies of KTH's 52 nodes, 4,004 nodes, 2.19 million jobs),
or exactly ``--year-copies`` copies; by default elb's policy, Slurm's peer and the static policy.
Each policy runs in a child process of its own (one at a time), so the peak RSS printed
(``resource.getrusage``, the child's high-water mark: the log read by the parent, the copies, the
replay) is that replay's. Printed per policy: wall s, CPU s of the replay and of the whole child
(interleaving and ``prepare`` included), CPU ms per job, jobs, nodes, peak RSS, and the 1-minute
load average at its end. Target: the whole child within 15 minutes (900 s) of CPU. ``--profile``
runs the replay under cProfile (slower: its figures are not the target's) and prints the 20
functions with the most time of their own and the 25 with the most time under them.

Setting: 8-slot nodes, 300 s boot, 60 s polls, per-second billing, cluster capped at 4x the
original machine. Wall time and CPU time of this process are both printed: other work on the
machine inflates wall time, CPU time much less.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import multiprocessing
import os
import platform
import pstats
import resource
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar

from elb.simulate.engine import SimSettings
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload, read_swf

REPO = Path(__file__).resolve().parents[1]
DEFAULT_LOGS = Path(os.environ.get("ELB_TRACES", REPO.parent / "shared" / "traces"))
LOGS = ("KTH-SP2-1996-2.2-cln.swf.gz", "NASA-iPSC-1993-3.1-cln.swf.gz")
SPN = 8
YEAR_TARGET_CPU_S = 900.0
T = TypeVar("T")
YearFigures = tuple[int, float, float, float, int, str]  # jobs, wall, replay cpu, child cpu, peak RSS KiB, profile


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
    ap.add_argument("--policies", help="default: every policy; elb,slurm,static with --year-at-scale")
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    ap.add_argument("--no-scaling", action="store_true", help="skip the quarter/half/whole table")
    ap.add_argument("--no-size", action="store_true", help="skip the cluster-size table")
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--days", type=float, default=10.0)
    ap.add_argument("--year-at-scale", action="store_true", help="only the whole year of KTH at ~--nodes nodes")
    ap.add_argument("--nodes", type=int, default=4000, help="--year-at-scale: the cap to reach (copies x 52)")
    ap.add_argument("--year-copies", type=int, default=None, help="--year-at-scale: this many copies instead")
    ap.add_argument("--profile", action="store_true", help="--year-at-scale: cProfile the replay, print the top")
    args = ap.parse_args()
    if args.nodes < 1 or (args.year_copies is not None and args.year_copies < 1):
        ap.error("--nodes and --year-copies must be at least 1")
    default = "elb,slurm,static" if args.year_at_scale else "elb,starcluster,parallelcluster,slurm,static"
    policies = (args.policies or default).split(",")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; load {os.getloadavg()}")
    if args.year_at_scale:
        cpu = time.process_time()
        kth = read_swf(args.logs / LOGS[0])
        print(f"read {LOGS[0]}: {len(kth.jobs)} jobs, {time.process_time() - cpu:.1f} cpu s")
        copies = args.year_copies if args.year_copies is not None else max(1, round(args.nodes / _cap(kth)))
        _year_at_scale(kth, policies, copies, args.profile)
        return
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


def scaled(wl: Workload, copies: int, days: float | None) -> Workload:
    """The first ``days`` of ``wl`` (None: all of it), each job submitted ``copies`` times,
    interleaved."""
    t0 = wl.jobs[0].submit
    base = wl.jobs if days is None else [j for j in wl.jobs if j.submit - t0 <= days * 86400]
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


def _year_at_scale(wl: Workload, policies: list[str], copies: int, profile: bool) -> None:
    nodes = _cap(wl) * copies
    print(
        f"\na year at scale: the whole of {LOGS[0]} as {copies} interleaved copies, {nodes} nodes"
        f"{' (under cProfile: slower, not the target)' if profile else ''}"
    )
    print(
        f"{'policy':<10} {'nodes':>6} {'jobs':>9} {'wall s':>8} {'cpu s':>8} {'ms/job':>7} {'all cpu s':>9} "
        f"{'peak RSS MB':>11} {'load':>5}  target: all cpu <= {YEAR_TARGET_CPU_S:.0f} s"
    )
    for p in policies:
        r = in_child(_year_child, wl, p, copies, profile)
        jobs, wall, cpu, total, rss_kb, top = r
        verdict = "met" if total <= YEAR_TARGET_CPU_S else "NOT met"
        print(
            f"{p:<10} {nodes:>6} {jobs:>9} {wall:>8.1f} {cpu:>8.1f} {1000 * cpu / jobs:>7.3f} {total:>9.1f} "
            f"{rss_kb / 1024:>11.0f} {os.getloadavg()[0]:>5.1f}  {verdict}",
            flush=True,
        )
        if top:
            print(top, flush=True)


def _year_child(wl: Workload, policy_name: str, copies: int, profile: bool) -> YearFigures:
    """In the child: interleave, prepare, replay; the figures, and the profile's top if asked."""
    cpu0 = time.process_time()
    big = scaled(wl, copies, None)
    cap = _cap(wl) * copies
    prepared = prepare(big, SPN, cap)
    policy = build_policy(policy_name, billing="second", slots_per_node=SPN, boot_time=300, max_nodes=cap)
    settings = SimSettings(slots_per_node=SPN, max_nodes=cap, fast_forward=True)

    shown = [-1]

    def progress(done: float) -> None:  # on stderr, at each tenth of the log
        if int(done * 10) > shown[0]:
            shown[0] = int(done * 10)
            print(f"  {policy_name}: {done:4.0%} {time.process_time() - cpu0:7.1f} cpu s", file=sys.stderr, flush=True)

    prof = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    replay(prepared, policy, settings, billing="second", price=1.0, progress=progress)
    if prof is not None:
        prof.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    top = ""
    if prof is not None:
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(25)
        top = buf.getvalue()
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return len(big.jobs), wall, cpu, time.process_time() - cpu0, rss_kb, top


def in_child(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a forked child process, so its CPU time and peak RSS are its own; one child
    at a time (``bench_replay_scale`` runs its replays here too)."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def run(conn: Connection) -> None:
        conn.send(fn(*args))
        conn.close()

    child = ctx.Process(target=run, args=(send,))
    child.start()
    send.close()
    try:
        figures: T = recv.recv()
    except EOFError:
        child.join()
        raise SystemExit(f"a replay's child process failed (exit code {child.exitcode})") from None
    child.join()
    return figures


if __name__ == "__main__":
    main()
