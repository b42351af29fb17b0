"""The journal's schema version and migrations, the read-only copy, and the pruning of old events."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from elb.core.model import NodeState, WitnessKeep
from elb.service import migrations
from elb.service.journal import Journal, JournalVersionError


def _version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def test_a_new_journal_has_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    Journal(path).close()
    assert _version(path) == migrations.CURRENT >= 1


def test_a_version_0_journal_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    old = sqlite3.connect(path)  # as elb wrote it before the schema had a version
    old.execute(
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL, launched_at REAL NOT NULL, "
        "instance_id TEXT, ready_at REAL, last_busy_at REAL, slots INTEGER, private_ip TEXT, "
        "instance_type TEXT, updated_at REAL NOT NULL, reason TEXT)"
    )
    old.execute("INSERT INTO nodes (name, state, launched_at, updated_at) VALUES ('node001', 'ready', 1.0, 2.0)")
    old.commit()
    old.close()
    assert _version(path) == 0
    j = Journal(path)
    assert j.node("node001") is not None
    j.close()
    assert _version(path) == migrations.CURRENT
    db = sqlite3.connect(path)
    assert "events_time" in {r[1] for r in db.execute("PRAGMA index_list(events)")}
    db.close()


def test_migrations_run_in_order_once(tmp_path: Path) -> None:
    ran: list[int] = []
    steps = (lambda db: ran.append(1), lambda db: ran.append(2), lambda db: ran.append(3))
    db = sqlite3.connect(tmp_path / "x.sqlite", isolation_level=None)
    db.execute("PRAGMA user_version = 1")
    assert migrations.migrate(db, "x", steps) == 2
    assert ran == [2, 3]
    assert migrations.migrate(db, "x", steps) == 0
    assert ran == [2, 3]
    assert migrations.version(db) == 3


def test_a_failed_migration_leaves_the_version(tmp_path: Path) -> None:
    def broken(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE t (x)")
        raise RuntimeError("boom")

    db = sqlite3.connect(tmp_path / "x.sqlite", isolation_level=None)
    with pytest.raises(RuntimeError):
        migrations.migrate(db, "x", (broken,))
    assert migrations.version(db) == 0
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchone() is None


def test_a_journal_from_a_newer_elb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    Journal(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {migrations.CURRENT + 1}")
    db.close()
    with pytest.raises(JournalVersionError, match="newer elb"):
        Journal(path)
    with pytest.raises(JournalVersionError, match="newer elb"):
        Journal.read_only(path)
    assert _version(path) == migrations.CURRENT + 1


def test_read_only_never_creates_nor_writes(tmp_path: Path) -> None:
    path = tmp_path / "state" / "journal.sqlite"
    j = Journal.read_only(path)
    assert j.nodes() == []
    j.close()
    assert not path.parent.exists()

    w = Journal(path)
    w.record("node001", NodeState.READY, 10.0)
    w.close()
    before = path.read_bytes()
    path.chmod(0o444)
    r = Journal.read_only(path)
    assert [n.name for n in r.nodes()] == ["node001"]
    r.record("node002", NodeState.REQUESTED, 20.0)  # goes to the copy only
    r.close()
    assert path.read_bytes() == before
    assert Journal.read_only(path).node("node002") is None


def test_read_only_migrates_an_old_journal_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL, launched_at REAL NOT NULL, "
        "instance_id TEXT, ready_at REAL, last_busy_at REAL, slots INTEGER, private_ip TEXT, "
        "instance_type TEXT, updated_at REAL NOT NULL, reason TEXT)"
    )
    old.execute("INSERT INTO nodes (name, state, launched_at, updated_at) VALUES ('node001', 'ready', 1.0, 2.0)")
    old.commit()
    old.close()
    j = Journal.read_only(path)
    assert j.node("node001").last_up_at is None  # type: ignore[union-attr]
    j.close()
    assert _version(path) == 0


def test_prune_keeps_new_events_and_the_last_of_live_nodes(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    day = 86400.0
    j.record("node001", NodeState.REQUESTED, 1 * day)
    j.record("node001", NodeState.READY, 2 * day)  # live, all old
    j.record("node002", NodeState.REQUESTED, 1 * day)
    j.record("node002", NodeState.TERMINATED, 2 * day)  # gone, all old
    j.record("node003", NodeState.REQUESTED, 1 * day)
    j.record("node003", NodeState.TERMINATED, 30 * day)  # gone, one new event
    assert j.prune_events(before=20 * day) == 3
    assert [e.state for e in j.events("node001")] == [NodeState.REQUESTED, NodeState.READY]
    assert j.events("node002") == []
    assert j.node("node002") is None  # a gone node with no event left is forgotten
    assert [e.state for e in j.events("node003")] == [NodeState.TERMINATED]
    assert j.node("node003") is not None


def test_recording_passes_prunes_by_the_configured_age(tmp_path: Path) -> None:
    day = 86400.0
    j = Journal(tmp_path / "j.sqlite", keep_events_days=10)
    j.record("node002", NodeState.TERMINATED, 1 * day)
    j.record_pass(5 * day, True, "x")
    assert len(j.events("node002")) == 1  # 4 days old: kept
    j.record_pass(12 * day, True, "x")
    assert j.events("node002") == []


def test_a_version_5_journal_gains_the_warm_pool_columns(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    migrations.migrate(db, "old", migrations.MIGRATIONS[:5])  # as elb wrote it before the warm pool
    db.execute("INSERT INTO nodes (name, state, launched_at, updated_at) VALUES ('node001', 'ready', 1.0, 2.0)")
    db.close()
    j = Journal(path)
    node = j.node("node001")
    assert node is not None and node.stopped_at is None and node.template_version is None
    j.record("node001", NodeState.STOPPING, 10.0, template_version="3")
    assert j.node("node001").stopped_at is None  # type: ignore[union-attr]
    stopped = j.record("node001", NodeState.STOPPED, 20.0)
    assert (stopped.stopped_at, stopped.template_version) == (20.0, "3")
    assert j.record("node001", NodeState.STARTING, 30.0).stopped_at == 20.0
    j.record("node001", NodeState.TERMINATED, 40.0)
    again = j.record("node001", NodeState.REQUESTED, 50.0)  # a new node under the old name
    assert (again.stopped_at, again.template_version) == (None, None)
    j.close()
    assert _version(path) == migrations.CURRENT


def test_a_version_8_journal_gains_the_nodes_last_keep_on_their_own_word(tmp_path: Path) -> None:
    """What the planner's witness hold reads (``planner.witness_hold``): kept across records and
    across a reopening (a restarted daemon), replaced by the next keep, gone with a new node."""
    path = tmp_path / "j.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    migrations.migrate(db, "old", migrations.MIGRATIONS[:8])  # as elb wrote it before the witness hold
    db.execute("INSERT INTO nodes (name, state, launched_at, updated_at) VALUES ('node001', 'ready', 1.0, 2.0)")
    db.close()
    j = Journal(path)
    assert j.node("node001").witness_keep is None  # type: ignore[union-attr]
    found = WitnessKeep(at=10.0, busy_at=5.0, found=True, why="it runs job processes")
    assert j.record("node001", NodeState.READY, 10.0, detail="kept: x", witness_keep=found).witness_keep == found
    j.record("node001", NodeState.READY, 11.0)
    j.close()
    j = Journal(path)
    assert j.node("node001").witness_keep == found  # type: ignore[union-attr]
    silent = WitnessKeep(at=20.0, busy_at=None, found=False, why="it could not be asked")
    assert j.record("node001", NodeState.READY, 20.0, witness_keep=silent).witness_keep == silent
    j.record("node001", NodeState.TERMINATED, 30.0)
    assert j.record("node001", NodeState.REQUESTED, 40.0).witness_keep is None  # a new node under the old name
    j.close()
    assert _version(path) == migrations.CURRENT
