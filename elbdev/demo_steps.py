"""The steps both demos take (``elbdev.demo`` and ``elbdev.demo_slurm``): a line with the time,
and ``elb run`` started as the test cluster's master.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from elb.core.model import NodeState
from elb.service.journal import Journal

if TYPE_CHECKING:
    from elbdev.testcluster.cluster import TestCluster


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def start_elb(
    cluster: TestCluster, state: Path, config: dict[str, Any], results: str, procs: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], Path]:
    """A fresh ``state`` directory with ``config`` in it, an empty directory ``results`` in the
    cluster user's home for the jobs' result files, and ``elb run`` started as the master (its
    log in ``state``); the process (also added to ``procs``) and that directory."""
    from elbdev.testcluster import constants as C  # noqa: PLC0415
    from elbdev.testcluster.master import in_master  # noqa: PLC0415

    if state.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(state)], check=True, timeout=60)
    state.mkdir(parents=True)
    cfg_path = state / "elb.yml"
    cfg_path.write_text(yaml.safe_dump(config))
    home = Path("/home") / C.CLUSTER_USER / results
    cluster.master_run(["rm", "-rf", str(home)], check=False)
    cluster.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    with (state / "elb.log").open("wb") as log:
        argv = in_master([sys.executable, "-m", "elb", "run", "--config", str(cfg_path)])
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    procs.append(proc)
    return proc, home


def used_node_seconds(journal: Journal, now: float) -> float:
    """The seconds every node of the journal lived: launch to its end (terminated or failed), or to
    ``now`` for one still up."""
    total = 0.0
    for n in journal.nodes(include_gone=True):
        ends = [e.time for e in journal.events(n.name) if e.state in (NodeState.TERMINATED, NodeState.FAILED)]
        total += (ends[-1] if ends else now) - n.launched_at
    return total


def launch_line(journal: Journal, last_end: float | None) -> str:
    """The summary's count of launches from the journal: how many, how many failed, and how many
    came after the last job ended (``last_end``: POSIX seconds; None: no job ended)."""
    launches = failed = late = 0
    for n in journal.nodes(include_gone=True):
        for e in journal.events(n.name):
            if e.state is NodeState.LAUNCHING:
                launches += 1
                late += last_end is not None and e.time > last_end
            failed += e.state is NodeState.FAILED
    return f"  launches:          {launches} ({failed} failed); after the last job ended: {late}"
