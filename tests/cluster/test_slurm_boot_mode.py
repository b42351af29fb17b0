"""Slurm nodes that configure themselves at boot (``provision.mode: boot``) on the real test
cluster: Slurm asks elb for a node, elb launches it with its boot, sets its address in Slurm and
runs only slurm_admit_nodes.yml on the master (hosts lines, exports, the munge key written on the
node over SSH, the batch's file); the node runs playbooks/slurm_node_boot.yml on itself (mounts,
users, munged with that key, a configless slurmd). The job runs there and writes into the
master's /home over NFS; the idle node goes as with the push.

The key's path is checked: on the node it is munge's, mode 0400, the master's bytes; it is in
neither the node's boot document, nor its boot's log, nor any file of elb's Ansible runs.

The node image has no Ansible of its own: the local cloud mounts this machine's Python
environment and checkout into each node read-only (``cloud.local.mounts``), as
tests/cluster/test_boot_mode.py does for Grid Engine.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.model import NodeState
from elb.provision.boot import BOOT_INVENTORY
from elbdev.testcluster import slurm
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.slurm_support import (
    controller,
    job_done,
    job_host,
    master_hosts,
    passes_until,
    remove_left_workers,
    sbatch,
    slurm_balancer,
    slurm_config,
)

pytestmark = pytest.mark.cluster
__all__ = ["controller"]  # the fixture, used by name

MASTER_KEY = Path("/etc/munge/munge.key")


def slurm_boot_config(tmp: Path, tc: TestCluster) -> Config:
    data = slurm_config(tmp).model_dump(mode="json")
    data["cloud"]["local"]["mounts"] = [str(p) for p in tc.boot_mounts()]
    data["provision"]["mode"] = "boot"
    data["provision"]["boot"] = {"timeout": 300}
    return parse_config(data)


def on_node(instance_id: str, *argv: str) -> str:
    done = subprocess.run(["podman", "exec", instance_id, *argv], capture_output=True, timeout=30, check=False)
    return (done.stdout + done.stderr).decode(errors="replace")


def holds_key(text: str | bytes, key: bytes) -> bool:
    """Whether ``text`` holds the key, raw or base64 (the answer only: never the key in a message)."""
    data = text.encode(errors="replace") if isinstance(text, str) else text
    return key in data or base64.b64encode(key) in data


def test_a_slurm_node_configures_itself_at_boot_with_the_key_the_master_pushed(
    controller: TestCluster, tmp_path: Path
) -> None:
    tc = controller
    key = MASTER_KEY.read_bytes()
    hosts_before = master_hosts()
    cfg = slurm_boot_config(tmp_path, tc)
    bal = slurm_balancer(cfg)
    job = sbatch("-N", "1", "-n", "2", "--wrap", 'sleep 2; hostname > "$SLURM_JOB_ID.host"')
    try:
        passes_until(bal, f"job {job} to run and write its output file", lambda: job_done(job), timeout=420)
        ran_on = job_host(job)
        assert ran_on is not None
        node = bal.journal.node(ran_on)
        assert node is not None and node.instance_id is not None
        iid = node.instance_id
        boot_log = on_node(iid, "cat", "/var/log/elb-boot.log")
        assert "failed=0" in boot_log and "unreachable=0" in boot_log, boot_log
        assert on_node(iid, "stat", "-c", "%U:%G %a", "/etc/munge/munge.key").strip() == "munge:munge 400"
        node_key = subprocess.run(
            ["podman", "exec", iid, "cat", "/etc/munge/munge.key"], capture_output=True, timeout=30, check=False
        ).stdout
        same = node_key == key
        assert same, "the node's munge key is not the master's"
        leaked_document = holds_key(on_node(iid, "cat", BOOT_INVENTORY), key)
        leaked_log = holds_key(boot_log, key)
        leaked_runs = [
            str(f) for f in (tmp_path / "ansible").rglob("*") if f.is_file() and holds_key(f.read_bytes(), key)
        ]
        assert not leaked_document and not leaked_log and leaked_runs == []

        passes_until(
            bal,
            f"{ran_on} to be drained, powered down and terminated",
            lambda: (n := bal.journal.node(ran_on)) is not None and n.state is NodeState.TERMINATED,
            timeout=300,
        )
        assert tc.workers() == []
        passes_until(
            bal,
            "the suspend request taken and every ask answered",
            lambda: not bal.journal.asks() and not list(slurm.REQUEST_DIR.glob("*.json")),
            timeout=120,
        )
        assert master_hosts() == hosts_before
    finally:
        subprocess.run(["scancel", job], env={**os.environ, **slurm.env()}, capture_output=True, check=False)
        bal.journal.close()
        remove_left_workers(tc)
