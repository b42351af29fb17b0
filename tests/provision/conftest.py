"""The nodes these tests add stand for nodes elb launched, which it gave SSH host keys: each
test's store (``<tmp_path>/pdd/host-keys``, the default beside the tests' private data dir) holds
a key for node001 to node009. A node reached by a local connection never shows one; a test that
reaches a node over SSH records that sshd's key instead (tests/provision/test_ssh.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.provision.hostkeys import HostKeys
from tests.provision.sshd_support import Sshd, make_keys, sshd_for

NAMES = tuple(f"node{i:03d}" for i in range(1, 10))


@pytest.fixture(autouse=True)
def _launched_with_host_keys(tmp_path: Path) -> None:
    store = HostKeys(tmp_path / "pdd" / "host-keys")
    for name in NAMES:
        store.issue(name)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with an sshd's host key, the client's key and its authorized_keys."""
    return make_keys(tmp_path_factory)


@pytest.fixture(scope="module")
def sshd(keys: Path) -> Iterator[Sshd]:
    """A private sshd on 127.0.0.1 (tests/provision/sshd_support.py)."""
    yield from sshd_for(keys)
