"""The Molecule runner's lock check (no cluster needed)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from tests.molecule.runner import cluster_lock, lock_held_by_this_process, scenarios


def test_lock_held_by_this_process_sees_only_our_own_flock(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    assert not lock_held_by_this_process(lock)  # no file
    lock.touch()
    assert not lock_held_by_this_process(lock)
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert lock_held_by_this_process(lock)
        other = tmp_path / "other"
        other.touch()
        assert not lock_held_by_this_process(other)
        fcntl.flock(f, fcntl.LOCK_UN)
    assert not lock_held_by_this_process(lock)


def test_lock_held_by_another_process_is_not_ours(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.touch()
    code = (
        "import fcntl, sys, time\n"
        f"f = open({str(lock)!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('locked', flush=True); sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "locked"
        try:
            assert not lock_held_by_this_process(lock)
            with lock.open("a") as f:  # and it really is held: a non-blocking flock fails
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    raise AssertionError("the child's lock was not held")
                except BlockingIOError:
                    pass
        finally:
            child.stdin.close()
            child.wait(timeout=10)


def test_cluster_lock_is_reentrant_for_this_process(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with cluster_lock(lock) as took:
        assert took
        assert lock_held_by_this_process(lock)
        with cluster_lock(lock) as took_again:  # would block forever without the check
            assert not took_again
        assert lock_held_by_this_process(lock)
    assert not lock_held_by_this_process(lock)


def test_scenarios_are_found() -> None:
    found = scenarios()
    assert "default" in found and "remove" in found
    assert "_shared" not in found
