"""``python -m elbdev demo --scheduler slurm``: the demo's story behind Slurm's power saving.

The test cluster's master also runs Debian's slurmctld (configless, a ``cloud`` partition whose
ResumeProgram and SuspendProgram are elb's); ``elb run`` with ``scheduler: slurm`` launches and
provisions the nodes Slurm asks for (slurmd in podman nodes) and removes them by its cost rule
once idle. A burst of ``sbatch`` jobs as the cluster user; each few seconds a line says what
Slurm shows (jobs waiting and running, nodes by state) and what elb did.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from elb.service.journal import Journal
from elbdev.demo_steps import (
    Changes,
    at_boot,
    launch_line,
    phase,
    say,
    set_up,
    setup_note,
    start_elb,
    used_node_seconds,
)

if TYPE_CHECKING:
    from elbdev.testcluster.cluster import TestCluster

JOB = """#!/bin/sh
start=$(date +%s)
sleep "$ELB_DEMO_SECONDS"
echo "$ELB_DEMO_SUBMITTED $start $(date +%s) $(hostname)" > "$HOME/elb-demo-slurm/$SLURM_JOB_ID.done"
"""


def demo_config(state: Path, ssh_key: Path, cluster_name: str, max_nodes: int) -> dict[str, object]:
    from elbdev.testcluster import slurm  # noqa: PLC0415

    return {
        "scheduler": "slurm",
        "poll_interval": 5,
        "state_dir": str(state),
        "cluster": {"name": cluster_name, "master": "master"},
        # Slurm decides which nodes a job needs; elb removes a node idle half a boot time (30 s).
        "policy": {"max_nodes": max_nodes, "billing": "second", "boot_time": 60, "slots_per_node": slurm.NODE_CPUS},
        "slurm": {"conf": str(slurm.CONF), "requests": str(slurm.REQUEST_DIR)},
        "cloud": {"provider": "local"},
        "provision": {
            "private_data_dir": str(state / "ansible"),
            "ssh_private_key": str(ssh_key),
            "timeout": 300,
            "extra_vars": dict(slurm.NODE_VARS),
        },
    }


def _slurm(argv: list[str]) -> str | None:
    """What a Slurm command printed; None when it failed or hung (a busy controller)."""
    from elbdev.testcluster import slurm  # noqa: PLC0415

    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", **slurm.env()}
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return None
    return proc.stdout if proc.returncode == 0 else None


def _line() -> str | None:
    """The cluster in one line; None when Slurm did not answer (nothing to print then)."""
    queue = _slurm(["squeue", "--noheader", "--format=%i %T"])
    info = _slurm(["sinfo", "--noheader", "--Node", "--Format=StateComplete:0"])
    if queue is None or info is None:
        return None
    jobs = [ln.split() for ln in queue.splitlines() if ln.strip()]
    waiting = sum(1 for j in jobs if j[1:] == ["PENDING"])
    running = sum(1 for j in jobs if j[1:] in (["RUNNING"], ["CONFIGURING"], ["COMPLETING"]))
    states: dict[str, int] = {}
    for ln in info.splitlines():
        s = ln.strip()
        if s and "powered_down" not in s:
            key = "powering up" if "powering_up" in s else "powering down" if "powering_down" in s else s.split("+")[0]
            states[key] = states.get(key, 0) + 1
    nodes = ", ".join(f"{n} {k}" for k, n in sorted(states.items())) or "none"
    return f"waiting {waiting:>3}  running {running:>3}  nodes up: {nodes}"


def run(cluster: TestCluster, args: argparse.Namespace, procs: list[subprocess.Popen[bytes]], state: Path) -> int:
    from elbdev.testcluster import constants as C  # noqa: PLC0415
    from elbdev.testcluster import slurm  # noqa: PLC0415

    phase("setting up the test cluster and Slurm's controller")
    say(setup_note(os.environ))

    def up() -> dict[str, float]:
        times = cluster.up(nodes=0)
        # As docs/slurm.md asks of a site: no more cloud nodes than elb may launch, so Slurm never
        # asks for one elb would give back (a give-back requeues its job and sends slurmctld after
        # a node that never was).
        slurm.up(cloud_nodes=args.max_nodes)
        return times

    times = set_up(up)
    say("cluster up: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()) + "; slurmctld up (configless)")
    phase("starting elb behind Slurm's power saving")
    config = demo_config(state, C.SSH_KEY, cluster.cluster_name, args.max_nodes)
    if args.provision == "boot":
        config = at_boot(config, cluster.boot_mounts())
    proc, home = start_elb(cluster, state, config, "elb-demo-slurm", procs)
    how = "nodes configure themselves at boot" if args.provision == "boot" else "the master configures the nodes"
    say(
        f"elb running behind Slurm's power saving (log: {state / 'elb.log'}); poll 5 s, max {args.max_nodes} "
        f"nodes; {how}"
    )
    phase(f"submitting {args.jobs} jobs")
    submitted: dict[str, float] = {}
    for _ in range(args.jobs):
        now = time.time()
        export = f"--export=ALL,ELB_DEMO_SUBMITTED={int(now)},ELB_DEMO_SECONDS={int(args.job_seconds)}"
        submitted[sbatch(cluster, home, JOB, "-n", "1", export)] = now
    say(f"submitted {len(submitted)} jobs of {args.job_seconds} s as {C.CLUSTER_USER} (sbatch -p {slurm.PARTITION})")
    phase("watching elb work (a line each time what Slurm shows changes)")
    code = _watch(home, len(submitted), state / "journal.sqlite", timeout=args.timeout, proc=proc)
    phase("summary")
    _summary(home, state / "journal.sqlite", len(submitted))
    return code


def sbatch(cluster: TestCluster, home: Path, script: str, *options: str) -> str:
    """``sbatch`` of ``script`` (read from its standard input) as the cluster user in ``home``, on
    the test controller's partition, its output discarded: the job's id."""
    from elbdev.testcluster import constants as C  # noqa: PLC0415
    from elbdev.testcluster import slurm  # noqa: PLC0415

    argv = ["env", f"--chdir={home}", f"SLURM_CONF={slurm.CONF}", "sbatch", "--parsable", "-p", slurm.PARTITION]
    out = cluster.master_run([*argv, *options, "-o", "/dev/null"], user=C.CLUSTER_USER, input_text=script)
    return out.stdout.strip().split(";")[0]


def _watch(home: Path, njobs: int, journal: Path, *, timeout: float, proc: subprocess.Popen[bytes]) -> int:
    changes = Changes()
    deadline = time.monotonic() + timeout
    seen_nodes = False
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            say(f"elb exited early with code {proc.returncode}; see its log")
            return 1
        line = _line()
        if line is not None and changes.new(line):
            say(line)
        done = len(list(home.glob("*.done")))
        alive = _alive_nodes(journal)
        seen_nodes |= alive > 0
        if done >= njobs and seen_nodes and alive == 0:
            say(f"all {njobs} jobs done and every node removed")
            return 0
        time.sleep(3)
    say(f"gave up after {timeout:.0f} s")
    return 1


def _alive_nodes(path: Path) -> int:
    if not path.exists():
        return 0
    j = Journal.read_only(path)
    try:
        return sum(1 for n in j.nodes() if n.state.alive)
    finally:
        j.close()


def _summary(home: Path, journal_path: Path, njobs: int) -> None:
    waits: list[int] = []
    job_ends: list[int] = []
    hosts: dict[str, int] = {}
    for f in home.glob("*.done"):
        parts = f.read_text().split()
        if len(parts) == 4:
            waits.append(int(parts[1]) - int(parts[0]))
            job_ends.append(int(parts[2]))
            hosts[parts[3]] = hosts.get(parts[3], 0) + 1
    j = Journal.read_only(journal_path)
    node_seconds = used_node_seconds(j, time.time())
    launches = launch_line(j, max(job_ends, default=None))
    j.close()
    print()
    print("summary")
    print(f"  jobs run:          {len(waits)} of {njobs} (their result files)")
    print(f"  ran on:            {', '.join(f'{h} ({c})' for h, c in sorted(hosts.items())) or '-'}")
    print(f"  node-minutes used: {node_seconds / 60:.1f}")
    if waits:
        print(f"  wait:              mean {statistics.fmean(waits):.0f} s, max {max(waits)} s")
    print(launches)


__all__ = ["demo_config", "run"]
