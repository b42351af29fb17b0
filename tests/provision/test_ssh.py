"""AnsibleProvisioner over real SSH: a private sshd on 127.0.0.1 that this test starts.

This is the path elb takes to real nodes: the SSH user and key from ProvisionConfig, elb's SSH
options (no ControlMaster, connect timeout, no known_hosts), pipelining, and Python discovery
on the far side. Needs root and openssh-server (scripts/install-system-deps.sh installs it);
skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from elb.config import ProvisionConfig
from elb.interfaces import NodeSpec, Outcome
from elb.provision import AnsibleProvisioner

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ansible" / "playbooks"
SSHD = Path("/usr/sbin/sshd")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not SSHD.exists() or shutil.which("ssh-keygen") is None,
    reason="needs root, sshd and ssh-keygen",
)


@dataclass(frozen=True)
class Sshd:
    port: int
    client_key: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True, timeout=30)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.skip(f"sshd did not start: {err[-500:]}")
                time.sleep(0.1)
        yield Sshd(port, d / "client_key")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_add_and_remove_over_ssh(tmp_path: Path, sshd: Sshd) -> None:
    out = tmp_path / "out"
    out.mkdir()
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_user="root",
        ssh_private_key=sshd.client_key,
        timeout=120,
        extra_vars={
            "fixture_out": str(out),
            "fixture_ssh_hosts": ["node001", "node002"],
            "fixture_ssh_port": sshd.port,
            "fixture_busy_hosts": ["node002"],
        },
    )
    prov = AnsibleProvisioner(cfg)
    nodes = [NodeSpec("node001", "127.0.0.1", 2), NodeSpec("node002", "127.0.0.1", 2)]
    t0 = time.monotonic()
    added = prov.add_nodes(nodes, [])
    print(f"add over SSH, 2 hosts: {time.monotonic() - t0:.1f} s")
    assert {n: r.outcome for n, r in added.items()} == {"node001": Outcome.OK, "node002": Outcome.OK}, added
    # The copy module really ran on the far side of the SSH connection.
    seen = json.loads((out / "node001.json").read_text())
    assert seen["ansible_host"] == "127.0.0.1" and seen["elb_slots"] == 2

    removed = prov.remove_nodes(nodes, [])
    assert removed["node001"].outcome is Outcome.OK
    assert removed["node002"].outcome is Outcome.BUSY


def test_wrong_key_is_unreachable(tmp_path: Path, sshd: Sshd) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_private_key=other,
        timeout=120,
        extra_vars={"fixture_ssh_hosts": ["node001"], "fixture_ssh_port": sshd.port},
    )
    r = AnsibleProvisioner(cfg).add_nodes([NodeSpec("node001", "127.0.0.1")], [])["node001"]
    assert r.outcome is Outcome.UNREACHABLE
    assert r.message is not None and "Permission denied" in r.message
