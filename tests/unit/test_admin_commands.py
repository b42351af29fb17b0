"""``elb nodes`` and ``elb history`` through the command line, with the in-memory SGE of
tests/unit/fakes.py (the factory hands it out) and a journal written by a real pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elb import factory
from elb.cli import main
from elb.config import load_config
from elb.daemon import Balancer
from elb.exitcodes import Exit
from elb.journal import Journal
from elb.model import NodeState
from elb.sge.errors import SgeError
from tests.unit.factories import T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, FakeSge]:
    """A config, and a journal in which a pass added two nodes; SGE then runs job 7 on node001."""
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 8}}\n")
    cfg = load_config(path)
    sge = FakeSge(T0, jobs=[pending(1, 20 * 60, slots=1, tasks=12)])
    journal = Journal(cfg.journal_path)
    bal = Balancer(cfg, sge=sge, journal=journal, cloud=FakeCloud(T0), provisioner=FakeProvisioner(sge))
    assert bal.run_pass().ok
    journal.close()
    sge.jobs = [running(7, "node001")]
    monkeypatch.setattr(factory, "make_sge", lambda cfg: sge)
    return path, sge


def test_nodes_lists_every_managed_node_with_its_jobs(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = setup
    assert main(["nodes", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["node", "state", "type"]
    rows = {line.split()[0]: line for line in out[1:]}
    assert set(rows) == {"node001", "node002"}
    assert rows["node001"].split()[1] == "ready" and rows["node001"].endswith("7")
    assert rows["node002"].endswith("-")


def test_nodes_json_for_scripts(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["sge_read"] is True
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["node001"]["jobs"] == [7]
    assert by_name["node001"]["idle_for"] is None  # busy now
    assert by_name["node002"]["state"] == NodeState.READY.value
    assert by_name["node002"]["jobs"] == []
    assert by_name["node002"]["instance_id"]


def test_nodes_without_sge_prints_the_journal_and_exits_4(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sge = setup

    def broken() -> None:
        raise SgeError("qstat: timed out")

    monkeypatch.setattr(sge, "read_snapshot", broken)
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.UNREADABLE
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["sge_read"] is False
    assert [n["jobs"] for n in doc["nodes"]] == [None, None]  # not known, not "none"
    assert "cannot read SGE" in captured.err


def test_history_of_a_node(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["history", "node001", "-c", str(path)]) == Exit.OK
    states = [line.split()[3] for line in capsys.readouterr().out.splitlines()]
    assert states[0] == "requested" and states[-1] == "ready"
    assert main(["history", "node001", "-c", str(path), "--json"]) == Exit.OK
    events = json.loads(capsys.readouterr().out)
    assert events[0]["state"] == "requested" and events[-1]["state"] == "ready"
    assert all(e["node"] == "node001" for e in events)


def test_history_of_an_unknown_node_says_so(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["history", "node099", "-c", str(path)]) == Exit.FAILED
    assert "no journal events for 'node099'" in capsys.readouterr().err
