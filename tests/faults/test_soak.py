"""The random-fault soak, lean: each scheduler's about three and a half minutes, on the real test
cluster (in ``scripts/test`` the two run side by side, each in its scheduler's lane: tests/lanes.py).

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
from pathlib import Path

import pytest

from elbdev.testcluster.cluster import TestCluster
from tests.cluster.names import note_used
from tests.cluster.slurm_support import controller
from tests.faults.soak import HOME, LEAN, Figures, Soak, clean_up, sge_soak_config, slurm_soak_config

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
__all__ = ["controller"]  # the fixture, used by name

MINUTES = float(os.environ.get("ELB_SOAK_MINUTES", "3"))


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
def test_soak_sge(testcluster: TestCluster) -> None:
    """Grid Engine's soak; the master's files (SGE, /etc/hosts, the exports) compared with how
    they were once the run is done. In ``scripts/test`` it runs in Grid Engine's lane, beside
    Slurm's soak or its other tests (tests/lanes.py)."""
    work = Path(tempfile.mkdtemp(prefix="elb-soak-sge-"))
    soak = Soak(
        testcluster, "sge", sge_soak_config(work), work / "soak", MINUTES, _seed(), pace=LEAN, home=HOME / "sge"
    )
    try:
        fig = soak.run()
    finally:
        note_used()
        clean_up(testcluster, "sge")
    assert_zeros(fig)
    shutil.rmtree(work, ignore_errors=True)


@pytest.mark.timeout(1800)
def test_soak_slurm(controller: TestCluster) -> None:
    """Slurm's soak, in Slurm's lane in ``scripts/test``."""
    work = Path(tempfile.mkdtemp(prefix="elb-soak-slurm-"))
    cfg = slurm_soak_config(work)
    soak = Soak(
        controller, "slurm", cfg, work / "soak", MINUTES, _seed(), pace=LEAN, home=HOME / "slurm", hurry_requeued=True
    )
    try:
        fig = soak.run()
    finally:
        clean_up(controller, "slurm")
    assert_zeros(fig)
    shutil.rmtree(work, ignore_errors=True)
