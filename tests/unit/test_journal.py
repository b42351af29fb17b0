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


def _one_life(j: Journal, name: str, t: float, group: str | None = None) -> None:
    """A whole life of node ``name`` from ``t``: launched, running, ready, busy, up, terminated."""
    j.record(name, NodeState.REQUESTED, t, group=group)
    j.record(name, NodeState.LAUNCHING, t + 1)
    j.record(
        name,
        NodeState.RUNNING,
        t + 10,
        instance_id="i-1",
        private_ip="10.0.0.1",
        slots=2,
        instance_type="m5.large",
        launched_at=t + 2,
        template_version="7",
    )
    j.record(name, NodeState.READY, t + 20)
    j.mark_seen(t + 300, busy=[name], up=[name])
    j.record(name, NodeState.TERMINATED, t + 400)


def test_a_name_requested_again_after_its_node_went_starts_a_clean_life(tmp_path: Path) -> None:
    """Nothing of the gone node's life is the new node's: it launches now, with no instance,
    address, size, type, readiness, or last sight busy or up, in the group the request names."""
    j = Journal(tmp_path / "j.sqlite")
    _one_life(j, "node001", 100.0, group="big")
    again = j.record("node001", NodeState.REQUESTED, 1000.0, detail="asked again")
    assert again.launched_at == 1000.0
    cleared = (again.instance_id, again.private_ip, again.slots, again.instance_type, again.template_version)
    assert cleared == (None, None, None, None, None)
    assert (again.ready_at, again.last_busy_at, again.last_up_at, again.group) == (None, None, None, None)
    assert again.quiet_since == 1000.0
    j.record("node001", NodeState.LAUNCHING, 1001.0)
    j.record("node001", NodeState.RUNNING, 1010.0, instance_id="i-2", launched_at=1003.0)
    ready = j.record("node001", NodeState.READY, 1030.0)
    assert (ready.launched_at, ready.ready_at, ready.quiet_since) == (1003.0, 1030.0, 1030.0)
    # ``elb history``: each life's events carry its own instance, none the other's.
    by_state = [(e.state, e.instance_id) for e in j.events("node001")[-4:]]
    assert by_state == [
        (NodeState.REQUESTED, None),
        (NodeState.LAUNCHING, None),
        (NodeState.RUNNING, "i-2"),
        (NodeState.READY, "i-2"),
    ]


def test_a_request_again_keeps_what_it_is_given(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    _one_life(j, "node001", 100.0)
    again = j.record("node001", NodeState.REQUESTED, 1000.0, group="big", launched_at=990.0)
    assert (again.group, again.launched_at, again.instance_id) == ("big", 990.0, None)
