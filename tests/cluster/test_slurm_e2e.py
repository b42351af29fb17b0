"""elb behind Slurm's power saving on the real test cluster: Debian's slurmctld 22.05 as the
master (configless), slurmd in podman nodes that elb launches through the local provider and
provisions with playbooks/slurm_add_node.yml, elb's resume and suspend programs in slurm.conf.

A job submitted to the cloud partition makes Slurm ask elb (its ResumeProgram) for a node; the
balancer (run here pass by pass, as ``elb run`` does on the master) launches it, sets its
address in Slurm and provisions it; the job runs there and writes into the master's /home over
NFS; once idle, elb's cost rule drains the node and powers it down, Slurm calls its
SuspendProgram, and elb deregisters and terminates it. Nothing is left running.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from elb import factory
from elb.config import Config, parse_config
from elb.daemon import PassResult
from elb.journal import Journal
from elb.model import NodeState
from elb.slurm.balancer import SlurmBalancer
from elb.slurm.commands import SlurmCommands
from elb.testcluster import constants as C
from elb.testcluster import slurm
from elb.testcluster.cluster import REPO_ROOT, TestCluster

pytestmark = pytest.mark.cluster

HOME = Path("/home") / C.CLUSTER_USER / "slurm-e2e"


@pytest.fixture(scope="module")
def controller(testcluster: TestCluster) -> Iterator[TestCluster]:
    slurm.up()
    try:
        yield testcluster
    finally:
        slurm.down()


def slurm_config(tmp: Path, **policy: object) -> Config:
    return parse_config(
        {
            "scheduler": "slurm",
            "poll_interval": 2,
            "state_dir": str(tmp / "state"),
            "cluster": {"name": C.CLUSTER_NAME, "master": C.MASTER_NAME},
            # elb's cost rule on a short timescale: a node idle for idle_factor x boot_time goes.
            "policy": {
                "max_nodes": 2,
                "slots_per_node": slurm.NODE_CPUS,
                "billing": "second",
                "boot_time": 12,
                **policy,
            },
            "slurm": {"conf": str(slurm.CONF), "requests": str(slurm.REQUEST_DIR)},
            "cloud": {"provider": "local"},
            "provision": {
                "playbook_dir": str(REPO_ROOT / "playbooks"),
                "private_data_dir": str(tmp / "ansible"),
                "ssh_private_key": str(C.SSH_KEY),
                "timeout": 600,
            },
        }
    )


def slurm_balancer(cfg: Config) -> SlurmBalancer:
    return SlurmBalancer(
        cfg,
        slurm=SlurmCommands(cfg.slurm),
        journal=Journal(cfg.journal_path),
        cloud=factory.make_cloud(cfg),
        provisioner=factory.make_provisioner(cfg),
    )


def as_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **slurm.env()}
    return subprocess.run(
        ["runuser", "-u", C.CLUSTER_USER, "--", *argv],
        env=env,
        cwd=str(HOME),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def sbatch(*args: str) -> str:
    proc = as_user(["sbatch", "--parsable", "-p", slurm.PARTITION, *args])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def sinfo_states() -> dict[str, str]:
    proc = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--Format=NodeList:0|,StateComplete:0"],
        env={**os.environ, **slurm.env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(line.split("|", 1) for line in proc.stdout.splitlines() if "|" in line)


def passes_until(bal: SlurmBalancer, what: str, done: Callable[[], bool], timeout: float) -> list[PassResult]:
    results: list[PassResult] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results.append(bal.run_pass())
        assert results[-1].ok, results[-1].summary()
        if done():
            return results
        time.sleep(bal.config.poll_interval)
    raise AssertionError(
        f"timed out waiting for {what}; passes: {[r.summary() for r in results[-15:]]}; Slurm: {sinfo_states()}"
    )


def test_slurm_resumes_through_elb_jobs_run_over_nfs_and_idle_nodes_go(controller: TestCluster, tmp_path: Path) -> None:
    tc = controller
    tc.master_run(["mkdir", "-p", str(HOME)], user=C.CLUSTER_USER)
    hosts_before = Path("/etc/hosts").read_text()
    cfg = slurm_config(tmp_path)
    bal = slurm_balancer(cfg)
    started = time.monotonic()
    job = sbatch("-N", "1", "-n", "2", "--wrap", 'sleep 2; hostname > "$SLURM_JOB_ID.host"')
    out = HOME / f"{job}.host"
    try:
        passes_until(bal, f"job {job} to run and write {out}", out.exists, timeout=300)
        ran_on = out.read_text().strip()
        print(f"\njob {job} ran on {ran_on} {time.monotonic() - started:.0f} s after sbatch")
        node = bal.journal.node(ran_on)
        assert node is not None and node.state is NodeState.READY
        timeline = bal.journal.timeline(ran_on)
        assert timeline is not None
        passes_until(
            bal,
            f"{ran_on} to be drained, powered down and terminated",
            lambda: (n := bal.journal.node(ran_on)) is not None and n.state is NodeState.TERMINATED,
            timeout=300,
        )
        passes_until(bal, "every request closed", lambda: not bal.journal.slurm_requests(open_only=True), timeout=60)
        assert tc.workers() == []
        assert "powered_down" in sinfo_states()[ran_on]
        assert Path("/etc/hosts").read_text() == hosts_before
        events = [e.state for e in bal.journal.events(ran_on)]
        assert NodeState.DRAINING in events and events[-1] is NodeState.TERMINATED
    finally:
        subprocess.run(["scancel", job], env={**os.environ, **slurm.env()}, capture_output=True, check=False)
        bal.journal.close()
        for w in tc.workers():
            tc.cloud().terminate([w.instance_id])
