"""One SSH connection per host for one playbook run: the inventory's options and the run's
directory of sockets. That a run's tasks really share a connection over a real sshd, and that
nothing is left running after it, is shown in tests/provision/test_ssh.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from elb.provision import sshmux
from elb.provision.inventory import Connection, InventoryError, build_inventory


def _vars(inv: dict[str, object]) -> dict[str, object]:
    all_ = inv["all"]
    assert isinstance(all_, dict)
    v = all_["vars"]
    assert isinstance(v, dict)
    return v


def test_an_inventory_of_one_run_shares_connections_in_its_directory(tmp_path: Path) -> None:
    v = _vars(build_inventory(Connection(), shared_connections=tmp_path))
    args = str(v["ansible_ssh_args"])
    assert args.startswith("-o ControlMaster=auto -o ControlPersist=")  # ssh takes an option's first value
    assert "ControlMaster=no" not in args and "ConnectTimeout=10" in args
    assert v["ansible_control_path_dir"] == str(tmp_path)


def test_an_inventory_without_a_run_opens_a_connection_per_task() -> None:
    v = _vars(build_inventory(Connection()))
    assert str(v["ansible_ssh_args"]).startswith("-o ControlMaster=no ")
    assert "ControlPersist" not in str(v["ansible_ssh_args"]) and "ansible_control_path_dir" not in v


@pytest.mark.parametrize("bad", ["/tmp/a b", "relative/dir", "/tmp/{{ x }}"])
def test_a_directory_ssh_or_ansible_would_read_as_syntax_is_refused(bad: str) -> None:
    with pytest.raises(InventoryError, match="shared connections directory"):
        build_inventory(Connection(), shared_connections=Path(bad))


def test_the_directory_is_private_and_gone_after_the_run() -> None:
    with sshmux.shared_connections() as d:
        assert d is not None and d.name.startswith(sshmux.PREFIX) and len(d.name) == sshmux.NAME_LEN
        assert d.stat().st_mode & 0o777 == 0o700
        (d / "leftover").write_text("x")  # whatever a run left there goes with it
    assert not d.exists()


def test_a_parent_too_long_for_a_socket_path_falls_back_to_tmp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    with sshmux.shared_connections(deep) as d:
        assert d is not None and d.parent == Path("/tmp")
    fits = Path("/tmp") / ("d" * (sshmux.MAX_DIR - len("/tmp/") - 1 - sshmux.NAME_LEN))
    fits.mkdir()
    try:
        with sshmux.shared_connections(fits) as d:
            assert d is not None and d.parent == fits and len(str(d)) == sshmux.MAX_DIR
            # The longest socket path ssh makes there (Ansible's name and ssh's temporary suffix) fits.
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(str(d / ("a" * 10 + "." + "X" * 16)))
    finally:
        fits.rmdir()


def test_no_directory_means_a_connection_per_task() -> None:
    with sshmux.shared_connections(Path("/nonexistent-elb-test")) as d:
        assert d is None
    assert sshmux.connection_args(None) == sshmux.UNSHARED


def test_closing_a_socket_no_master_listens_on_is_not_an_error(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "stale"))  # a master that died, its socket left
        assert sshmux.close_all(tmp_path) == 0
