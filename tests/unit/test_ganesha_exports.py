"""The nfs_server role's exports converter (roles/nfs_server/files/elb-ganesha-exports), run as
the role runs it, on files in a temporary directory: ganesha is stood in for by a process that
receives the SIGHUP (nfs-ganesha itself is exercised by the cluster tests)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "nfs_server" / "files" / "elb-ganesha-exports"


@pytest.fixture
def ganesha(tmp_path: Path) -> Iterator[Path]:
    """A process standing in for nfs-ganesha (it only has to take a SIGHUP), and its pid file."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(60)"]
    )
    pidfile = tmp_path / "ganesha.pid"
    pidfile.write_text(f"{proc.pid}\n")
    yield pidfile
    proc.kill()
    proc.wait()


def convert(tmp_path: Path, pidfile: Path, lock: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "--exports",
            str(tmp_path / "exports"),
            "--output",
            str(tmp_path / "ganesha-exports.conf"),
            "--pidfile",
            str(pidfile),
            "--lock",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_writes_the_export_blocks_and_says_changed_then_unchanged(tmp_path: Path, ganesha: Path) -> None:
    (tmp_path / "exports").write_text(
        "/home alpha.invalid(rw,no_root_squash) beta.invalid(rw)\n/opt/sge alpha.invalid(ro)\n"
    )
    lock = tmp_path / "lock"
    first = convert(tmp_path, ganesha, lock)
    assert first.communicate(timeout=30)[0].strip() == "changed" and first.returncode == 0
    text = (tmp_path / "ganesha-exports.conf").read_text()
    assert 'Path = "/home";' in text and 'Path = "/opt/sge";' in text and "Access_Type = RO;" in text
    again = convert(tmp_path, ganesha, lock)
    assert again.communicate(timeout=30)[0].strip() == "unchanged"


def test_a_run_waits_for_the_lock_so_concurrent_plays_cannot_interleave(tmp_path: Path, ganesha: Path) -> None:
    # Another run (another play) holds the lock: this run must not read the exports or write the
    # output until it is released, and then it reads the exports as they are at that time.
    (tmp_path / "exports").write_text("/home alpha.invalid(rw)\n")
    lock = tmp_path / "lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = convert(tmp_path, ganesha, lock)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and waiting.poll() is None:
            time.sleep(0.1)
        assert waiting.poll() is None, "the converter ran while another run held the lock"
        assert not (tmp_path / "ganesha-exports.conf").exists()
        (tmp_path / "exports").write_text("/home alpha.invalid(rw) beta.invalid(rw)\n")  # the other play's edit
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert out.strip() == "changed"
    text = (tmp_path / "ganesha-exports.conf").read_text()
    assert "Clients = " in text and text.count("EXPORT {") == 1
    assert "beta.invalid" in text  # the edit made while it waited is in what it wrote


def test_an_unusable_lock_is_a_clear_error(tmp_path: Path, ganesha: Path) -> None:
    (tmp_path / "exports").write_text("/home alpha.invalid(rw)\n")
    run = convert(tmp_path, ganesha, tmp_path / "missing-dir" / "lock")
    _, err = run.communicate(timeout=30)
    assert run.returncode == 1 and "cannot open the lock" in err
    assert not (tmp_path / "ganesha-exports.conf").exists()
