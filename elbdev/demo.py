"""``python -m elbdev demo``: watch elb grow and shrink a real SGE cluster on this machine.

Stands up the test cluster with only the master, starts ``elb run`` (local provider,
short timescale) as the master, submits a burst of real jobs as the cluster user, and
prints each pass as it happens: nodes added, jobs running, the queue draining, idle nodes
removed. Ends with a summary and a PNG plot, and leaves the machine clean.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elb.core import extras
from elb.core.exitcodes import Exit
from elb.service.journal import Journal
from elb.service.stats import StatsRow, read_rows
from elbdev.demo_steps import (
    SETUP_LOG,
    Changes,
    at_boot,
    launch_line,
    output_to,
    phase,
    say,
    set_up,
    setup_note,
    start_elb,
    used_node_seconds,
)

if TYPE_CHECKING:
    from elbdev.testcluster.cluster import TestCluster

STATE = Path("/var/lib/elb-demo")
SLURM_STATE = Path("/var/lib/elb-demo-slurm")
LOCK = Path("/var/lib/elb-testcluster.lock")  # one user of the test cluster at a time (see tests/cluster)
JOB_SCRIPT = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
start=$(date +%s)
sleep "$ELB_DEMO_SECONDS"
mkdir -p "$HOME/elb-demo"
echo "$ELB_DEMO_SUBMITTED $start $(date +%s) $(hostname)" > "$HOME/elb-demo/$JOB_ID.done"
"""


def after_down(kept: list[Path]) -> str:
    """What the demo says once the test cluster is down: its nodes, daemons and network are gone;
    what stays for the next run (the directories of ``kept`` that exist, with their sizes, and
    the node image) is named, with how to remove it."""

    def size(path: Path) -> int:
        total = 0
        for f in path.rglob("*"):
            try:
                if f.is_file() and not f.is_symlink():
                    total += f.stat().st_size
            except OSError:
                continue
        return total

    there = [f"{d} ({size(d) / 1e6:.0f} MB)" for d in kept if d.is_dir()]
    left = ", ".join([*there, "the node image"])
    return (
        "test cluster taken down (its nodes, daemons and network are gone); kept for the next run: "
        f"{left} (remove them with rm -rf and podman rmi)"
    )


def demo_config(state: Path, ssh_key: Path, cluster_name: str, max_nodes: int) -> dict[str, Any]:
    return {
        "poll_interval": 5,
        "state_dir": str(state),
        "cluster": {"name": cluster_name, "master": "master"},
        # elb's default policy on a short timescale: launch for demand no slot will meet within a
        # boot time (provisioning takes about a minute here); remove a node idle half a boot time.
        "policy": {"max_nodes": max_nodes, "billing": "second", "boot_time": 60},
        "cloud": {"provider": "local"},
        "provision": {
            "private_data_dir": str(state / "ansible"),
            "ssh_private_key": str(ssh_key),
            "timeout": 300,
        },
    }


DEFAULT_PLOT = Path("elb-demo.png")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="watch elb work on a local SGE cluster (podman nodes); needs root",
        description="Stands up the test cluster (a real qmaster on this machine, exec hosts in podman), "
        "submits a burst of jobs and runs the real daemon against it: nodes are launched, provisioned with "
        "the shipped playbooks, used and removed. Prints a pass line and a summary; behind Grid Engine, draws a plot.",
    )
    p.add_argument("--jobs", type=int, default=12, help="jobs in the burst (default 12)")
    p.add_argument("--job-seconds", type=int, default=40, help="run time of each job (default 40)")
    p.add_argument("--max-nodes", type=int, default=4, help="max_nodes for the demo (default 4)")
    p.add_argument("--timeout", type=float, default=900, help="give up after this many seconds (default 900)")
    p.add_argument(
        "--plot",
        type=Path,
        default=None,
        help=f"PNG of the Grid Engine demo's passes (default {DEFAULT_PLOT}); the Slurm demo draws none",
    )
    p.add_argument("--keep", action="store_true", help="leave the test cluster up at the end")
    p.add_argument(
        "--scheduler",
        choices=("sge", "slurm"),
        default="sge",
        help="slurm: the same story behind Slurm's power saving (slurmctld on the master, slurmd nodes)",
    )
    p.add_argument(
        "--provision",
        choices=("push", "boot"),
        default="push",
        help="boot: the nodes configure themselves at boot (provision.mode: boot), the master runs only its "
        "own part for each batch; push (default): the master configures each node over SSH",
    )
    p.set_defaults(func=cmd_demo)


# What the pass lines' node counts mean: a node is "joining" from its launch until elb's play and
# checks are done, and Grid Engine or Slurm may run jobs on it as soon as its daemon registers.
NODES_LEGEND = (
    "nodes: ready (elb is done adding them), joining (launched, being set up: the scheduler may already run "
    "jobs on one whose daemon registered; elb's reasons count them as booting), draining (being removed)"
)


def _row_line(r: StatsRow) -> str:
    """A pass's line: its status, then what it did when it did something to show."""
    status, did = _row_status(r), _row_action(r)
    return f"{status}  | {did}" if did else status


def _row_status(r: StatsRow) -> str:
    """The jobs and nodes as the pass found them."""
    nodes = r.nodes_ready + r.nodes_booting + r.nodes_draining
    line = (
        f"waiting {r.pending_jobs:>3}  running {r.running_jobs:>3}  nodes {nodes} "
        f"({r.nodes_ready} ready, {r.nodes_booting} joining, {r.nodes_draining} draining)"
    )
    if r.held_jobs or r.error_jobs:
        line += f"  held {r.held_jobs}  in error {r.error_jobs}"
    return line


def _row_action(r: StatsRow) -> str:
    """What the pass did or tried ("" when it added, removed and failed nothing)."""
    if r.added or r.removed or not r.ok or "add" in r.action or "remove" in r.action:
        return r.action
    return ""


def pass_lines(rows: Iterable[StatsRow], changes: Changes) -> list[str]:
    """The lines to print for ``rows``: a pass that did something, or found the jobs or nodes
    changed since the last line printed; not a pass that repeats that line's counts."""
    return [_row_line(r) for r in rows if changes.new(_row_status(r), _row_action(r))]


def cmd_demo(args: argparse.Namespace) -> int:
    if args.scheduler == "slurm" and args.plot is not None:
        print(
            "python -m elbdev demo: --plot: the Slurm demo draws no plot (the Grid Engine demo does)", file=sys.stderr
        )
        return Exit.USAGE
    from elbdev.testcluster import constants as C  # noqa: PLC0415 (only the demo needs them)
    from elbdev.testcluster.cluster import TestCluster  # noqa: PLC0415

    if os.geteuid() != 0:
        print("python -m elbdev demo: needs root (rootful podman, a bridge, SGE daemons)", file=sys.stderr)
        return 1
    cluster = TestCluster()
    procs: list[subprocess.Popen[bytes]] = []
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    lock = LOCK.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say("the test cluster is in use (tests or another demo); waiting for it")
        fcntl.flock(lock, fcntl.LOCK_EX)
    # SIGTERM and SIGHUP (a kill, a closed terminal) end the demo as Ctrl-C does: its daemon
    # stopped and the test cluster taken down, never a daemon left running on its own.
    handlers = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if args.scheduler == "slurm":
            from elbdev import demo_slurm  # noqa: PLC0415

            return demo_slurm.run(cluster, args, procs, SLURM_STATE)
        return _run(cluster, args, procs)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        for proc in procs:
            _stop(proc)
        if args.keep:
            say("cluster left up; remove it with: python -m elbdev testcluster down")
        else:
            phase("taking the test cluster down")
            try:
                with output_to(SETUP_LOG):
                    cluster.down()
                say(after_down([C.STATE_DIR, SLURM_STATE if args.scheduler == "slurm" else STATE]))
            except Exception as err:  # the one line a user needs when cleanup fails
                print(f"cleanup failed ({err}); clean up with: python -m elbdev testcluster down", file=sys.stderr)
        lock.close()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()


def _run(cluster: TestCluster, args: argparse.Namespace, procs: list[subprocess.Popen[bytes]]) -> int:
    from elbdev.testcluster import constants as C  # noqa: PLC0415

    phase("setting up the test cluster")
    say(f"master only; {setup_note(os.environ)}")
    times = set_up(cluster.up)
    say("cluster up: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    phase("starting elb as the master")
    config = demo_config(STATE, C.SSH_KEY, cluster.cluster_name, args.max_nodes)
    if args.provision == "boot":
        config = at_boot(config, cluster.boot_mounts())
    proc, home = start_elb(cluster, STATE, config, "elb-demo", procs)
    say(
        f"elb running as the master (log: {STATE / 'elb.log'}); policy: elb's default (launch for jobs "
        f"no slot takes within a 60 s boot, remove nodes idle 30 s), poll 5 s, max {args.max_nodes} nodes"
    )
    phase(f"submitting {args.jobs} jobs")
    submitted: dict[str, float] = {}
    for _ in range(args.jobs):
        now = time.time()
        env = f"ELB_DEMO_SUBMITTED={int(now)},ELB_DEMO_SECONDS={int(args.job_seconds)}"
        jid = cluster.submit(JOB_SCRIPT, "-N", "demo", "-o", str(home), "-v", env)
        submitted[jid] = now
    say(f"submitted {len(submitted)} jobs of {args.job_seconds} s as {C.CLUSTER_USER}")
    phase("watching elb work (a line for each pass that changes what it shows)")
    say(NODES_LEGEND)
    code = _watch(cluster, STATE / "stats.csv", home, list(submitted), timeout=args.timeout, proc=proc)
    _stop(proc)
    phase("summary")
    _summary(cluster, home, STATE / "journal.sqlite", submitted)
    if (missing := extras.plot_missing()) is not None:
        say(f"no plot: {missing}")
        return code
    from elb.cli.plot import plot_stats  # noqa: PLC0415 (matplotlib only when needed)

    rows = list(read_rows(STATE / "stats.csv"))
    path: Path = args.plot or DEFAULT_PLOT
    plot_stats(rows, path, title="elb demo: a burst of jobs on a local SGE cluster")
    say(f"plot written to {path.resolve()}")
    return code


def job_states(qstat_text: str) -> dict[str, str]:
    """Job id -> state code from plain ``qstat`` output (one line per job or array task)."""
    out: dict[str, str] = {}
    for line in qstat_text.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0].isdigit():
            out.setdefault(fields[0], fields[4])
    return out


def error_reasons(qstat_j_text: str) -> list[str]:
    """The ``error reason`` lines of ``qstat -j JOB`` (why SGE put the job in error), without the label."""
    out = []
    for line in qstat_j_text.splitlines():
        if line.startswith("error reason"):
            _, _, reason = line.partition(":")
            out.append(reason.strip())
    return out


def finished_jobs(cluster: TestCluster, ids: list[str]) -> dict[str, tuple[int, str]]:
    """Job id -> (exit status, host) of the jobs SGE's accounting has as finished."""
    out = {}
    for jid in ids:
        proc = cluster.master_run(["qacct", "-j", jid], check=False, timeout=30)
        status = re.search(r"^exit_status\s+(\d+)", proc.stdout, re.MULTILINE)
        host = re.search(r"^hostname\s+(\S+)", proc.stdout, re.MULTILINE)
        if proc.returncode == 0 and status:
            out[jid] = (int(status.group(1)), host.group(1) if host else "?")
    return out


def _report_errors(cluster: TestCluster, ids: list[str], told: set[str]) -> None:
    """Say once, for each job SGE put in error, why (``qstat -j``): a demo that hides it waits for nothing."""
    proc = cluster.master_run(["qstat", "-u", "*"], check=False, timeout=30)
    for jid, state in job_states(proc.stdout).items():
        if jid in ids and "E" in state and jid not in told:
            told.add(jid)
            why = error_reasons(cluster.master_run(["qstat", "-j", jid], check=False, timeout=30).stdout)
            say(f"job {jid} is in error ({state}): {'; '.join(why) or 'qstat -j gives no reason'}")


def _watch(
    cluster: TestCluster, stats: Path, home: Path, ids: list[str], *, timeout: float, proc: subprocess.Popen[bytes]
) -> int:
    """Print each pass until every job is done and every node is gone (or time runs out); say
    at once why a job went into error."""
    njobs = len(ids)
    seen = 0
    changes = Changes()  # a pass that changes nothing prints nothing
    told: set[str] = set()  # jobs in error, reported
    finished: set[str] = set()
    checked = 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            say(f"elb exited early with code {proc.returncode}; see its log")
            return 1
        rows = list(read_rows(stats)) if stats.exists() else []
        for line in pass_lines(rows[seen:], changes):
            say(line)
        seen = len(rows)
        if time.monotonic() - checked >= 10:
            checked = time.monotonic()
            _report_errors(cluster, ids, told)
            finished |= set(finished_jobs(cluster, [j for j in ids if j not in finished]))
        done = max(len(finished), len(list(home.glob("*.done"))) if home.exists() else 0)
        if rows and done + len(told - finished) >= njobs and rows[-1].nodes == 0:
            if told - finished:
                say(f"{done} jobs done, {len(told - finished)} in error, and every node removed")
                return 1
            say(f"all {njobs} jobs done and every node removed")
            return 0
        time.sleep(2)
    say(f"gave up after {timeout:.0f} s: {len(finished)} of {njobs} jobs finished, {len(told)} in error")
    return 1


def _summary(cluster: TestCluster, home: Path, journal_path: Path, submitted: dict[str, float]) -> None:
    waits = []
    job_ends: list[int] = []
    for f in home.glob("*.done"):
        parts = f.read_text().split()
        if len(parts) == 4:
            waits.append(int(parts[1]) - int(parts[0]))
            job_ends.append(int(parts[2]))
    ids = list(submitted)
    finished = finished_jobs(cluster, ids)  # SGE's accounting: what ran, whatever the job wrote
    hosts: dict[str, int] = {}
    for _status, host in finished.values():
        hosts[host] = hosts.get(host, 0) + 1
    failed = {jid: status for jid, (status, _h) in finished.items() if status != 0}
    states = job_states(cluster.master_run(["qstat", "-u", "*"], check=False, timeout=30).stdout)
    errors = {jid: st for jid, st in states.items() if jid in submitted and "E" in st}
    held = {jid: st for jid, st in states.items() if jid in submitted and "h" in st}
    j = Journal(journal_path)
    node_seconds = used_node_seconds(j, time.time())
    launches = launch_line(j, max(job_ends, default=None))
    j.close()
    print()
    print("summary")
    print(f"  jobs run:          {len(finished)} of {len(submitted)} (SGE's accounting)")
    if failed:
        print(f"  exit status != 0:  {', '.join(f'{j} ({s})' for j, s in sorted(failed.items()))}")
    if errors or held:
        print(f"  in error / held:   {', '.join(sorted(errors)) or '-'} / {', '.join(sorted(held)) or '-'}")
    if len(waits) < len(finished):
        print(f"  result files:      {len(waits)} (a job that ran wrote none: look at its node's /home mount)")
    print(f"  ran on:            {', '.join(f'{h} ({c})' for h, c in sorted(hosts.items())) or '-'}")
    print(f"  node-minutes used: {node_seconds / 60:.1f}")
    if waits:
        print(f"  wait:              mean {statistics.fmean(waits):.0f} s, max {max(waits)} s")
    print(launches)
