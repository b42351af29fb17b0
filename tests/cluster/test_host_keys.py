"""Host keys on the test cluster (marked ``cluster``): a node the local cloud launches answers SSH
with the key elb made for it, and when something else answers at its address with another key,
the add play is refused before anything runs there; the key is forgotten when the node goes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from elb.core.interfaces import Outcome
from elb.provision.ansible import REACH_TASK
from elb.schedulers.sge.driver import ADD_PLAYBOOK
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, provisioner, qconf_words, spec

pytestmark = pytest.mark.cluster


def host_key_shown(address: str) -> str | None:
    """The ed25519 host key the sshd at ``address`` shows (``ssh-keyscan``), or None."""
    proc = subprocess.run(
        ["ssh-keyscan", "-t", "ed25519", "-T", "5", address], capture_output=True, text=True, timeout=30, check=False
    )
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == "ssh-ed25519":
            return f"{fields[1]} {fields[2]}"
    return None


def answer_with_another_key(name: str) -> None:
    """Make the node's sshd show a key of its own making from now on (an impostor at its address)."""
    script = (
        "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/impostor_key"
        " && echo 'HostKey /etc/ssh/impostor_key' > /etc/ssh/sshd_config.d/impostor.conf"
        " && pkill -HUP -x sshd"
    )
    subprocess.run(["podman", "exec", name, "sh", "-c", script], check=True, timeout=60)


def test_a_node_answering_with_another_key_is_refused(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    before = cluster_state(tc)
    keys = tc.host_keys()
    node = tc.launch(1)[0]
    assert node.private_ip
    try:
        given = keys.public_key(node.name)
        assert given is not None
        assert host_key_shown(node.private_ip) == given  # the key elb made, before its sshd started

        answer_with_another_key(node.name)
        deadline = time.monotonic() + 30
        while host_key_shown(node.private_ip) in (given, None):
            assert time.monotonic() < deadline, "the node's sshd kept its key"
            time.sleep(0.5)

        result = provisioner(tmp_path, elb_reach_timeout=5).add_nodes(ADD_PLAYBOOK, [spec(node)], existing=[])
        r = result[node.name]
        assert r.outcome is Outcome.FAILED, r
        assert r.task == REACH_TASK
        assert r.message is not None
        assert f"refused: the SSH host key {node.name} answers with is not the one elb holds for it" in r.message
        assert node.name not in qconf_words(tc, "-sel")
        # Nothing ran on it: the play's first task is the one that was refused.
        hosts = subprocess.run(
            ["podman", "exec", node.name, "cat", "/etc/hosts"], capture_output=True, text=True, timeout=30, check=True
        )
        assert "master" not in hosts.stdout
    finally:
        tc.cloud().terminate([node.instance_id])
    assert not keys.known(node.name)  # gone with the node
    assert cluster_state(tc) == before
