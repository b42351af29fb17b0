"""A private sshd on 127.0.0.1 for the tests that reach a node over SSH (test_ssh.py,
test_ssh_host_keys.py): its fixtures are in conftest.py. Needs root, sshd and ssh-keygen."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from elb.core.config import ProvisionConfig
from elb.provision.hostkeys import HostKeys
from tests.ports import free_port

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ansible" / "playbooks"
SSHD = Path("/usr/sbin/sshd")
CAN_RUN_SSHD = os.geteuid() == 0 and SSHD.exists() and shutil.which("ssh-keygen") is not None
needs_sshd = pytest.mark.skipif(not CAN_RUN_SSHD, reason="needs root, sshd and ssh-keygen")


@dataclass(frozen=True)
class Sshd:
    port: int
    client_key: Path


class SshdFailed(Exception):
    """The private sshd did not start (its stderr's tail)."""


def make_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the sshd's host key, the client's key and its authorized_keys."""
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True, timeout=30)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    return d


def hold_host_key(cfg: ProvisionConfig, host_key_pub: Path, *names: str) -> None:
    """Keep the sshd's host key as these nodes' keys in the provisioner's store, as elb's cloud
    keeps the key it gave a node at launch."""
    for name in names:
        HostKeys(cfg.host_keys_path).record(name, host_key_pub.read_text())


def start_sshd(d: Path, port: int) -> subprocess.Popen[bytes]:
    """sshd on 127.0.0.1:``port`` with the keys of ``d``, once it accepts connections."""
    config = d / f"sshd_config.{port}"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nPidFile {d / f'sshd.{port}.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_sshd(proc)
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise SshdFailed(err[-500:]) from None
            time.sleep(0.1)


def stop_sshd(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def sshd_for(keys: Path) -> Iterator[Sshd]:
    """An sshd on a free port of 127.0.0.1 with the keys of ``keys`` while the generator runs."""
    port = free_port()
    try:
        proc = start_sshd(keys, port)
    except SshdFailed as err:
        pytest.skip(f"sshd did not start: {err}")
    try:
        yield Sshd(port, keys / "client_key")
    finally:
        stop_sshd(proc)
