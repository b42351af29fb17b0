"""Slurm's burst, end to end, each way elb provisions: ``python -m elbdev.testcluster.bench
--scheduler slurm --sizes 1,4,8,16`` (root, under the test cluster's lock).

For each size N and each provisioning mode (``push``: the master's add play; ``boot``: each node
configures itself, the master one admit play for the batch), ``elb run`` is started as the demo
starts it (its configuration the Slurm demo's, ``max_nodes`` N) and one job asking for N nodes is
submitted (``sbatch -N N``). Slurm's power saving asks for N nodes in one resume request; elb
launches them, provisions them, and Slurm starts the job once every slurmd has registered. The
figure is the user's: from the submission until the job starts, which holds Slurm's own part (its
resume program's start, its registration of each node) as well as elb's. Then the job ends, elb
removes every node, and elb is stopped: the master's CPU is elb's process and its playbook runs
over the whole run (its children's rusage once it has been waited for). Launches that failed are
counted from elb's journal.

The controller defines twice the largest size of cloud nodes: nodes elb removed stay powering
down for the controller's SuspendTimeout, and each run waits until N nodes are powered down and
free to be asked for.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from elb.core.model import NodeState
from elb.service.journal import Journal
from elbdev.demo_slurm import demo_config, sbatch
from elbdev.demo_steps import at_boot, start_elb
from elbdev.testcluster._run import children_cpu

if TYPE_CHECKING:
    from elbdev.testcluster.cluster import TestCluster

MODES = ("push", "boot")
JOB_SECONDS = 2
START_TIMEOUT = 900.0  # a burst whose job has not started by then failed
END_TIMEOUT = 600.0  # from the job's end until every node is removed
log = logging.getLogger(__name__)

JOB = """#!/bin/sh
date +%s.%N > "$HOME/elb-burst/$SLURM_JOB_ID.start"
sleep {seconds}
"""


@dataclass(frozen=True)
class Burst:
    """One burst: ``n`` nodes, one provisioning ``mode``."""

    n: int
    mode: str
    to_start: float  # seconds from the submission until the job started on all n nodes
    removed: float  # seconds from the job's end until elb had terminated every node
    master_cpu: float  # elb's process and its playbook runs, the whole run
    launches: int
    failed: int


def _slurm_out(argv: list[str]) -> str:
    from elbdev.testcluster import slurm  # noqa: PLC0415

    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **slurm.env()}
    )
    return done.stdout if done.returncode == 0 else ""


def free_nodes() -> int:
    """The cloud nodes Slurm may ask for now, or once the next run's elb opens them: powered down
    and not powering down, either open (``idle~``) or held by elb (``drain~`` with elb's hold as
    the reason: the run before held the names past its ``max_nodes``, and the next run's first
    pass opens as many as its own room)."""
    from elb.schedulers.slurm.driver import HELD  # noqa: PLC0415
    from elbdev.testcluster import slurm  # noqa: PLC0415

    rows = _slurm_out(["sinfo", "--noheader", "--Node", "-p", slurm.PARTITION, "-o", "%N|%t|%E"]).splitlines()
    free = 0
    for row in rows:
        _name, state, reason = [*row.split("|", 2), "", ""][:3]
        if state == "idle~" or (state == "drain~" and reason.startswith(HELD)):
            free += 1
    return free


def _wait(what: str, done: Callable[[], bool], timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"elb exited with code {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting {timeout:.0f} s for {what}")
        time.sleep(1)


def one_burst(tc: TestCluster, n: int, mode: str, procs: list[subprocess.Popen[bytes]]) -> Burst:
    """One size, one mode: elb started, the job submitted, timed until it starts and until every
    node is gone, elb stopped."""
    from elbdev.testcluster import constants as C  # noqa: PLC0415
    from elbdev.testcluster import slurm  # noqa: PLC0415

    _wait(f"{n} cloud nodes free to be asked for", lambda: free_nodes() >= n, 2 * slurm.SUSPEND_TIMEOUT + 60)
    state = Path(tempfile.mkdtemp(prefix=f"elb-burst-{n}-{mode}-"))
    config = demo_config(state, C.SSH_KEY, tc.cluster_name, n)
    if mode == "boot":
        config = at_boot(config, tc.boot_mounts())
    cpu = children_cpu()
    proc, home = start_elb(tc, state, config, "elb-burst", procs)
    submitted = time.time()
    job = sbatch(tc, home, JOB.format(seconds=JOB_SECONDS), "-N", str(n), "--ntasks-per-node=1")
    started_file = home / f"{job}.start"
    _wait(f"job {job} ({n} nodes, {mode}) to start", started_file.exists, START_TIMEOUT, proc)
    _wait(f"job {job}'s start time", lambda: started_file.read_text().strip() != "", 30)
    started = float(started_file.read_text())
    journal_path = state / "journal.sqlite"

    def all_gone() -> bool:
        j = Journal.read_only(journal_path)
        try:
            nodes = j.nodes(include_gone=True)
            return len(nodes) >= n and not any(x.state.alive for x in nodes)
        finally:
            j.close()

    _wait(f"elb to remove the {n} nodes", all_gone, END_TIMEOUT, proc)
    gone = time.time()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    j = Journal.read_only(journal_path)
    try:
        events = [e for x in j.nodes(include_gone=True) for e in j.events(x.name)]
        ends = [e.time for e in events if e.state is NodeState.TERMINATED]
    finally:
        j.close()
    return Burst(
        n=n,
        mode=mode,
        to_start=started - submitted,
        removed=max(ends, default=gone) - (started + JOB_SECONDS),
        master_cpu=children_cpu() - cpu,
        launches=sum(1 for e in events if e.state is NodeState.LAUNCHING),
        failed=sum(1 for e in events if e.state is NodeState.FAILED),
    )


def measure_slurm_burst(tc: TestCluster, sizes: list[int], modes: tuple[str, ...] = MODES) -> list[Burst]:
    """Every size, each mode right after the other."""
    from elbdev.testcluster import slurm  # noqa: PLC0415

    tc.up(nodes=0)
    slurm.up(cloud_nodes=2 * max(sizes))
    procs: list[subprocess.Popen[bytes]] = []
    rows: list[Burst] = []
    try:
        for n in sizes:
            for mode in modes:
                b = one_burst(tc, n, mode, procs)
                log.info(
                    "%d node(s), %s: the job started %.1f s after its submission; every node removed %.1f s "
                    "after it ended; master CPU %.1f s; %d launch(es), %d failed",
                    n,
                    mode,
                    b.to_start,
                    b.removed,
                    b.master_cpu,
                    b.launches,
                    b.failed,
                )
                rows.append(b)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        slurm.down()
    return rows


def report_burst(rows: list[Burst], *, target_4: float, target_16: float) -> None:
    """Each size and mode, the time to start as a multiple of the fewest nodes' in the same mode,
    beside the burst targets (4 nodes and 16 nodes against one)."""
    load = os.getloadavg()
    print(f"\nSlurm's burst, end to end (2-core machine, load now {load[0]:.1f} {load[1]:.1f}):")
    print("  nodes  mode   submit -> job starts (x fewest)   removed after the job   CPU a node   launches (failed)")
    for mode in sorted({r.mode for r in rows}, key=MODES.index):
        mine = [r for r in rows if r.mode == mode]
        few = min(mine, key=lambda r: r.n)
        for r in mine:
            print(
                f"  {r.n:>5}  {mode:<5}  {r.to_start:7.1f} s ({r.to_start / few.to_start:5.2f}x)"
                f"             {r.removed:7.1f} s               {r.master_cpu / r.n:6.2f} s"
                f"            {r.launches} ({r.failed})"
            )
        by_n = {r.n: r for r in mine}
        for size, target in ((4, target_4), (16, target_16)):
            if size in by_n and few.n < size:
                ratio = by_n[size].to_start / few.to_start
                verdict = "met" if ratio <= target else "NOT met"
                print(f"  {mode}, {size} nodes / {few.n}: {ratio:.2f}x (target <= {target}: {verdict})")
