"""The test cluster's daemons signalled by their pid files (``elbdev.testcluster.pids``): a pid
file whose number names another process (the daemon died hard, the number came round again on
a machine whose pids wrap at 32,768) is no daemon, and that process gets no signal. A ``sleep``
stands in for the daemon and for the other process: real processes, named as the kernel names
them."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from elbdev.testcluster import pids


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def _pidfile(tmp_path: Path, pid: int) -> Path:
    path = tmp_path / "daemon.pid"
    path.write_text(f"{pid}\n")
    return path


def test_a_number_that_names_another_process_is_no_daemon_and_gets_no_signal(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    stale = _pidfile(tmp_path, sleeper.pid)  # slurmctld's file, the number now a sleep's
    assert pids.pid_of(stale, "slurmctld") is None
    pids.terminate(stale, "slurmctld", timeout=0.5)
    assert sleeper.poll() is None  # not signalled
    assert pids.Held.of(stale, "slurmctld") is None
    pids.stop(stale, "slurmctld", timeout=0.5)
    assert sleeper.poll() is None  # not signalled
    assert not stale.exists()  # the stale file goes


def test_the_daemon_under_its_number_is_found_stopped_and_continued(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = _pidfile(tmp_path, sleeper.pid)
    assert pids.pid_of(path, "sleep") == sleeper.pid
    held = pids.Held.of(path, "sleep")
    assert held is not None
    try:
        assert held.send(signal.SIGSTOP) and held.send(signal.SIGCONT)
        assert not held.exited_within(0.1)
    finally:
        held.close()
    pids.stop(path, "sleep", timeout=5)
    assert sleeper.wait(5) == -signal.SIGTERM
    assert not path.exists()
    assert pids.pid_of(path, "sleep") is None


def test_a_held_daemon_that_exits_is_seen_gone_and_its_number_never_names_another(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = _pidfile(tmp_path, sleeper.pid)
    held = pids.Held.of(path, "sleep")
    assert held is not None
    try:
        sleeper.kill()
        sleeper.wait()
        assert held.exited_within(5)
        assert not held.send(signal.SIGTERM)  # the pidfd names the process that ended, no other
    finally:
        held.close()
    assert pids.Held.of(path, "sleep") is None  # (its number names no process of that name)


def test_a_missing_or_unreadable_pid_file_is_no_daemon(tmp_path: Path) -> None:
    assert pids.pid_of(tmp_path / "none.pid", "sleep") is None
    (tmp_path / "bad.pid").write_text("not a number\n")
    assert pids.pid_of(tmp_path / "bad.pid", "sleep") is None
    assert pids.Held.of(tmp_path / "none.pid", "sleep") is None
