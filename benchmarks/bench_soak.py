"""The random-fault soak on the real test cluster, against a fault-free run of the same seed.

For each scheduler: the seeded workload of tests/faults/soak.py (short, long, array and wide jobs
in bursts) runs once with no fault, then again, same seed, with faults drawn from the seeded
schedule (controller restarted and stopped, commands slowed, a busy node killed, a play failing,
the cloud throttling, out of capacity or filling a fleet in part, elb SIGKILLed and started
again, both cores busy). It prints the faulted run's figures beside their targets:

    jobs lost or killed by elb 0; nodes leaked 0; busy nodes terminated 0;
    launches wasted (failed for a cause not the node's own) at most 5% of launches;
    cost (node-seconds from the journal) at most 1.10x, p95 wait at most 1.5x the fault-free run's.

    python benchmarks/bench_soak.py --scheduler sge|slurm|both --minutes N --seed S [--write]

``--write`` keeps the runs' figures in docs/results/soak.json (by scheduler) and writes
docs/results/soak.md from it; ``--page-only`` writes the page again from that file, running
nothing. Needs root; takes the test cluster's lock (``ELB_TESTCLUSTER_LOCK_HELD=1``: the caller
holds it), stands the cluster up and takes it down. A run of N minutes takes about 2N + 10
minutes per scheduler (two runs, each drained and wound down).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from elbdev.testcluster import constants as C  # noqa: E402
from elbdev.testcluster import slurm  # noqa: E402
from elbdev.testcluster.cluster import TestCluster  # noqa: E402
from tests.cluster.names import note_used  # noqa: E402
from tests.faults.soak import Figures, Soak, clean_up, sge_soak_config, slurm_soak_config  # noqa: E402

RESULTS = REPO / "docs" / "results" / "soak.json"
PAGE = REPO / "docs" / "results" / "soak.md"
LOCK = C.STATE_DIR.parent / "elb-testcluster.lock"
# What follows this line in the page is written by hand (what the runs found) and kept when the page
# is written again.
KEPT = "<!-- written by hand below: kept by bench_soak.py --write -->"


def write_page(results: dict[str, Any]) -> None:
    kept = ""
    if PAGE.exists() and KEPT in PAGE.read_text():
        kept = PAGE.read_text().split(KEPT, 1)[1]
    PAGE.write_text(render(results) + "\n" + KEPT + (kept or "\n"))


@contextlib.contextmanager
def cluster_lock() -> Iterator[None]:
    if os.environ.get("ELB_TESTCLUSTER_LOCK_HELD") == "1":
        yield
        return
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def verdicts(base: dict[str, Any], fault: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(figure, value, target, met) of a faulted run against its fault-free run."""
    lost = fault["tasks_lost"] + fault["tasks_killed_by_elb"]
    launches = max(1, fault["launches"])
    wasted = fault["launches_wasted"] / launches
    cost = fault["node_seconds"] / base["node_seconds"] if base["node_seconds"] else float("inf")
    p95 = fault["wait_p95"] / base["wait_p95"] if base["wait_p95"] else float("inf")
    return [
        ("jobs lost or killed by elb", f"{lost}", "0", lost == 0),
        ("nodes leaked", f"{fault['nodes_leaked']}", "0", fault["nodes_leaked"] == 0),
        ("busy nodes terminated", f"{fault['busy_nodes_terminated']}", "0", fault["busy_nodes_terminated"] == 0),
        (
            "launches wasted",
            f"{fault['launches_wasted']} of {fault['launches']} ({wasted:.0%})",
            "at most 5%",
            wasted <= 0.05,
        ),
        (
            "cost (node-seconds)",
            f"{fault['node_seconds']:.0f} s vs {base['node_seconds']:.0f} s: {cost:.2f}x",
            "at most 1.10x",
            cost <= 1.10,
        ),
        (
            "p95 wait",
            f"{fault['wait_p95']:.0f} s vs {base['wait_p95']:.0f} s: {p95:.2f}x",
            "at most 1.5x",
            p95 <= 1.5,
        ),
    ]


def table(base: dict[str, Any], fault: dict[str, Any]) -> str:
    rows = ["| figure | faulted run | target | met |", "| --- | --- | --- | --- |"]
    rows += [f"| {f} | {v} | {t} | {'yes' if ok else '**no**'} |" for f, v, t, ok in verdicts(base, fault)]
    return "\n".join(rows)


def run_scheduler(tc: TestCluster, scheduler: str, minutes: float, seed: int, baseline: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs = ([False] if baseline else []) + [True]
    for faults in runs:
        work = Path(tempfile.mkdtemp(prefix=f"elb-soak-{scheduler}-"))
        cfg = sge_soak_config(work) if scheduler == "sge" else slurm_soak_config(work)
        soak = Soak(tc, scheduler, cfg, work / "soak", minutes, seed, faults=faults)
        try:
            fig: Figures = soak.run()
        finally:
            note_used()
            clean_up(tc, scheduler)
        print(fig.line(), flush=True)
        out["faulted" if faults else "fault_free"] = json.loads(fig.line().removeprefix("FIGURES "))
        out["elb_log" + ("" if faults else "_fault_free")] = str(soak.work / "elb.log")
    return out


def reuse(old: dict[str, Any]) -> dict[str, Any]:
    """What a faulted run takes from the kept entry ``old`` it is set beside: its fault-free
    figures and log, and where they came from."""
    origin = old.get("fault_free_from") or f"the run of {old['date']}: `{old['command']}`"
    return {
        "fault_free": old["fault_free"],
        "elb_log_fault_free": old.get("elb_log_fault_free", ""),
        "fault_free_from": origin,
    }


def short_of_the_hour(minutes: float) -> str:
    """What the page says of a run shorter than the hour per scheduler the benchmark is meant for."""
    return ", not the hour the benchmark is meant for" if minutes < 60 else ""


def render(results: dict[str, Any]) -> str:
    lines = [
        "# The random-fault soak",
        "",
        "Written by `python benchmarks/bench_soak.py ... --write` (each section below names its command and",
        "seed; the figures are kept in `soak.json`); `python benchmarks/bench_soak.py --page-only` writes",
        "the page again from that file.",
        "",
        "A seeded synthetic workload on the real test cluster (podman nodes, real Ansible, elb as `elb run`",
        "in a process of its own), run once with no fault and again, same seed, with faults drawn from a",
        "seeded schedule: the controller restarted (`sge_qmaster`, `slurmctld`), the controller stopped",
        "(SIGSTOP, tens of seconds, SIGCONT), its commands slowed (wrappers in `sge.bin_dir` / `slurm.bin_dir`",
        "that sleep 3 s before they exec the real command), a node running a job killed (`podman kill`),",
        "the next node's play made to fail (its scheduler daemon replaced), the local cloud throttling,",
        "out of capacity or filling a fleet in part (`elbdev.testcluster.faults.FaultyLocalCloud`), elb",
        "SIGKILLed and started again, both cores kept busy (`stress-ng --cpu 2`). Harness:",
        "`tests/faults/soak.py`; lean CI version: `tests/faults/test_soak.py` (asserts the zeros only).",
        "Both schedulers' soaks run elb with the same launch back-off, the daemon's default scaled to",
        "the soak's timescale as its `policy.boot_time` is (40 s against 300 s): `backoff.initial` 8 s",
        "doubling up to 480 s (`soak_backoff`; the runs measured before 2026-12-05 23:00 UTC had 5 s",
        "up to 60 s on Grid Engine and the daemon's 60 s up to an hour on Slurm).",
        "",
        "Counted: a task (a job, or an array job's task) **lost** had not ended 10 minutes after the",
        "workload's end (the drain's limit: still waiting counts too) and was not on a node the soak",
        "killed; **killed by elb** started again after a start on a node the soak did not kill;",
        "**nodes leaked**: containers or live journal records left once the jobs are done and elb has",
        "had 5 minutes to scale to zero; **busy nodes terminated**: elb terminated a node while a task",
        "ran there (the tasks' own start and end times); **launches wasted**: nodes that had an",
        "instance and never became ready, for a cause not their own (not the play the soak broke, not",
        "the node it killed); **cost**: node-seconds from the journal (first launch step to terminated",
        "or failed, or to the soak's kill of its machine: a stopped instance bills no compute); **wait**:",
        "a task's first start minus its job's submission; **tasks clear**: the",
        "tasks whose wait met none of the faults that stop every launch or the scheduler while they",
        "last (throttling, no capacity, the controller stopped or restarting), **wait p95 clear** their",
        "p95: what elb's own choices, and the faults it can work through, made of the waits. The waits",
        "at or past the p95 are listed with the faults under way while they waited.",
        "",
        "Jobs on a node the soak kills are killed by the fault: on SGE (no `reschedule_unknown`) the",
        "soak deletes every job `qstat` lists there (`qdel -f`) half a minute later, and again while",
        "it lists any, as an operator would (a job dispatched there as the node died, which never",
        "started, too); they are counted apart, not as lost.",
        "",
    ]
    for scheduler in ("sge", "slurm"):
        r = results.get(scheduler)
        if r is None:
            continue
        base, fault = r["fault_free"], r["faulted"]
        lines += [
            f"## {'Grid Engine' if scheduler == 'sge' else 'Slurm'}",
            "",
            f"Measured {r['date']}: `{r['command']}` ({r['minutes']:g} minutes of workload per run"
            f"{short_of_the_hour(r['minutes'])}; seed {r['seed']}; load average at the start {r['load']}).",
            *([f"The fault-free run is the one kept from {r['fault_free_from']}."] if r.get("fault_free_from") else []),
            "",
            table(base, fault),
            "",
            "| | fault-free | faulted |",
            "| --- | ---: | ---: |",
        ]
        for key in (
            "submissions",
            "tasks",
            "tasks_done",
            "tasks_killed_by_fault",
            "launches",
            "node_seconds",
            "wait_p50",
            "wait_p95",
            "tasks_clear",
            "wait_p95_clear",
            "seconds",
        ):
            if key in fault:
                lines.append(f"| {key.replace('_', ' ')} | {base.get(key, '')} | {fault[key]} |")
        lines += ["", "Faults injected (seconds after the start, what they did):", ""]
        lines += [f"- {json.dumps(f)}" for f in sorted(fault["faults_done"], key=lambda f: float(f["at"]))]
        for key in ("wasted", "lost", "killed_by_elb", "busy_terminated", "leaked"):
            if fault[key]:
                lines += ["", f"{key.replace('_', ' ')}:", ""] + [f"- {x}" for x in fault[key]]
        for run, figs in (("fault-free", base), ("faulted", fault)):
            if figs.get("slowest"):
                lines += [
                    "",
                    f"The waits at or past the p95, {run} run, and the faults met while waiting:",
                    "",
                ]
                lines += [f"- {x}" for x in figs["slowest"]]
        if r.get("notes"):
            lines += ["", r["notes"]]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", choices=("sge", "slurm", "both"), default="both")
    ap.add_argument("--minutes", type=float, default=60.0, help="the workload's length per run (default 60)")
    ap.add_argument("--seed", type=int, default=None, help="the workload's and the faults' seed (default: the time)")
    ap.add_argument("--no-baseline", action="store_true", help="the faulted run only (no ratios)")
    ap.add_argument(
        "--reuse-fault-free",
        action="store_true",
        help=f"the faulted run only, set beside the fault-free run {RESULTS.name} keeps for the scheduler "
        "(same seed and minutes): for a change that acts only on faults",
    )
    ap.add_argument("--write", action="store_true", help=f"keep the figures in {RESULTS.name}, write {PAGE.name}")
    ap.add_argument("--page-only", action="store_true", help=f"write {PAGE.name} from {RESULTS.name}, run nothing")
    args = ap.parse_args()
    if args.page_only:
        write_page(json.loads(RESULTS.read_text()))
        return 0
    if os.geteuid() != 0:
        print("bench_soak: the test cluster needs root", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int(time.time())
    schedulers = ("sge", "slurm") if args.scheduler == "both" else (args.scheduler,)
    kept: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results: dict[str, Any] = kept if args.write else {}
    reused: dict[str, dict[str, Any]] = {}
    if args.reuse_fault_free:
        for scheduler in schedulers:
            old = kept.get(scheduler, {})
            if "fault_free" not in old or (old.get("seed"), old.get("minutes")) != (seed, args.minutes):
                print(
                    f"bench_soak: {RESULTS.name} keeps no fault-free run of {scheduler} with seed {seed} and "
                    f"{args.minutes:g} minutes to reuse",
                    file=sys.stderr,
                )
                return 2
            reused[scheduler] = old
    command = "python benchmarks/bench_soak.py " + shlex.join(sys.argv[1:])
    ok = True
    from tests.conftest import _enter_master_uts  # noqa: PLC0415 (the fault tests' own entry into the master)

    with cluster_lock():
        tc = TestCluster()
        tc.up(nodes=0)
        try:
            _enter_master_uts()
            os.environ.update(C.SGE_ENV)
            for scheduler in schedulers:
                load = open("/proc/loadavg").read().split()[0]  # noqa: SIM115
                date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
                if scheduler == "slurm":
                    slurm.up()
                baseline = not (args.no_baseline or args.reuse_fault_free)
                try:
                    r = run_scheduler(tc, scheduler, args.minutes, seed, baseline)
                finally:
                    if scheduler == "slurm":
                        slurm.down()
                r.update(command=command, seed=seed, minutes=args.minutes, date=date, load=load)
                if scheduler in reused:
                    r.update(reuse(reused[scheduler]))
                if "fault_free" in r:
                    print(f"\n{scheduler}: seed {seed}, {args.minutes:g} min\n{table(r['fault_free'], r['faulted'])}")
                    ok &= all(met for *_, met in verdicts(r["fault_free"], r["faulted"]))
                results[scheduler] = r
                if args.write:
                    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
                    write_page(results)
        finally:
            tc.down()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
