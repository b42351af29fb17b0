"""The etc_hosts role's module (roles/etc_hosts/library/elb_hosts_line.py) on files in a
temporary directory: the edit itself, the file handling, the module's interface as Ansible
runs it, and plays editing one hosts file at the same time (processes sharing the lock)."""

from __future__ import annotations

import errno
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.unit import role_modules

MODULE_PATH = role_modules.module_path("etc_hosts", "elb_hosts_line")
M = role_modules.load("etc_hosts", "elb_hosts_line")

HOSTS = (
    b"127.0.0.1\tlocalhost\n"
    b"# the hosts of node004: a comment stays\n"
    b"::1     localhost ip6-localhost ip6-loopback\n"
    b"10.77.0.40\tnode0040\n"
    b"10.77.0.41 node004.example.org\n"
    b"\n"
    b"10.77.0.12 node002   # trailing comment\r\n"
    b"10.77.0.13\tnode003"  # no newline at the end
)


def edit(data: bytes, name: str, address: str | None = None, state: str = "present") -> bytes:
    out, _ = M.edit(data, name, address, state)
    assert isinstance(out, bytes)
    return out


# -- the edit ------------------------------------------------------------------------------


def test_add_appends_one_line_and_keeps_the_rest_byte_for_byte() -> None:
    out = edit(HOSTS, "node004", "10.77.0.14")
    assert out == HOSTS + b"\n10.77.0.14\tnode004\n"  # a newline first: the last line had none
    assert edit(b"", "node004", "10.77.0.14") == b"10.77.0.14\tnode004\n"
    assert edit(b"a b\n", "node004", "fd00::14") == b"a b\nfd00::14\tnode004\n"


def test_replace_changes_the_last_matching_line_only() -> None:
    data = b"# head\n10.0.0.9 node004 old-alias\n127.0.0.1 localhost\n10.0.0.8\tnode004\r\n# tail\n"
    out, found = M.edit(data, "node004", "10.77.0.14", "present")
    assert found == 2
    # As lineinfile with the same regexp: the last match is replaced (its CRLF ending kept).
    assert out == b"# head\n10.0.0.9 node004 old-alias\n127.0.0.1 localhost\n10.77.0.14\tnode004\r\n# tail\n"
    assert edit(b"10.0.0.9 node002  alias\n", "node002", "10.0.0.2") == b"10.0.0.2\tnode002\n"


def test_remove_drops_every_matching_line_and_nothing_else() -> None:
    data = HOSTS + b"\n10.77.0.14\tnode004\n10.0.0.9   node004 alias\n"
    out, found = M.edit(data, "node004", None, "absent")
    assert found == 2
    assert out == HOSTS + b"\n"
    assert edit(HOSTS, "node003", state="absent") == HOSTS[: -len(b"10.77.0.13\tnode003")]
    assert edit(HOSTS, "node002", state="absent") == HOSTS.replace(b"10.77.0.12 node002   # trailing comment\r\n", b"")


def test_the_name_matches_as_the_role_regexp_does() -> None:
    # Not matched: a name that only starts with it, a longer dotted name, a comment, an alias
    # position (the name must be the first name on the line), a regexp-like name's literal text.
    for line in (
        b"10.0.0.1 node0040",
        b"10.0.0.1 node004.example.org",
        b"# 10.0.0.1 node004",
        b"10.0.0.1 other node004",
        b"node004",
    ):
        assert M.edit(line + b"\n", "node004", None, "absent") == (line + b"\n", 0), line
    assert M.edit(b"10.0.0.1 nodeX04\n", "node.04", None, "absent")[1] == 0  # '.' is literal
    # Matched: the name after the first word, then the end or whitespace; a comment whose second
    # word is the name too (the regexp does not tell comments apart).
    for line in (
        b"10.0.0.1 node004",
        b"10.0.0.1\t node004\t",
        b"10.0.0.1 node004 a b",
        b"x\tnode004\r",
        b"# node004 x",
    ):
        assert M.edit(line + b"\n", "node004", None, "absent") == (b"", 1), line


def test_setting_or_removing_again_changes_nothing() -> None:
    once = edit(HOSTS, "node004", "10.77.0.14")
    assert edit(once, "node004", "10.77.0.14") == once
    gone = edit(once, "node004", state="absent")
    assert edit(gone, "node004", state="absent") == gone


@pytest.mark.parametrize(
    ("name", "address", "state", "message"),
    [
        ("node 004", "10.0.0.1", "present", "without whitespace"),
        ("node004\t", "10.0.0.1", "present", "without whitespace"),
        ("node\n004", None, "absent", "without whitespace"),
        ("", "10.0.0.1", "present", "without whitespace"),
        ("#node004", "10.0.0.1", "present", "'#'"),
        ("node004", "10.0.0.300", "present", "not an IPv4 or IPv6 address"),
        ("node004", "node004.example.org", "present", "not an IPv4 or IPv6 address"),
        ("node004", "10.0.0.1 evil", "present", "not an IPv4 or IPv6 address"),
        ("node004", None, "present", "address is required"),
        ("node004", "10.0.0.1", "gone", "present or absent"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    tmp_path: Path, name: str, address: str | None, state: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        M.edit(HOSTS, name, address, state)
    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    with pytest.raises(ValueError, match=message):
        M.update(str(hosts), name, address, state, lock_path=str(tmp_path / "lock"))
    assert hosts.read_bytes() == HOSTS


# -- the file ------------------------------------------------------------------------------


def test_update_replaces_the_file_keeping_its_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    hosts.chmod(0o640)
    inode = hosts.stat().st_ino
    r = M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    assert r.changed and not r.in_place and r.found == 0
    assert hosts.read_bytes() == HOSTS + b"\n10.77.0.14\tnode004\n"
    st = hosts.stat()
    assert st.st_mode & 0o7777 == 0o640
    assert st.st_ino != inode  # a new file renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts", "lock"]
    again = M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    assert not again.changed and again.found == 1
    assert hosts.stat().st_ino == st.st_ino and hosts.stat().st_mtime_ns == st.st_mtime_ns  # not rewritten


def test_a_file_that_cannot_be_renamed_over_is_rewritten_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hosts file bind-mounted into a container: rename(2) onto it fails with EBUSY."""

    def busy(src: str, dst: str) -> None:
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), dst)

    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    inode = hosts.stat().st_ino
    monkeypatch.setattr(M.os, "replace", busy)
    r = M.update(str(hosts), "node003", None, "absent", lock_path=str(tmp_path / "lock"))
    assert r.changed and r.in_place
    assert hosts.read_bytes() == HOSTS[: -len(b"10.77.0.13\tnode003")]
    assert hosts.stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts", "lock"]


def test_a_directory_without_room_for_a_new_file_gets_the_file_rewritten_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    monkeypatch.setattr(M.tempfile, "mkstemp", denied)
    r = M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    assert r.changed and r.in_place
    assert hosts.read_bytes() == HOSTS + b"\n10.77.0.14\tnode004\n"


def test_a_link_keeps_pointing_to_the_edited_file(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "hosts"
    target.write_bytes(HOSTS)
    (tmp_path / "hosts").symlink_to(target)
    M.update(str(tmp_path / "hosts"), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    assert (tmp_path / "hosts").is_symlink()
    assert target.read_bytes() == HOSTS + b"\n10.77.0.14\tnode004\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_the_owner_is_kept(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    os.chown(hosts, 4321, 4322)
    r = M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    assert r.changed and not r.in_place
    assert (hosts.stat().st_uid, hosts.stat().st_gid) == (4321, 4322)


def test_a_missing_file_is_an_error_to_add_to_and_nothing_to_remove_from(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    with pytest.raises(FileNotFoundError):
        M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    r = M.update(str(hosts), "node004", None, "absent", lock_path=str(tmp_path / "lock"))
    assert not r.changed and not hosts.exists()


def test_check_mode_writes_nothing_and_takes_no_lock(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    r = M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"), check=True)
    assert r.changed and r.before == HOSTS and r.after == HOSTS + b"\n10.77.0.14\tnode004\n"
    assert hosts.read_bytes() == HOSTS
    assert [p.name for p in tmp_path.iterdir()] == ["hosts"]


def test_the_lock_falls_back_to_tmp_when_its_directory_is_missing(tmp_path: Path) -> None:
    assert M.lock_file(str(tmp_path / "x.lock")) == str(tmp_path / "x.lock")
    assert M.lock_file(str(tmp_path / "no-such-dir" / "x.lock")) == "/tmp/x.lock"
    assert M.lock_file(M.DEFAULT_LOCK) in (M.DEFAULT_LOCK, "/tmp/elb-etc-hosts.lock")


def test_an_unusable_lock_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("")
    (tmp_path / "lock").symlink_to(tmp_path / "target")  # never followed
    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    with pytest.raises(OSError, match="cannot open the lock"):
        M.update(str(hosts), "node004", "10.77.0.14", "present", lock_path=str(tmp_path / "lock"))
    assert hosts.read_bytes() == HOSTS


# -- the module as Ansible runs it ----------------------------------------------------------


def run_module(tmp_path: Path, **args: Any) -> tuple[int, dict[str, Any]]:
    return role_modules.run(MODULE_PATH, tmp_path, **args)


def test_the_module_reports_changes_and_a_diff_and_supports_check_mode(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"127.0.0.1 localhost\n")
    base = {"name": "node004", "address": "10.77.0.14", "path": str(hosts), "lock_path": str(tmp_path / "lock")}
    rc, out = run_module(tmp_path, **base, _ansible_check_mode=True, _ansible_diff=True)
    assert rc == 0 and out["changed"] is True
    assert out["diff"]["before"] == "127.0.0.1 localhost\n"
    assert out["diff"]["after"] == "127.0.0.1 localhost\n10.77.0.14\tnode004\n"
    assert hosts.read_bytes() == b"127.0.0.1 localhost\n"
    rc, out = run_module(tmp_path, **base)
    assert rc == 0 and out["changed"] is True and out["lock_path"] == str(tmp_path / "lock")
    assert hosts.read_bytes() == b"127.0.0.1 localhost\n10.77.0.14\tnode004\n"
    rc, out = run_module(tmp_path, **base)
    assert rc == 0 and out["changed"] is False and out["found"] == 1
    rc, out = run_module(tmp_path, name="node004", state="absent", path=str(hosts), lock_path=str(tmp_path / "lock"))
    assert rc == 0 and out["changed"] is True
    assert hosts.read_bytes() == b"127.0.0.1 localhost\n"


def test_the_module_fails_with_the_reason(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"127.0.0.1 localhost\n")
    common = {"path": str(hosts), "lock_path": str(tmp_path / "lock")}
    rc, out = run_module(tmp_path, name="node 004", address="10.77.0.14", **common)
    assert rc != 0 and out["failed"] and "without whitespace" in out["msg"]
    rc, out = run_module(tmp_path, name="node004", address="10.77.0.999", **common)
    assert rc != 0 and "not an IPv4 or IPv6 address: '10.77.0.999'" in out["msg"]
    rc, out = run_module(tmp_path, name="node004", **common)
    assert rc != 0 and "address" in out["msg"]
    rc, out = run_module(tmp_path, name="node004", address="10.77.0.14", path=str(tmp_path / "none"))
    assert rc != 0 and out["msg"].startswith(f"cannot edit {tmp_path / 'none'}")
    assert hosts.read_bytes() == b"127.0.0.1 localhost\n"


def test_a_batch_of_names_is_edited_in_one_run_as_one_run_each_would(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(HOSTS)
    lock = str(tmp_path / "lock")
    batch = {"node002": "10.77.0.22", "node009": "10.77.0.29", "node010": "10.77.0.30"}
    rc, out = run_module(tmp_path, lines=batch, path=str(hosts), lock_path=lock)
    one_by_one = HOSTS
    for name, address in batch.items():
        one_by_one = edit(one_by_one, name, address)
    assert rc == 0 and out["changed"] is True and out["found"] == 1  # node002's line was there
    assert hosts.read_bytes() == one_by_one
    rc, out = run_module(tmp_path, lines=batch, path=str(hosts), lock_path=lock)
    assert rc == 0 and out["changed"] is False and out["found"] == 3
    rc, out = run_module(tmp_path, lines=dict.fromkeys(batch), state="absent", path=str(hosts), lock_path=lock)
    assert rc == 0 and out["changed"] is True
    removed = one_by_one
    for name in batch:
        removed = edit(removed, name, state="absent")
    assert hosts.read_bytes() == removed
    # A bad entry refuses the whole batch: nothing is written.
    before = hosts.read_bytes()
    rc, out = run_module(tmp_path, lines={"node011": "10.77.0.31", "node 12": "10.77.0.32"}, path=str(hosts))
    assert rc != 0 and "without whitespace" in out["msg"] and hosts.read_bytes() == before
    rc, out = run_module(tmp_path, name="node011", lines={"node012": "10.77.0.32"}, path=str(hosts))
    assert rc != 0 and "mutually exclusive" in out["msg"]


# -- plays at the same time -----------------------------------------------------------------

FORK = multiprocessing.get_context("fork")
WORKERS = 8
ROUNDS = 40


def _edits(worker: int, hosts: str, lock: str, start: Any) -> None:
    """One play's edits: add this worker's names one by one, remove its seeded ones."""
    start.wait()
    for r in range(ROUNDS):
        M.update(hosts, f"new{worker}-{r}", f"10.{worker}.{r // 256}.{r % 256}", "present", lock_path=lock)
        M.update(hosts, f"old{worker}-{r}", None, "absent", lock_path=lock)


def test_concurrent_edits_of_one_file_lose_nothing(tmp_path: Path) -> None:
    head = b"127.0.0.1\tlocalhost\n# managed in part by elb\n::1 localhost ip6-localhost\n\n"
    seeded = b"".join(f"10.99.{w}.{r}\told{w}-{r}\n".encode() for w in range(WORKERS) for r in range(ROUNDS))
    hosts = tmp_path / "hosts"
    hosts.write_bytes(head + seeded + b"# tail comment\n")
    start = FORK.Barrier(WORKERS)
    procs = [FORK.Process(target=_edits, args=(w, str(hosts), str(tmp_path / "lock"), start)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    data = hosts.read_bytes()
    assert data.startswith(head + b"# tail comment\n")
    added = data[len(head + b"# tail comment\n") :].splitlines()
    expected = {f"10.{w}.{r // 256}.{r % 256}\tnew{w}-{r}".encode() for w in range(WORKERS) for r in range(ROUNDS)}
    assert len(added) == len(expected) and set(added) == expected  # every add kept, every removal done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts", "lock"]


def _waiting_for(inode: int) -> bool:
    """Whether /proc/locks lists a process blocked on a flock of the file ``inode``."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and "FLOCK" in fields and fields[-3].rsplit(":", 1)[-1] == str(inode):
            return True
    return False


# A separate program, not a fork: a forked child would share the open lock of the test process.
ADD_NAME = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("elb_hosts_line", sys.argv[1])
m = importlib.util.module_from_spec(spec)
sys.modules["elb_hosts_line"] = m
spec.loader.exec_module(m)
m.update(sys.argv[2], "node004", "10.77.0.14", "present", lock_path=sys.argv[3])
"""


def test_an_edit_waits_for_the_lock_before_reading_the_file(tmp_path: Path) -> None:
    """Another play holds the lock: the edit reads the file only once it has the lock, so an edit
    made while it waited (here, the other play's) is in what it writes."""
    if not Path("/proc/locks").is_file():
        pytest.skip("no /proc/locks to see the waiting process")
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"127.0.0.1 localhost\n")
    lock = tmp_path / "lock"
    with lock.open("a") as held:
        M.fcntl.flock(held, M.fcntl.LOCK_EX)
        proc = subprocess.Popen([sys.executable, "-c", ADD_NAME, str(MODULE_PATH), str(hosts), str(lock)])
        deadline = time.monotonic() + 60
        while not _waiting_for(lock.stat().st_ino) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _waiting_for(lock.stat().st_ino), "the edit is not waiting for the lock"
        assert hosts.read_bytes() == b"127.0.0.1 localhost\n"
        hosts.write_bytes(edit(hosts.read_bytes(), "node002", "10.77.0.12"))  # the other play's edit
    assert proc.wait(60) == 0
    assert hosts.read_bytes() == b"127.0.0.1 localhost\n10.77.0.12\tnode002\n10.77.0.14\tnode004\n"
