"""Helpers of the cluster tests: the cluster's SGE/hosts/exports state, waiting, the provisioner."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from elb.core.config import ClusterConfig, ProvisionConfig
from elb.core.drivers import NodePlays
from elb.core.interfaces import Instance, NodeSpec
from elb.provision.ansible import AnsibleProvisioner
from elb.schedulers.sge.config import SgeConfig
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import REPO_ROOT, TestCluster
from tests.lanes import other_lane_names, own_lines


def provisioner(tmp: Path, **extra_vars: object) -> AnsibleProvisioner:
    cfg = ProvisionConfig(
        playbook_dir=REPO_ROOT / "playbooks",
        private_data_dir=tmp / "ansible",
        ssh_private_key=C.SSH_KEY,
        timeout=600,
        extra_vars=dict(extra_vars),
        host_keys_dir=C.HOST_KEYS,  # the keys TestCluster.launch gives its nodes
    )
    # Grid Engine's settings as elb's SGE driver gives them to its plays (their defaults).
    return AnsibleProvisioner(cfg, ClusterConfig(name=C.CLUSTER_NAME), NodePlays(variables=SgeConfig().role_vars()))


def spec(inst: Instance, slots: int | None = None) -> NodeSpec:
    assert inst.private_ip
    return NodeSpec(name=inst.name, private_ip=inst.private_ip, slots=slots)


def qconf_words(tc: TestCluster, *args: str) -> list[str]:
    proc = tc.master_run(["qconf", *args], check=False)
    return proc.stdout.split() if proc.returncode == 0 else []


def cluster_state(tc: TestCluster) -> dict[str, object]:
    """Everything adding/removing nodes touches on the master. In a lane of the session
    (tests/lanes.py) /etc/hosts and the exports without the lines of the other lane's nodes, and
    not nfs-ganesha's exports: they are made from /etc/exports (in the same module run) and list
    the other lane's clients too, by address."""
    queue = tc.master_run(["qconf", "-sq", C.QUEUE]).stdout.replace("\\\n", " ")
    slots = next(line.split(None, 1)[1].replace(" ", "") for line in queue.splitlines() if line.startswith("slots"))
    state: dict[str, object] = {
        "exechosts": qconf_words(tc, "-sel"),
        "adminhosts": qconf_words(tc, "-sh"),
        "submithosts": qconf_words(tc, "-ss"),
        "hostgroup": qconf_words(tc, "-shgrp", C.HOSTGROUP),
        "queue_slots": slots,
        "etc_hosts": own_lines(Path("/etc/hosts").read_text()),
        "exports": own_lines(Path("/etc/exports").read_text()),
    }
    if not other_lane_names():
        state["ganesha_exports"] = Path("/etc/ganesha/elb-exports.conf").read_text()
    return state


def written(path: Path) -> str | None:
    """The line a test job wrote into ``path`` (``hostname > FILE``), stripped, once it is there
    in full; None before. The shell makes the file before the line comes, and the master may see
    it over NFS in between: an empty file is not yet a job's output."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return text.strip() if text.endswith("\n") else None


def wait_for(what: str, pred: Callable[[], bool], timeout: float = 90.0, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def job_state(tc: TestCluster, job_id: str) -> str:
    """The state letters of a job in qstat, '' once it left qstat."""
    proc = tc.master_run(["qstat", "-u", "*"])
    for line in proc.stdout.splitlines():
        f = line.split()
        if f and f[0] == job_id:
            return f[4]
    return ""
