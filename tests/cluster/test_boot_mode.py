"""elb with nodes that configure themselves at boot (``provision.mode: boot``) on the real test
cluster: the master runs only admit_nodes.yml (hosts lines, exports, the file the nodes read, the
exec host registration), and each node runs playbooks/node_boot.yml on itself once started.

The node image has no Ansible of its own: the local cloud mounts this machine's Python
environment and checkout into each node read-only (``cloud.local.mounts``), standing in for a
node image with elb installed (EC2 runs the boot through cloud-init, tests/moto).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.model import NodeState
from elb.core.timeline import Step
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, written
from tests.cluster.test_elb_e2e import JOB, balancer, e2e_config, passes_until

pytestmark = pytest.mark.cluster


def boot_config(tmp: Path, tc: TestCluster) -> Config:
    data = e2e_config(tmp).model_dump(mode="json")
    data["cloud"]["local"]["mounts"] = [str(p) for p in tc.boot_mounts()]
    data["provision"]["mode"] = "boot"
    data["provision"]["boot"] = {"timeout": 300}
    return parse_config(data)


def node_file(instance_id: str, path: str) -> str:
    argv = ["podman", "exec", instance_id, "cat", path]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    return done.stdout + done.stderr


def test_nodes_that_configure_themselves_at_boot_run_jobs_over_nfs_and_go(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    before = cluster_state(tc)
    home = Path("/home") / C.CLUSTER_USER / "e2e"
    tc.master_run(["rm", "-rf", str(home)], check=False)
    tc.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    bal = balancer(boot_config(tmp_path, tc))
    jobs = [tc.submit(JOB, "-N", f"boot{i}", "-o", "/dev/null") for i in range(3)]

    # 3 one-slot jobs on 2-slot nodes: 2 nodes in one launch, admitted in one play; the pass
    # that launched them ends once each configured itself and its execd reports.
    grown = passes_until(bal, "nodes to be added", lambda rs: bool(rs[-1].outcomes.added), timeout=300)
    added = sorted(grown[-1].outcomes.added)
    assert len(added) == 2, grown[-1].summary()
    workers = {w.name: w for w in tc.workers()}
    for node in added:
        assert bal.journal.node(node).state is NodeState.READY  # type: ignore[union-attr]
        timeline = bal.journal.timeline(node)
        assert timeline is not None and timeline.reached(Step.PROVISIONED), timeline
        log = node_file(workers[node].instance_id, "/var/log/elb-boot.log")
        assert "failed=0" in log and "unreachable=0" in log, log
        # Its hosts block: the master and the whole batch, from the file the master published.
        hosts = node_file(workers[node].instance_id, "/etc/hosts")
        assert f"{C.MASTER_IP}\t{C.MASTER_NAME}" in hosts
        for other in added:
            assert f"{workers[other].private_ip}\t{other}" in hosts, hosts

    # The jobs run on the new nodes as the cluster user and write into the master's /home over NFS.
    ran = passes_until(
        bal, "the jobs to finish", lambda _: sum(written(f) is not None for f in home.glob("*.host")) == len(jobs), 180
    )
    assert ran and {written(f) for f in home.glob("*.host")} <= set(added)

    # Idle: each node is drained, deregistered and terminated, the master as it was. The pass after
    # which the last job's file was seen may have removed them already (idle 6 s is soon).
    passes_until(
        bal,
        "the nodes to be removed",
        lambda rs: sorted(n for r in [*ran, *rs] for n in r.outcomes.removed) == added,
        180,
    )
    assert tc.workers() == []
    assert cluster_state(tc) == before
    bal.journal.close()
