"""The munge role's key writer (roles/munge/files/munge_key_writer.py), run with python3 as the
role runs it (the key base64-encoded on stdin) on files in a temporary directory, as this user
and with a process directory of the test's own (no real munged is ever looked at or restarted);
its restart decision by its functions, the restart itself stood in for. Restarting real munged
daemons is the cluster tests' job."""

from __future__ import annotations

import base64
import grp
import json
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.unit.loadfile import load_file

WRITER = Path(__file__).resolve().parents[2] / "roles" / "munge" / "files" / "munge_key_writer.py"
KEY = bytes(range(256)) * 4  # munge's keys are binary: 1024 bytes here
OTHER = b"the image's own key" * 50
ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


@pytest.fixture(scope="module")
def writer() -> ModuleType:
    return load_file(WRITER, "munge_key_writer", bytecode=False)  # no __pycache__ in the role


def write(tmp_path: Path, key: bytes = KEY, *, owner: str = ME, stdin: str | None = None) -> tuple[int, dict[str, Any]]:
    """The writer run as the role runs it (``python3 -c SOURCE PATH``), the key at tmp/munge.key."""
    (tmp_path / "proc").mkdir(exist_ok=True)  # no munged runs there
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            WRITER.read_text(),
            str(tmp_path / "munge.key"),
            "--owner",
            owner,
            "--group",
            MY_GROUP,
            "--proc",
            str(tmp_path / "proc"),
            "--systemd-dir",
            str(tmp_path / "no-systemd"),
        ],
        input=base64.b64encode(key).decode() if stdin is None else stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stderr == ""
    (line,) = done.stdout.splitlines()
    return done.returncode, json.loads(line)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_key_is_written_mode_0400_and_a_second_run_writes_nothing(tmp_path: Path) -> None:
    rc, out = write(tmp_path)
    key = tmp_path / "munge.key"
    assert rc == 0 and out == {"changed": True, "restarted": False, "msg": "the key written"}
    assert key.read_bytes() == KEY and mode(key) == 0o400 and key.stat().st_uid == os.getuid()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["munge.key", "proc"]  # no file left beside it
    before = key.stat()
    rc, out = write(tmp_path)
    assert rc == 0 and out == {"changed": False, "restarted": False, "msg": "the key was there"}
    after = key.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )


def test_another_key_is_replaced(tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    key.write_bytes(OTHER)
    key.chmod(0o400)
    rc, out = write(tmp_path)
    assert rc == 0 and out["changed"] is True
    assert key.read_bytes() == KEY and mode(key) == 0o400


def test_the_same_key_readable_by_others_is_replaced_by_one_of_mode_0400(tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    key.write_bytes(KEY)
    key.chmod(0o644)
    old = key.stat().st_ino
    rc, out = write(tmp_path)
    assert rc == 0 and out["changed"] is True
    assert mode(key) == 0o400 and key.read_bytes() == KEY and key.stat().st_ino != old  # a new file, renamed


def test_a_link_at_the_keys_path_is_replaced_and_its_target_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(KEY)
    target.chmod(0o644)
    (tmp_path / "munge.key").symlink_to(target)
    rc, out = write(tmp_path)
    assert rc == 0 and out["changed"] is True
    assert not (tmp_path / "munge.key").is_symlink() and mode(tmp_path / "munge.key") == 0o400
    assert mode(target) == 0o644


def test_a_file_left_beside_the_key_by_a_cut_run_is_replaced(tmp_path: Path) -> None:
    stale = tmp_path / "munge.key.elb-new"
    stale.write_bytes(b"half a k")
    stale.chmod(0o644)
    rc, _ = write(tmp_path)
    assert rc == 0 and not stale.exists() and (tmp_path / "munge.key").read_bytes() == KEY


def test_the_new_file_is_mode_0400_and_the_owners_before_the_key_is_in_it(
    tmp_path: Path, writer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int]] = []
    real_write = os.write

    def spying_write(fd: int, data: bytes) -> int:
        st = os.fstat(fd)
        seen.append((stat.S_IMODE(st.st_mode), st.st_uid))
        return real_write(fd, data)

    old_umask = os.umask(0)  # the most open umask: the mode must not come from it
    try:
        monkeypatch.setattr(writer.os, "write", spying_write)
        writer.write_atomically(tmp_path / "munge.key", KEY, writer.owner_of(ME, MY_GROUP))
    finally:
        os.umask(old_umask)
    assert seen and all(s == (0o400, os.getuid()) for s in seen)


def test_a_node_without_the_munge_user_fails_in_one_line(tmp_path: Path) -> None:
    rc, out = write(tmp_path, owner="elb-no-such-user")
    assert rc == 1 and out == {
        "failed": True,
        "msg": "no user elb-no-such-user on this node: its image needs munge installed",
    }
    assert not (tmp_path / "munge.key").exists()


@pytest.mark.parametrize(("stdin", "why"), [("", "no key on stdin"), ("not base64!", "the key on stdin is not base64")])
def test_bad_input_fails_in_one_line_and_writes_nothing(tmp_path: Path, stdin: str, why: str) -> None:
    rc, out = write(tmp_path, stdin=stdin)
    assert rc == 1 and out == {"failed": True, "msg": why}
    assert not (tmp_path / "munge.key").exists()


def test_the_key_is_never_printed(tmp_path: Path) -> None:
    secret = b"SECRET-KEY-BYTES" * 8
    for _ in range(2):
        _, out = write(tmp_path, secret)
        assert "SECRET" not in json.dumps(out) and base64.b64encode(secret).decode() not in json.dumps(out)


def test_running_munged_are_found_by_name(tmp_path: Path, writer: ModuleType) -> None:
    for pid, name in [("12", "munged"), ("13", "slurmd"), ("14", "munged"), ("self", "munged")]:
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(f"{name}\n")
    assert sorted(writer.running_munged(tmp_path)) == [12, 14]


class Restarts:
    """The writer's restart stood in for: what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], bool]] = []

    def __call__(self, pids: list[int], owner: object, proc: Path, systemd: bool) -> None:
        self.calls.append((pids, systemd))


@pytest.fixture
def restarts(writer: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Restarts:
    stand_in = Restarts()
    monkeypatch.setattr(writer, "restart", stand_in)
    return stand_in


def node(tmp_path: Path, *, munged: bool, systemd: bool) -> tuple[Path, Path]:
    """A process directory (with a munged, pid 42, or none) and a systemd directory (there or not)."""
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "comm").write_text("munged\n" if munged else "sshd\n")
    sd = tmp_path / "systemd"
    if systemd:
        sd.mkdir()
    return proc, sd


@pytest.mark.parametrize("systemd", [True, False])
def test_a_running_munged_is_restarted_when_the_key_changed(
    tmp_path: Path, writer: ModuleType, restarts: Restarts, systemd: bool
) -> None:
    proc, sd = node(tmp_path, munged=True, systemd=systemd)
    key = tmp_path / "munge.key"
    key.write_bytes(OTHER)
    out = writer.give_key(key, KEY, writer.owner_of(ME, MY_GROUP), proc, sd)
    assert out == writer.Outcome(changed=True, replaced=True, restarted=True)
    assert restarts.calls == [([42], systemd)]
    # A second run: the key is the cluster's, munged runs with it.
    assert writer.give_key(key, KEY, writer.owner_of(ME, MY_GROUP), proc, sd).changed is False
    assert len(restarts.calls) == 1


def test_a_munged_is_not_restarted_for_a_mode_alone_nor_started_when_it_does_not_run(
    tmp_path: Path, writer: ModuleType, restarts: Restarts
) -> None:
    proc, sd = node(tmp_path, munged=True, systemd=True)
    key = tmp_path / "munge.key"
    key.write_bytes(KEY)
    key.chmod(0o640)
    out = writer.give_key(key, KEY, writer.owner_of(ME, MY_GROUP), proc, sd)
    assert out == writer.Outcome(changed=True, replaced=False, restarted=False) and restarts.calls == []
    proc, sd = node(tmp_path / "other", munged=False, systemd=True)
    out = writer.give_key(tmp_path / "other" / "munge.key", KEY, writer.owner_of(ME, MY_GROUP), proc, sd)
    assert out == writer.Outcome(changed=True, replaced=True, restarted=False) and restarts.calls == []


def test_the_restart_uses_systemd_where_it_runs_else_stops_and_starts_munged_as_its_user(
    tmp_path: Path, writer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[list[str]] = []
    steps: list[str] = []
    monkeypatch.setattr(writer, "run", ran.append)
    monkeypatch.setattr(writer, "stop", lambda pids, proc: steps.append(f"stop {pids}"))
    monkeypatch.setattr(writer, "RUN_DIR", str(tmp_path / "run-munge"))
    owner = writer.owner_of(ME, MY_GROUP)
    writer.restart([42], owner, tmp_path, True)
    assert ran == [["systemctl", "restart", "munge"]] and steps == []
    ran.clear()
    writer.restart([42], owner, tmp_path, False)
    assert steps == ["stop [42]"] and ran == [["runuser", "-u", ME, "--", "/usr/sbin/munged"]]
    assert mode(tmp_path / "run-munge") == 0o755


def test_a_failed_restart_fails_in_one_line(tmp_path: Path, writer: ModuleType) -> None:
    with pytest.raises(writer.WriterError, match=r"^elb-no-such-command: .*No such file"):
        writer.run(["elb-no-such-command"])
    with pytest.raises(writer.WriterError, match=r"exited 3: why$"):
        writer.run([sys.executable, "-c", "import sys; print('why', file=sys.stderr); sys.exit(3)"])


def test_a_restart_that_cannot_make_munges_runtime_directory_fails_in_one_line(
    tmp_path: Path, writer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(writer, "stop", lambda pids, proc: None)
    monkeypatch.setattr(writer, "RUN_DIR", str(tmp_path / "file" / "munge"))  # under a file: cannot be made
    with pytest.raises(writer.WriterError, match=r"^restarting munged: .*Not a directory"):
        writer.restart([42], writer.owner_of(ME, MY_GROUP), tmp_path, False)
