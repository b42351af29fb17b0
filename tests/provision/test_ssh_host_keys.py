"""Host key checking over real SSH (a private sshd on 127.0.0.1, as in test_ssh.py): a node that
answers with another key than the one elb holds for it is refused, a node being added whose key
elb does not hold is never contacted, and a departing node elb launched without a key has the
key it shows at the first contact pinned, then checked. Needs root and openssh-server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.core.config import ProvisionConfig
from elb.core.interfaces import NodeSpec, Outcome
from elb.provision import AnsibleProvisioner
from elb.provision.ansible import REACH_TASK
from elb.provision.hostkeys import HostKeys
from elb.schedulers.sge.driver import ADD_PLAYBOOK, REMOVE_PLAYBOOK
from tests.ports import free_port
from tests.provision.sshd_support import (
    FIXTURES,
    Sshd,
    SshdFailed,
    hold_host_key,
    needs_sshd,
    start_sshd,
    stop_sshd,
)

pytestmark = needs_sshd


def config(tmp_path: Path, sshd: Sshd, *hosts: str) -> ProvisionConfig:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_private_key=sshd.client_key,
        timeout=120,
        extra_vars={
            "fixture_out": str(out),
            "fixture_ssh_hosts": list(hosts),
            "fixture_ssh_port": sshd.port,
            "elb_reach_timeout": 3,
        },
    )


def test_a_node_answering_with_another_key_is_refused(tmp_path: Path, sshd: Sshd) -> None:
    """The store holds the key elb gave node001 at launch (the conftest's); what answers at its
    address shows another one: FAILED at the first task, with a message that says so, and the
    play's later tasks never ran there."""
    cfg = config(tmp_path, sshd, "node001")
    assert HostKeys(cfg.host_keys_path).known("node001")
    r = AnsibleProvisioner(cfg).add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "127.0.0.1")], [])["node001"]
    assert r.outcome is Outcome.FAILED, r
    assert r.task == REACH_TASK
    assert r.message is not None
    assert "refused: the SSH host key node001 answers with is not the one elb holds for it" in r.message
    assert str(cfg.host_keys_path / "node001.known") in r.message
    assert not (tmp_path / "out" / "node001.json").exists()


def test_a_node_added_without_a_held_key_is_never_contacted(tmp_path: Path, sshd: Sshd) -> None:
    cfg = config(tmp_path, sshd, "node001", "node002")
    hold_host_key(cfg, sshd.client_key.with_name("host_key.pub"), "node001")
    HostKeys(cfg.host_keys_path).forget(["node002"])
    prov = AnsibleProvisioner(cfg)
    report = prov.run(ADD_PLAYBOOK, new_nodes=[NodeSpec("node001", "127.0.0.1"), NodeSpec("node002", "127.0.0.1")])
    assert report.results["node001"].outcome is Outcome.OK, report.results
    r2 = report.results["node002"]
    assert r2.outcome is Outcome.FAILED
    assert r2.message is not None and r2.message.startswith("no SSH host key for node002 in ")
    assert not (tmp_path / "out" / "node002.json").exists()
    assert report.artifact_dir is not None
    inventory = json.loads((report.artifact_dir / "inventory.json").read_text())
    assert "node002" not in json.dumps(inventory)  # not in the run at all


@pytest.fixture
def impostor(keys: Path, tmp_path: Path) -> Iterator[int]:
    """A second sshd with a host key of its own (the client key and authorized_keys of ``keys``)."""
    d = tmp_path / "impostor"
    d.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True, timeout=30)
    (d / "authorized_keys").write_text((keys / "authorized_keys").read_text())
    port = free_port()
    try:
        proc = start_sshd(d, port)
    except SshdFailed as err:
        pytest.skip(f"sshd did not start: {err}")
    try:
        yield port
    finally:
        stop_sshd(proc)


def test_a_departing_node_without_a_key_is_pinned_at_first_contact(tmp_path: Path, sshd: Sshd, impostor: int) -> None:
    """node001 was launched without a key (by another elb, or by hand): its removal reaches it and
    pins the key it shows; a later contact with another key at its address is refused."""
    cfg = config(tmp_path, sshd, "node001")
    store = HostKeys(cfg.host_keys_path)
    store.forget(["node001"])
    node = NodeSpec("node001", "127.0.0.1")
    first = AnsibleProvisioner(cfg).remove_nodes(REMOVE_PLAYBOOK, [node], [])["node001"]
    assert first.outcome is Outcome.OK, first
    assert store.public_key("node001") == " ".join(_sshd_key(sshd).split()[:2])

    moved = cfg.model_copy(update={"extra_vars": {**cfg.extra_vars, "fixture_ssh_port": impostor}})
    again = AnsibleProvisioner(moved).remove_nodes(REMOVE_PLAYBOOK, [node], [])["node001"]
    assert again.outcome is Outcome.FAILED, again
    assert again.message is not None
    assert "refused: the SSH host key node001 answers with is not the one elb holds for it" in again.message


def _sshd_key(sshd: Sshd) -> str:
    return sshd.client_key.with_name("host_key.pub").read_text()
