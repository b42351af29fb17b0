"""The random-fault soak, lean: both schedulers at once, about three and a half minutes, on the real
test cluster.

For each scheduler a seeded workload (short, long, array and wide jobs) runs while elb runs as ``elb run`` in a
process of its own, and every kind of fault of tests/faults/soak.py is injected once (controller
restarted and stopped, commands slowed, a busy node killed, a play failing, the cloud throttling,
out of capacity and filling a fleet in part, elb SIGKILLed and started again, both cores busy).
Jobs and faults are shorter than in the benchmark's hour (``LEAN``: a fault lasts 10-25 s, a
long job 40-60 s), and on Slurm a job requeued off the killed node is let start at once rather
than after the 120 s Slurm holds it for: what is tested is elb under every fault, not those
lengths. The test asserts the zeros: no task lost or killed by elb, no node leaked, no busy node
terminated. Launches wasted, node-seconds and waits are printed (a FIGURES line), not asserted;
the benchmark (benchmarks/bench_soak.py) compares them with a fault-free run of the same seed.

``ELB_SOAK_SEED`` sets the seed (default 1: CI replays the same schedule of faults each run, so a
failure there is one a developer can run again; ``ELB_SOAK_SEED=random`` draws one from the
time, printed); ``ELB_SOAK_MINUTES`` the
workload's length (default 3). Each run's config, journal, elb's log and the cloud's fault log
are written to a directory of its own under /tmp (printed), kept when the test fails and removed
when it passes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from elbdev.testcluster import slurm
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state
from tests.cluster.names import note_used, reserve
from tests.cluster.slurm_support import controller
from tests.faults.soak import HOME, LEAN, Figures, Soak, clean_up, sge_soak_config, slurm_soak_config

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
__all__ = ["controller"]  # the fixture, used by name

MINUTES = float(os.environ.get("ELB_SOAK_MINUTES", "3"))


def say(scheduler: str, line: str) -> None:
    print(f"[{scheduler}] {line}", flush=True)


def _seed() -> int:
    seed = os.environ.get("ELB_SOAK_SEED", "1")
    return int(time.time()) if seed == "random" else int(seed)


def assert_zeros(fig: Figures) -> None:
    print(f"\n{fig.line()}")
    assert fig.lost == [], fig.lost
    assert fig.killed_by_elb == [], fig.killed_by_elb
    assert fig.leaked == [], fig.leaked
    assert fig.busy_terminated == [], fig.busy_terminated
    assert fig.tasks_done + fig.tasks_killed_by_fault == fig.tasks


@pytest.mark.timeout(1800)
def test_soak_sge_and_slurm_at_once(controller: TestCluster) -> None:
    """Both schedulers' soaks at once on the one test cluster: Grid Engine's qmaster and Slurm's
    controller on the master, each scheduler's elb a cluster of its own (its own label on its
    nodes, which the other elb does not see) with job files of its own. Each run's faults are its
    own (its controller restarted or stopped, its commands slowed, its cloud's faults, its elb
    killed); the other run's are load beside it (both cores kept busy twice over, the other's
    plays). The master's files (SGE, /etc/hosts, the exports) are compared with how they were
    once both runs are done."""
    tc = controller
    seed = _seed()
    # Node names are podman's container names, one namespace on the machine: Grid Engine's after
    # Slurm's node001-node008.
    reserve(slurm.cloud_nodes_now())
    baseline = cluster_state(tc)
    sge_work = Path(tempfile.mkdtemp(prefix="elb-soak-sge-"))
    slurm_work = Path(tempfile.mkdtemp(prefix="elb-soak-slurm-"))
    slurm_cfg = slurm_soak_config(slurm_work)
    slurm_cluster = f"{slurm_cfg.cluster.name}-slurm"
    slurm_cfg = slurm_cfg.model_copy(update={"cluster": slurm_cfg.cluster.model_copy(update={"name": slurm_cluster})})
    slurm_tc = TestCluster(cluster_name=slurm_cluster)
    common: dict[str, Any] = {"minutes": MINUTES, "seed": seed, "pace": LEAN, "master_check": False}
    soaks = {
        "sge": Soak(
            tc,
            "sge",
            sge_soak_config(sge_work),
            sge_work / "soak",
            home=HOME / "sge",
            say=partial(say, "sge"),
            **common,
        ),
        "slurm": Soak(
            slurm_tc,
            "slurm",
            slurm_cfg,
            slurm_work / "soak",
            home=HOME / "slurm",
            hurry_requeued=True,
            say=partial(say, "slurm"),
            **common,
        ),
    }
    figures: dict[str, Figures] = {}
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {name: pool.submit(soak.run) for name, soak in soaks.items()}
            for name, future in futures.items():
                figures[name] = future.result()
        soaks["sge"].check_master(figures["sge"], baseline)
    finally:
        note_used()
        clean_up(slurm_tc, "slurm")
        clean_up(tc, "sge")
    for fig in figures.values():
        assert_zeros(fig)
    shutil.rmtree(sge_work, ignore_errors=True)
    shutil.rmtree(slurm_work, ignore_errors=True)
