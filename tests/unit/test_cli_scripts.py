"""The command line as scripts and operators use it: an order that names no node elb knows is
refused, ``--json`` always prints JSON (also when the answer is empty), ``validate`` and
``ec2-check`` print JSON on request, and ``elb completion`` prints a completion script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import load_config
from elb.core.exitcodes import Exit
from elb.core.model import NodeState
from elb.service.journal import Journal
from tests.unit.factories import T0


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "elb.yml"
    ansible = f"provision: {{private_data_dir: {tmp_path / 'ansible'}}}\n"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\n{ansible}")
    journal = Journal(load_config(path).journal_path)
    journal.record("node001", NodeState.READY, T0, instance_id="i-1", private_ip="10.0.0.1")
    journal.close()
    return path


def test_release_and_cancel_refuse_a_node_that_has_no_such_order(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["release", "node999", "-c", str(config)]) == Exit.FAILED
    assert "node999 is not kept" in capsys.readouterr().err
    assert main(["release", "node001", "-c", str(config)]) == Exit.FAILED  # known, but not kept
    assert main(["keep", "node001", "-c", str(config)]) == Exit.OK
    assert main(["release", "node001", "-c", str(config)]) == Exit.OK
    assert main(["remove", "node001", "--cancel", "-c", str(config)]) == Exit.FAILED
    assert "node001 is not ordered removed" in capsys.readouterr().err


def test_history_json_of_an_unknown_node_is_json(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "node999", "--json", "-c", str(config)]) == Exit.FAILED
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "no journal events for 'node999'" in captured.err


def test_validate_prints_json_on_request(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--offline", "--json", "-c", str(config)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"] == str(config.resolve()) and doc["offline"] is True
    assert doc["checks"][0]["what"] == "config" and doc["checks"][0]["ok"] is True
    assert {"what", "ok", "warning", "detail", "fix"} <= set(doc["checks"][1])
    assert doc["failed"] == sum(not c["ok"] for c in doc["checks"])
    assert code == (Exit.CONFIG if doc["failed"] else Exit.OK)


def test_validate_json_of_a_broken_config_is_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "elb.yml"
    bad.write_text("policy: {max_nodes: many}\n")
    assert main(["validate", "--json", "-c", str(bad)]) == Exit.CONFIG
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["failed"] == 1


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_know_every_verb(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == Exit.OK
    script = capsys.readouterr().out
    for verb in ("run", "once", "status", "simulate", "drain", "iam-policy", "completion"):
        assert verb in script
