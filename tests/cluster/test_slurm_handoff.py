"""Slurm's power saving hands its requests to elb, on a real controller: Debian's slurmctld
22.05 and munged on this machine (elbdev.testcluster.slurm), with elb's programs as its
ResumeProgram and SuspendProgram. A job in the cloud partition makes Slurm resume nodes, which
elb's program records and the daemon's intake journals; powering the nodes down makes Slurm call
the suspend program. No slurmd runs (the controller alone), so the job stays CONFIGURING."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.core.config import parse_config
from elb.core.scheduler import AskKind
from elb.schedulers.slurm.driver import Slurm
from elb.schedulers.slurm.parse import SINFO_ARGV, SQUEUE_ARGV, by_name, parse_sinfo, parse_squeue
from elb.service.journal import Journal
from elbdev.testcluster import slurm

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def controller(_cluster_lock: None) -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("the Slurm controller needs root")
    slurm.up()
    try:
        yield {**os.environ, **slurm.env()}
    finally:
        slurm.down()


def sh(argv: list[str] | tuple[str, ...], env: dict[str, str]) -> str:
    proc = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60, check=False, cwd="/tmp")
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    return proc.stdout


def wait_for_requests(directory: Path, kind: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(p.name.endswith(f"-{kind}.json") for p in directory.iterdir()):
        assert time.monotonic() < deadline, f"no {kind} request from Slurm within {timeout:g} s"
        time.sleep(0.5)


def test_slurm_asks_elb_to_resume_and_suspend_nodes(controller: dict[str, str], tmp_path: Path) -> None:
    env = controller
    job = sh(["sbatch", "--parsable", "-J", "elb-handoff", "-n", "3", "--wrap", "sleep 1"], env).strip()
    try:
        wait_for_requests(slurm.REQUEST_DIR, "resume")
        journal = Journal(tmp_path / "journal.db")
        cfg = parse_config(
            {"scheduler": "slurm", "slurm": {"conf": str(slurm.CONF), "requests": str(slurm.REQUEST_DIR)}}
        )
        driver = Slurm(cfg, journal)
        assert driver.take_requests(time.time()) == (f"Slurm asks to resume node[001-002] (job {job})",)  # 3 CPUs: 2x2
        assert [(r.kind, r.nodes) for r in journal.slurm_requests()] == [("resume", "node[001-002]")]
        assert [(a.node, a.kind) for a in journal.asks()] == [("node001", AskKind.WANT), ("node002", AskKind.WANT)]
        read = driver.read([], time.time())
        assert read.asks is not None and [a.node for a in read.asks] == ["node001", "node002"]  # Slurm still wants them
        assert driver.resume_timeout() is not None

        jobs = {j.job_id: j for j in parse_squeue(sh(SQUEUE_ARGV, env))}
        assert jobs[job].state == "CONFIGURING" and jobs[job].nodelist == ("node001", "node002")
        nodes = by_name(parse_sinfo(sh(SINFO_ARGV, env)))
        assert nodes["node001"].powering_up and nodes["node003"].powered_down

        sh(["scancel", job], env)
        sh(["scontrol", "update", "nodename=node[001-002]", "state=POWER_DOWN_FORCE"], env)
        wait_for_requests(slurm.REQUEST_DIR, "suspend")
        assert driver.take_requests(time.time()) == ("Slurm asks to suspend node[001-002]",)
        assert [(a.node, a.kind) for a in journal.asks()] == [
            ("node001", AskKind.RELEASE),
            ("node002", AskKind.RELEASE),
        ]
        assert list(slurm.REQUEST_DIR.glob("*.json")) == []  # every file journalled and removed
        journal.close()
    finally:
        subprocess.run(["scancel", job], env=env, capture_output=True, timeout=60, check=False)
