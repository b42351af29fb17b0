"""The programs Slurm's power saving runs and the hand-off of their requests to the journal:
written atomically, read strictly, journalled once as each node's ask, bad files set aside and
never acted on; the programs fail when the daemon has not taken requests for too long."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import parse_config
from elb.core.scheduler import AskKind
from elb.schedulers.slurm.driver import Slurm
from elb.schedulers.slurm.programs import RESUME_FILE, resume, run
from elb.schedulers.slurm.requests import (
    ENV_DIR,
    RequestError,
    RequestKind,
    parse_nodes,
    pending,
    read,
    resume_detail,
    touch_heartbeat,
    write,
)
from elb.service.journal import Journal
from tests.unit.factories import T0
from tests.unit.slurm_fakes import FakeSlurm


def take(spool: Path, journal: Journal, now: float) -> tuple[str, ...]:
    """The daemon's intake of the requests in ``spool`` (the Slurm driver's ``take_requests``)."""
    cfg = parse_config({"scheduler": "slurm", "slurm": {"requests": str(spool)}})
    return Slurm(cfg, journal, FakeSlurm()).take_requests(now)


@pytest.fixture(autouse=True)
def _daemon_alive(tmp_path: Path) -> None:
    """The daemon takes requests (its heartbeat is fresh) unless a test says otherwise."""
    import time

    touch_heartbeat(tmp_path, time.time(), 3600)


def test_a_request_is_one_json_file_with_the_expanded_nodes(tmp_path: Path) -> None:
    path = write(tmp_path, RequestKind.RESUME, "node[001-003],gpu7", T0)
    assert path.suffix == ".json" and not list(tmp_path.glob(".*.tmp"))  # renamed into place
    assert json.loads(path.read_text()) == {
        "kind": "resume",
        "nodes": ["node001", "node002", "node003", "gpu7"],
        "time": T0,
        "detail": "",
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
    assert list(tmp_path.glob("*.json")) == []


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
    code = "import sys; from elb.schedulers.slurm.programs import resume; sys.exit(resume())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "node[010-011]"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = tmp_path.glob("*.json")
    assert read(path).nodes == ("node010", "node011")


def test_the_programs_fail_when_the_daemon_has_not_taken_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slurm then marks the nodes down at once rather than after its ResumeTimeout; the request
    is written all the same, for a daemon that comes back."""
    spool = tmp_path / "spool"
    spool.mkdir()
    assert run(RequestKind.RESUME, "node001", spool) == 1
    assert "the elb daemon has never taken a request" in capsys.readouterr().err
    import time

    long_ago = time.time() - 3600
    touch_heartbeat(spool, long_ago, 15)  # the daemon's last intake, an hour ago
    assert run(RequestKind.RESUME, "node002", spool) == 1
    assert "has not taken requests for" in capsys.readouterr().err
    assert len(pending(spool).requests) == 2
    journal = Journal(":memory:")
    take(spool, journal, long_ago + 10)  # a daemon whose clock says long ago
    assert run(RequestKind.SUSPEND, "node001", spool) == 1
    take(spool, journal, time.time())  # the daemon takes them now: it beats again
    assert run(RequestKind.SUSPEND, "node001", spool) == 0
    journal.close()


def test_the_resume_program_reads_slurms_resume_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm 23.02 and later: SLURM_RESUME_FILE names the jobs the nodes are for."""
    doc = {
        "all_nodes_resume": "node[001-002]",
        "jobs": [
            {"job_id": 12, "partition": "cloud", "nodes_alloc": "node[001-002]", "extra": None},
            {"job_id": "x"},
        ],
    }
    resume_file = tmp_path / "resume.json"
    resume_file.write_text(json.dumps(doc))
    assert resume_detail(resume_file) == "job 12 (partition cloud) on node[001-002]"
    assert resume_detail(tmp_path / "missing.json") == ""
    monkeypatch.setenv(RESUME_FILE, str(resume_file))
    assert run(RequestKind.RESUME, "node[001-002]", tmp_path) == 0
    (path,) = tmp_path.glob("*-resume.json")
    assert read(path).detail == "job 12 (partition cloud) on node[001-002]"


def test_the_daemon_journals_each_request_once_and_removes_its_file(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    write(spool, RequestKind.RESUME, "node[001-004]", T0)
    second = write(spool, RequestKind.SUSPEND, "node002", T0 + 60)
    kept = second.read_bytes()
    journal = Journal(tmp_path / "journal.db")
    assert take(spool, journal, T0 + 61) == (
        "Slurm asks to resume node[001-004]",
        "Slurm asks to suspend node002",
    )
    assert [p.name for p in spool.glob("*.json")] == []
    rows = journal.slurm_requests()
    assert [(r.kind, r.nodes, r.time) for r in rows] == [
        ("resume", "node[001-004]", T0),
        ("suspend", "node002", T0 + 60),
    ]
    # each node's latest word: node002's suspend replaced its resume
    asks = {a.node: (a.kind, a.since) for a in journal.asks()}
    assert asks == {
        "node001": (AskKind.WANT, T0),
        "node002": (AskKind.RELEASE, T0 + 60),
        "node003": (AskKind.WANT, T0),
        "node004": (AskKind.WANT, T0),
    }
    # elb crashed after journalling, before removing the file: the next pass does not journal it twice
    second.write_bytes(kept)
    assert take(spool, journal, T0 + 120) == () and len(journal.slurm_requests()) == 2
    journal.answer_ask("node001", T0, "ready", T0 + 200)
    assert [a.node for a in journal.asks()] == ["node003", "node004", "node002"]  # by when Slurm asked
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
    (said,) = take(tmp_path, journal, T0)
    assert "set aside" in said and "00000000000000000001-1-resume.json" in said
    assert journal.slurm_requests() == [] and journal.asks() == []
    assert [p.suffix for p in tmp_path.glob("0*")] == [".bad"]


def test_node_names_are_plain_host_names() -> None:
    assert parse_nodes("node[1-2]") == ("node1", "node2")
    with pytest.raises(RequestError):
        parse_nodes("node-$(id)")
