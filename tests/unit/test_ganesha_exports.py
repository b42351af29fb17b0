"""The nfs_server role's module applying the exports (roles/nfs_server/library/elb_export_lines.py
with ``apply``), run as Ansible runs it on files in a temporary directory. nfs-ganesha is stood in
for by a process that counts the SIGHUPs it gets, and the kernel's ``exportfs`` by a script first
in PATH that records its arguments: neither server can run in a unit test (nfs-ganesha itself
serves the cluster tests' nodes, through this module)."""

from __future__ import annotations

import fcntl
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit import role_modules

MODULE_PATH = role_modules.module_path("nfs_server", "elb_export_lines")
M = role_modules.load("nfs_server", "elb_export_lines")
DIRS = ["/home", "/srv/common"]

HUP_COUNTER = """
import signal, sys, time
n = 0
def hup(*_):
    global n
    n += 1
    open(sys.argv[1], "w").write(str(n))
signal.signal(signal.SIGHUP, hup)
open(sys.argv[1], "w").write("0")
while True:
    time.sleep(0.05)
"""


class Ganesha:
    """The stand-in's pid file and how many SIGHUPs it has had."""

    def __init__(self, pidfile: Path, count: Path) -> None:
        self.pidfile, self.count = pidfile, count

    def hups(self) -> int:
        return int(self.count.read_text() or 0)

    def wait_hups(self, n: int) -> None:
        deadline = time.monotonic() + 10
        while self.hups() != n:
            assert time.monotonic() < deadline, f"{self.hups()} SIGHUPs, not {n}"
            time.sleep(0.05)


@pytest.fixture
def ganesha(tmp_path: Path) -> Iterator[Ganesha]:
    count = tmp_path / "hups"
    proc = subprocess.Popen([sys.executable, "-c", HUP_COUNTER, str(count)])
    deadline = time.monotonic() + 10
    while not count.exists() or count.read_text() != "0":
        assert time.monotonic() < deadline, "the stand-in did not start"
        time.sleep(0.05)
    pidfile = tmp_path / "ganesha.pid"
    pidfile.write_text(f"{proc.pid}\n")
    yield Ganesha(pidfile, count)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def args(tmp_path: Path, pidfile: Path, **more: Any) -> dict[str, Any]:
    return {
        "exports": DIRS,
        "path": str(tmp_path / "exports"),
        "lock_path": str(tmp_path / "lock"),
        "apply": "ganesha",
        "ganesha_exports": str(tmp_path / "elb-exports.conf"),
        "ganesha_pidfile": str(pidfile),
        **more,
    }


def run(tmp_path: Path, **a: Any) -> tuple[int, dict[str, Any]]:
    return role_modules.run(MODULE_PATH, tmp_path, **a)


def test_a_batch_is_exported_and_ganesha_told_once_then_not_again(tmp_path: Path, ganesha: Ganesha) -> None:
    output = tmp_path / "elb-exports.conf"
    rc, out = run(tmp_path, hosts=["127.0.0.1", "127.0.0.2"], **args(tmp_path, ganesha.pidfile))
    assert rc == 0, out
    assert (out["changed"], out["lines"], out["applied"], out["reloaded"]) == (True, 4, "ganesha", True)
    text = output.read_text()
    assert text.startswith(M.GANESHA_HEADER) and text.count("EXPORT {") == 2
    assert "Clients = 127.0.0.1, 127.0.0.2;" in text
    ganesha.wait_hups(1)

    rc, out = run(tmp_path, hosts=["127.0.0.1", "127.0.0.2"], **args(tmp_path, ganesha.pidfile))
    assert rc == 0 and (out["changed"], out["reloaded"]) == (False, False)
    time.sleep(0.3)
    assert ganesha.hups() == 1 and output.read_text() == text

    rc, out = run(tmp_path, hosts=["127.0.0.1", "127.0.0.2"], state="absent", **args(tmp_path, ganesha.pidfile))
    assert rc == 0 and (out["changed"], out["lines"], out["reloaded"]) == (True, 4, True)
    assert "EXPORT" not in output.read_text()
    ganesha.wait_hups(2)


def test_an_exports_file_edited_by_hand_is_applied_by_the_next_run(tmp_path: Path, ganesha: Ganesha) -> None:
    # No line of the batch changes, but the file's other lines did: ganesha is brought in line.
    run(tmp_path, hosts=["127.0.0.1"], **args(tmp_path, ganesha.pidfile))
    ganesha.wait_hups(1)
    with (tmp_path / "exports").open("a") as f:
        f.write("/srv/data 127.0.0.3(ro,root_squash)\n")
    rc, out = run(tmp_path, hosts=["127.0.0.1"], **args(tmp_path, ganesha.pidfile))
    assert rc == 0 and (out["lines"], out["changed"], out["reloaded"]) == (0, True, True)
    assert 'Path = "/srv/data";' in (tmp_path / "elb-exports.conf").read_text()
    ganesha.wait_hups(2)


def test_the_blocks_group_clients_by_options_and_resolve_names() -> None:
    exports = M.parse_exports(
        "# header\n"
        "/home node1(rw,sync,no_root_squash,no_subtree_check)\n"
        "/srv/common node1(rw,sync,no_root_squash)\n"
        "/home node2(ro,root_squash) node3(ro,root_squash)\n"
    )
    text = M.ganesha_exports(exports, {"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"}.__getitem__)
    assert text.count("EXPORT {") == 2
    home = text[text.index('Path = "/home"') :].split("\n}\n")[0]
    assert "Clients = 10.0.0.1;" in home and "Access_Type = RW;" in home and "Squash = No_Root_Squash;" in home
    assert "Clients = 10.0.0.2, 10.0.0.3;" in home and "Access_Type = RO;" in home and "Squash = Root_Squash;" in home
    assert M.ganesha_exports({}, str) == M.GANESHA_HEADER


def test_an_unreadable_exports_line_fails_clearly_and_ganesha_is_left_alone(tmp_path: Path, ganesha: Ganesha) -> None:
    (tmp_path / "exports").write_text("not-a-path host(rw)\n")
    rc, out = run(tmp_path, hosts=["127.0.0.1"], **args(tmp_path, ganesha.pidfile))
    assert rc != 0 and "cannot read exports line" in out["msg"] and "lines of" in out["msg"]
    assert not (tmp_path / "elb-exports.conf").exists()
    assert ganesha.hups() == 0


def test_a_missing_pid_file_is_a_clear_error(tmp_path: Path) -> None:
    rc, out = run(tmp_path, hosts=["127.0.0.1"], **args(tmp_path, tmp_path / "no.pid"))
    assert rc != 0 and "cannot signal nfs-ganesha" in out["msg"] and "no.pid" in out["msg"]


def test_check_mode_says_what_would_change_and_changes_nothing(tmp_path: Path, ganesha: Ganesha) -> None:
    rc, out = run(tmp_path, hosts=["127.0.0.1"], _ansible_check_mode=True, **args(tmp_path, ganesha.pidfile))
    assert rc == 0 and (out["changed"], out["reloaded"]) == (True, True)
    assert not (tmp_path / "exports").exists() and not (tmp_path / "elb-exports.conf").exists()
    time.sleep(0.3)
    assert ganesha.hups() == 0


def test_a_run_waits_for_the_lock_and_applies_what_was_edited_meanwhile(tmp_path: Path, ganesha: Ganesha) -> None:
    # Another play holds the exports lock: this run must not read the exports or write ganesha's
    # file until it is released, and then it applies the file as the other play left it.
    (tmp_path / "exports").write_text("")
    a = args(tmp_path, ganesha.pidfile)
    args_file = tmp_path / "waiting.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"hosts": ["127.0.0.1"], **a}}))
    with (tmp_path / "lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = subprocess.Popen(
            [sys.executable, str(MODULE_PATH), str(args_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and waiting.poll() is None:
            time.sleep(0.1)
        assert waiting.poll() is None, "the module ran while another run held the lock"
        assert not (tmp_path / "elb-exports.conf").exists()
        (tmp_path / "exports").write_text("/srv/data 127.0.0.9(rw)\n")  # the other play's edit
    stdout, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and json.loads(stdout)["reloaded"] is True
    text = (tmp_path / "elb-exports.conf").read_text()
    assert "127.0.0.9" in text and "127.0.0.1" in text


def fake_exportfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rc: int = 0) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "exportfs-calls"
    script = bin_dir / "exportfs"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho "exportfs: stand-in says no" >&2\nexit {rc}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return calls


def test_kernel_runs_exportfs_only_when_a_line_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_exportfs(tmp_path, monkeypatch)
    # auto with no ganesha include file: the kernel's server
    a = args(tmp_path, tmp_path / "no.pid", apply="auto")
    rc, out = run(tmp_path, hosts=["node004"], **a)
    assert rc == 0 and (out["applied"], out["reloaded"], out["changed"]) == ("kernel", True, True)
    assert calls.read_text() == "-ra\n"
    rc, out = run(tmp_path, hosts=["node004"], **a)
    assert rc == 0 and (out["applied"], out["reloaded"], out["changed"]) == ("kernel", False, False)
    assert calls.read_text() == "-ra\n"
    rc, out = run(tmp_path, hosts=["node004"], **{**a, "apply": "none", "state": "absent"})
    assert rc == 0 and (out["applied"], out["reloaded"], out["changed"]) == ("none", False, True)
    assert calls.read_text() == "-ra\n"


def test_a_failing_exportfs_fails_the_run_with_its_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_exportfs(tmp_path, monkeypatch, rc=1)
    rc, out = run(tmp_path, hosts=["node004"], **args(tmp_path, tmp_path / "no.pid", apply="kernel"))
    assert rc != 0 and "exportfs -ra failed (exit 1)" in out["msg"] and "stand-in says no" in out["msg"]
    assert "node004" in (tmp_path / "exports").read_text()  # the lines stay, as the message says


def test_auto_is_ganesha_when_its_include_file_exists(tmp_path: Path) -> None:
    assert M.kind_of("auto", str(tmp_path / "missing.conf")) == "kernel"
    (tmp_path / "there.conf").write_text("")
    assert M.kind_of("auto", str(tmp_path / "there.conf")) == "ganesha"
    assert M.kind_of("kernel", str(tmp_path / "there.conf")) == "kernel"
