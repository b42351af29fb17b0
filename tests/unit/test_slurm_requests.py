"""The programs Slurm's power saving runs and the hand-off of their requests to the journal:
written atomically, read strictly, journalled once, bad files set aside and never acted on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from elb.cli import main
from elb.journal import Journal
from elb.slurm.intake import take
from elb.slurm.programs import resume, run
from elb.slurm.requests import ENV_DIR, RequestError, RequestKind, parse_nodes, pending, read, write
from tests.unit.factories import T0


def test_a_request_is_one_json_file_with_the_expanded_nodes(tmp_path: Path) -> None:
    path = write(tmp_path, RequestKind.RESUME, "node[001-003],gpu7", T0)
    assert path.suffix == ".json" and not list(tmp_path.glob(".*.tmp"))  # renamed into place
    assert json.loads(path.read_text()) == {
        "kind": "resume",
        "nodes": ["node001", "node002", "node003", "gpu7"],
        "time": T0,
    }
    request = read(path)
    assert (request.kind, request.nodes, request.time) == (
        RequestKind.RESUME,
        ("node001", "node002", "node003", "gpu7"),
        T0,
    )


@pytest.mark.parametrize(
    ("hostlist", "message"),
    [
        ("", "no node named"),
        ("node[1-", "hostlist"),
        ("node[1-20000]", "more than 10000"),
        ("../etc/passwd", "not a node name"),
        ("a b", "not a node name"),
    ],
)
def test_a_bad_hostlist_writes_nothing(tmp_path: Path, hostlist: str, message: str) -> None:
    with pytest.raises(RequestError, match=re.escape(message)):
        write(tmp_path, RequestKind.SUSPEND, hostlist, T0)
    assert list(tmp_path.iterdir()) == []


def test_the_program_says_why_it_could_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(RequestKind.RESUME, "node001", tmp_path / "missing") == 1
    assert "elb slurm resume: cannot write the request in" in capsys.readouterr().err
    assert resume([]) == 2 and "usage: elb-slurm-resume HOSTLIST" in capsys.readouterr().err


def test_elb_slurm_resume_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slurm", "resume", "node[004-005]", "--dir", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("*.json")
    assert read(path).nodes == ("node004", "node005")
    assert main(["slurm", "suspend", "node004", "--dir", str(tmp_path)]) == 0
    assert main(["slurm", "resume-fail", "node005", "--dir", str(tmp_path)]) == 0
    kinds = [r.kind for r in pending(tmp_path).requests]
    assert kinds == [RequestKind.RESUME, RequestKind.SUSPEND, RequestKind.RESUME_FAIL]  # oldest first


def test_the_installed_program_reads_its_directory_from_the_environment(tmp_path: Path) -> None:
    # as slurmctld runs it: one hostlist argument, no option, the directory from its environment
    env = {**os.environ, ENV_DIR: str(tmp_path)}
    code = "import sys; from elb.slurm.programs import resume; sys.exit(resume())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "node[010-011]"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = tmp_path.glob("*.json")
    assert read(path).nodes == ("node010", "node011")


def test_the_daemon_journals_each_request_once_and_removes_its_file(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    write(spool, RequestKind.RESUME, "node[001-004]", T0)
    second = write(spool, RequestKind.SUSPEND, "node002", T0 + 60)
    kept = second.read_bytes()
    journal = Journal(tmp_path / "journal.db")
    intake = take(spool, journal, T0 + 61)
    assert [(r.kind, r.nodes) for r in intake.new] == [
        (RequestKind.RESUME, ("node001", "node002", "node003", "node004")),
        (RequestKind.SUSPEND, ("node002",)),
    ]
    assert list(spool.iterdir()) == []
    rows = journal.slurm_requests(open_only=True)
    assert [(r.kind, r.nodes, r.time) for r in rows] == [
        ("resume", "node[001-004]", T0),
        ("suspend", "node002", T0 + 60),
    ]
    # elb crashed after journalling, before removing the file: the next pass does not journal it twice
    second.write_bytes(kept)
    assert take(spool, journal, T0 + 120).new == () and len(journal.slurm_requests()) == 2
    journal.close_slurm_request(rows[0].id, T0 + 200, "4 nodes launched")
    assert [r.kind for r in journal.slurm_requests(open_only=True)] == ["suspend"]
    journal.close()


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"kind": "reboot", "nodes": ["n1"], "time": 1}',
        b'{"kind": "resume", "nodes": "n1", "time": 1}',
        b'{"kind": "resume", "nodes": ["n1;rm -rf /"], "time": 1}',
        b'{"kind": "resume", "nodes": [], "time": 1}',
        b'{"kind": "resume", "nodes": ["n1"], "time": true}',
        b'{"kind": "resume", "nodes": ["n1"]}',
    ],
)
def test_a_file_that_is_not_a_request_is_set_aside_never_acted_on(tmp_path: Path, body: bytes) -> None:
    (tmp_path / "00000000000000000001-1-resume.json").write_bytes(body)
    journal = Journal(":memory:")
    intake = take(tmp_path, journal, T0)
    assert intake.new == () and len(intake.bad) == 1 and "00000000000000000001-1-resume.json" in intake.bad[0]
    assert journal.slurm_requests() == []
    assert [p.suffix for p in tmp_path.iterdir()] == [".bad"]


def test_node_names_are_plain_host_names() -> None:
    assert parse_nodes("node[1-2]") == ("node1", "node2")
    with pytest.raises(RequestError):
        parse_nodes("node-$(id)")
