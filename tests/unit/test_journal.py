"""The SQLite journal: records survive a reopen, each step is logged, history is kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from elb.core.model import NodeState
from elb.service.journal import Journal


def test_steps_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state" / "journal.sqlite"
    j = Journal(path)
    j.record("node001", NodeState.REQUESTED, 100.0, detail="3 jobs waiting")
    j.record("node001", NodeState.LAUNCHING, 101.0)
    j.record("node001", NodeState.RUNNING, 130.0, instance_id="i-1", private_ip="10.0.0.5", launched_at=102.0)
    j.close()

    j = Journal(path)
    node = j.node("node001")
    assert node is not None
    assert node.state is NodeState.RUNNING
    assert node.launched_at == 102.0
    assert node.private_ip == "10.0.0.5"
    assert [e.state for e in j.events("node001")] == [
        NodeState.REQUESTED,
        NodeState.LAUNCHING,
        NodeState.RUNNING,
    ]
    assert j.events("node001")[0].detail == "3 jobs waiting"


def test_ready_at_set_once_and_gone_nodes_hidden(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    j.record("node001", NodeState.READY, 200.0)
    j.record("node001", NodeState.DRAINING, 250.0)
    j.record("node001", NodeState.READY, 260.0, detail="kept")
    assert j.node("node001").ready_at == 200.0  # type: ignore[union-attr]
    j.record("node002", NodeState.FAILED, 300.0)
    assert [n.name for n in j.nodes()] == ["node001"]
    assert [n.name for n in j.nodes(include_gone=True)] == ["node001", "node002"]


def test_history_and_passes(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    assert j.history().last_change_at is None
    j.note_change(10.0)
    j.note_removal(20.0)
    h = j.history()
    assert h.last_change_at == 20.0
    assert h.recent_removals == (20.0,)
    j.record_pass(30.0, True, "nothing to do")
    j.record_pass(90.0, False, "qstat failed")
    assert [(p.time, p.ok) for p in j.passes()] == [(30.0, True), (90.0, False)]


def test_hostile_names_are_data(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    name = "node'); DROP TABLE nodes;--"
    j.record(name, NodeState.REQUESTED, 1.0)
    assert j.node(name) is not None
    assert len(j.nodes()) == 1


def test_last_up_is_remembered_per_node(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    j.record("node001", NodeState.READY, 200.0)
    j.record("node002", NodeState.READY, 200.0)
    j.mark_seen(260.0, up=["node001"])
    j.mark_seen(270.0, up=[])
    assert j.node("node001").last_up_at == 260.0  # type: ignore[union-attr]
    assert j.node("node002").last_up_at is None  # type: ignore[union-attr]


def test_journal_of_an_older_elb_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    old = sqlite3.connect(path)  # the nodes table as the first release wrote it, with a node in it
    old.execute(
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL, launched_at REAL NOT NULL, "
        "instance_id TEXT, ready_at REAL, last_busy_at REAL, slots INTEGER, private_ip TEXT, "
        "instance_type TEXT, updated_at REAL NOT NULL, reason TEXT)"
    )
    old.execute("INSERT INTO nodes (name, state, launched_at, updated_at) VALUES ('node001', 'ready', 1.0, 2.0)")
    old.commit()
    old.close()
    j = Journal(path)
    assert j.node("node001").last_up_at is None  # type: ignore[union-attr]
    j.mark_seen(5.0, up=["node001"])
    assert j.node("node001").last_up_at == 5.0  # type: ignore[union-attr]
    j.close()
    assert Journal(path).node("node001").last_up_at == 5.0  # type: ignore[union-attr]
