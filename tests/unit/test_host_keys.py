"""The host key store (``elb.provision.hostkeys``) and the SSH options that check a node's key
(``elb.provision.inventory.host_key_args``)."""

from __future__ import annotations

import base64
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from elb.clouds.ec2.console import decode_output, host_key_in_console
from elb.core.interfaces import NodeSpec
from elb.provision.hostkeys import HostKeyError, HostKeys, generate, public_key_line
from elb.provision.inventory import Connection, InventoryError, build_inventory, host_key_args


def test_a_generated_key_is_one_openssh_reads(tmp_path: Path) -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("needs ssh-keygen")
    key = generate()
    assert key.public.startswith("ssh-ed25519 ")
    assert key.private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    path = tmp_path / "k"
    path.write_text(key.private)
    path.chmod(0o600)
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True)
    assert derived.stdout.split()[:2] == key.public.split()
    assert generate().public != key.public
    assert key.private not in repr(key)


def test_issue_keeps_the_pair_until_it_is_settled(tmp_path: Path) -> None:
    store = HostKeys(tmp_path / "keys")
    first = store.issue("node001")
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    private = store.private_key_file("node001")
    assert private is not None and stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text() == first.private
    # A launch tried again sends the same user data: the same pair.
    assert store.issue("node001") == first
    known = store.known_hosts_file("node001")
    assert known.read_text() == f"node001 {first.public}\n"
    assert store.public_key("node001") == first.public and store.known("node001")

    store.settle("node001")  # the instance runs with it
    assert store.private_key_file("node001") is None
    assert store.public_key("node001") == first.public
    # The name launched again after that: a new key.
    second = store.issue("node001")
    assert second.public != first.public

    store.forget(["node001"])
    assert not store.known("node001") and store.names() == set()


def test_record_takes_one_ed25519_public_key_only(tmp_path: Path) -> None:
    store = HostKeys(tmp_path / "keys")
    key = generate()
    store.record("node002", f"{key.public} root@node002\n")
    assert store.public_key("node002") == key.public
    for bad in ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC", "ssh-ed25519 notbase64!", "", "ssh-ed25519"):
        with pytest.raises(HostKeyError):
            store.record("node003", bad)
    assert not store.known("node003")
    assert public_key_line(f"{key.public} comment") == key.public


@pytest.mark.parametrize("name", ["../etc/passwd", "node 1", "", "-x", "a/b"])
def test_names_that_are_no_host_names_make_no_path(tmp_path: Path, name: str) -> None:
    store = HostKeys(tmp_path / "keys")
    with pytest.raises(InventoryError):
        store.issue(name)
    with pytest.raises(InventoryError):
        store.known_hosts_file(name)


def test_prune_forgets_old_keys_of_nodes_that_are_gone(tmp_path: Path) -> None:
    store = HostKeys(tmp_path / "keys")
    for name in ("node001", "node002", "node003"):
        store.issue(name)
    now = store.known_hosts_file("node001").stat().st_mtime
    # Within the grace period nothing goes (a launch may be under way).
    assert store.prune({"node001"}, now + 10, grace=60) == []
    assert store.prune({"node001"}, now + 120, grace=60) == ["node002", "node003"]
    assert store.names() == {"node001"}


def test_an_unreadable_store_is_an_error_not_an_unknown_key(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(HostKeyError, match="cannot read"):
        HostKeys(blocker / "keys").known("node001")


def test_ssh_options_bind_the_key_to_the_name(tmp_path: Path) -> None:
    args = shlex.split(host_key_args(tmp_path, "node001"))
    opts = dict(a.split("=", 1) for a in args if a != "-o")
    assert opts == {
        "HostKeyAlias": "node001",
        "UserKnownHostsFile": f"{tmp_path}/node001.known",
        "GlobalKnownHostsFile": "/dev/null",
        "StrictHostKeyChecking": "yes",
        "HashKnownHosts": "no",
    }
    assert "StrictHostKeyChecking=accept-new" in host_key_args(tmp_path, "node001", pin=True)


@pytest.mark.parametrize("store", ["relative/dir", "/with space", "/a{{ x }}", "/a;b"])
def test_a_store_path_ssh_or_ansible_could_misread_is_refused(store: str) -> None:
    with pytest.raises(InventoryError):
        build_inventory(Connection(host_keys=Path(store)))


def test_every_node_is_checked_and_only_pinned_ones_may_be_taken_at_first_contact(tmp_path: Path) -> None:
    inv = build_inventory(
        Connection(host_keys=tmp_path),
        workers=[NodeSpec("node001", "10.0.0.1")],
        new_nodes=[NodeSpec("node002", "10.0.0.2")],
        old_nodes=[NodeSpec("node003", "10.0.0.3")],
        pin={"node001"},
    )
    children = inv["all"]["children"]  # type: ignore[index]
    hosts = {n: hv for g in ("workers", "new_nodes", "old_nodes") for n, hv in children[g]["hosts"].items()}
    for name, hv in hosts.items():
        assert hv["ansible_host_key_checking"] is True
        assert f"HostKeyAlias={name} " in hv["ansible_ssh_common_args"]
        policy = "accept-new" if name == "node001" else "yes"
        assert f"StrictHostKeyChecking={policy} " in hv["ansible_ssh_common_args"]
    # The shared options say nothing about host keys (ssh takes an option's first value).
    ssh_args = inv["all"]["vars"]["ansible_ssh_args"]  # type: ignore[index]
    assert "StrictHostKeyChecking" not in ssh_args and "KnownHostsFile" not in ssh_args
    assert "ansible_ssh_common_args" not in children["master"]["hosts"]["master"]


# -- a launch template node's key, from its console output (elb.clouds.ec2.console) ----------------


def test_the_key_is_read_from_the_last_complete_block_of_the_console() -> None:
    old, new = generate(), generate()
    text = (
        f"-----BEGIN SSH HOST KEY KEYS-----\n{old.public} root@a\n-----END SSH HOST KEY KEYS-----\n"
        "reboot\n"
        "ec2: -----BEGIN SSH HOST KEY KEYS-----\n"
        "ec2: ssh-rsa AAAAB3NzaC1yc2E root@a\n"
        f"ec2: {new.public} root@a\n"
        "ec2: -----END SSH HOST KEY KEYS-----\n"
        f"-----BEGIN SSH HOST KEY KEYS-----\n{generate().public}\n"  # still being written
    )
    assert host_key_in_console(text) == new.public
    assert decode_output(base64.b64encode(text.encode()).decode()) == text
    assert decode_output("not base64 !") == "not base64 !"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-----BEGIN SSH HOST KEY KEYS-----\nssh-rsa AAAAB3NzaC1yc2E root@a\n-----END SSH HOST KEY KEYS-----\n",
        "-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 AAAAnotakey root@a\n-----END SSH HOST KEY KEYS-----\n",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4 outside a block\n",
    ],
)
def test_no_ed25519_key_in_a_complete_block_is_none(text: str) -> None:
    assert host_key_in_console(text) is None
