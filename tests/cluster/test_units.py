"""Fast tests of the test cluster's pure parts (no root, no cluster): they run everywhere.

The exports converter runs as a real subprocess on real files; the process it signals is a
real child process of the test.
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elb.clouds.local import _parse_time
from elbdev.testcluster import mount_nfs
from elbdev.testcluster.cluster import _recap
from elbdev.testcluster.master import in_master

REPO = Path(__file__).resolve().parents[2]
CONVERTER = REPO / "roles" / "nfs_server" / "files" / "elb-ganesha-exports"

HUP_COUNTER = """
import signal, sys, time
n = 0
def hup(*_):
    global n
    n += 1
    open(sys.argv[1], "w").write(str(n))
signal.signal(signal.SIGHUP, hup)
open(sys.argv[1], "w").write("ready")
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def hup_process(tmp_path: Path):  # type: ignore[no-untyped-def]
    count = tmp_path / "hups"
    proc = subprocess.Popen([sys.executable, "-c", HUP_COUNTER, str(count)])
    deadline = time.monotonic() + 10
    while not count.exists() or count.read_text() != "ready":
        assert time.monotonic() < deadline, "helper process did not start"
        time.sleep(0.05)
    pidfile = tmp_path / "pid"
    pidfile.write_text(f"{proc.pid}\n")
    yield pidfile, count
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def _convert(exports: Path, output: Path, pidfile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CONVERTER), "--exports", str(exports), "--output", str(output), "--pidfile", str(pidfile)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_ganesha_exports_follow_etc_exports_and_reload_only_on_change(tmp_path: Path, hup_process) -> None:  # type: ignore[no-untyped-def]
    pidfile, count = hup_process
    exports = tmp_path / "exports"
    output = tmp_path / "elb-exports.conf"
    exports.write_text(
        "# header\n"
        "/home 127.0.0.1(rw,sync,no_root_squash,no_subtree_check)\n"
        "/srv/common 127.0.0.1(rw,sync,no_root_squash)\n"
        "/home 127.0.0.2(ro,root_squash)\n"
    )
    first = _convert(exports, output, pidfile)
    assert (first.returncode, first.stdout.strip()) == (0, "changed"), first.stderr
    text = output.read_text()
    assert text.count("EXPORT {") == 2
    home = text[text.index('Path = "/home"') :].split("\n}\n")[0]
    assert "Clients = 127.0.0.1;" in home and "Access_Type = RW;" in home and "Squash = No_Root_Squash;" in home
    assert "Clients = 127.0.0.2;" in home and "Access_Type = RO;" in home and "Squash = Root_Squash;" in home
    deadline = time.monotonic() + 10
    while count.read_text() != "1":
        assert time.monotonic() < deadline, "no SIGHUP arrived"
        time.sleep(0.05)

    again = _convert(exports, output, pidfile)
    assert (again.returncode, again.stdout.strip()) == (0, "unchanged")
    time.sleep(0.3)
    assert count.read_text() == "1"

    exports.write_text("# nothing exported\n")
    last = _convert(exports, output, pidfile)
    assert last.stdout.strip() == "changed"
    assert "EXPORT" not in output.read_text()


def test_ganesha_exports_refuses_an_unreadable_exports_line(tmp_path: Path, hup_process) -> None:  # type: ignore[no-untyped-def]
    pidfile, count = hup_process
    exports = tmp_path / "exports"
    output = tmp_path / "out.conf"
    exports.write_text("not-a-path host(rw)\n")
    proc = _convert(exports, output, pidfile)
    assert proc.returncode == 1 and "cannot read exports line" in proc.stderr
    assert not output.exists()
    assert count.read_text() == "ready"


def test_mount_helper_arguments() -> None:
    assert mount_nfs._parse_args(["master:/home", "/home", "-o", "rw,hard,nolock"]) == (
        "master:/home",
        "/home",
        {"rw": "", "hard": "", "nolock": ""},
        False,
    )
    assert mount_nfs._parse_args(["-v", "m:/x", "/y", "--serve"])[3] is True
    with pytest.raises(SystemExit):
        mount_nfs._parse_args(["/home"])
    with pytest.raises(SystemExit):
        mount_nfs._parse_args(["nohostpart", "/home"])


def test_mount_helper_errno_mapping() -> None:
    class NfsLikeError(Exception):
        code_name = "NFS3ERR_NOTEMPTY"

    assert mount_nfs._errno_of(NfsLikeError()) == errno.ENOTEMPTY
    assert mount_nfs._errno_of(FileNotFoundError()) == errno.ENOENT
    assert mount_nfs._errno_of(OSError(errno.EACCES, "denied")) == errno.EACCES
    assert mount_nfs._errno_of(RuntimeError("?")) == errno.EIO


def test_podman_time_parsing() -> None:
    assert _parse_time("2026-11-22T05:04:50.179406400Z") == pytest.approx(1795323890.1794064)
    assert _parse_time("2026-11-22T06:04:50+01:00") == pytest.approx(1795323890.0)
    assert _parse_time("yesterday") == 0.0


def test_recap_parsing_stops_at_the_recap() -> None:
    out = (
        "TASK [x] ***\nok: [node001]\n\nPLAY RECAP ***\n"
        "node001                    : ok=38   changed=0    unreachable=0    failed=0\n"
        "node002                    : ok=3    changed=2    unreachable=1    failed=0\n"
        "\nTASKS RECAP ***\nsge_exec : Start ---- 5.15s\n"
    )
    recap = _recap(out)
    assert recap == {
        "node001": {"ok": 38, "changed": 0, "unreachable": 0, "failed": 0},
        "node002": {"ok": 3, "changed": 2, "unreachable": 1, "failed": 0},
    }


def test_commands_on_the_master_are_argument_lists() -> None:
    hostile = "x; rm -rf /"
    argv = in_master(["echo", hostile], user="sgeuser")
    assert argv[:3] == ["nsenter", argv[1], "--"] and argv[1].startswith("--uts=")
    assert argv[3:6] == ["runuser", "-u", "sgeuser"]
    assert argv[-2:] == ["echo", hostile]
    assert "SGE_ROOT=/var/lib/gridengine" in argv
