"""Fast tests of the test cluster's pure parts (no root, no cluster): they run everywhere."""

from __future__ import annotations

import errno

import pytest

from elb.clouds.local import _parse_time
from elbdev.testcluster import mount_nfs
from elbdev.testcluster.cluster import _recap
from elbdev.testcluster.master import in_master


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
