"""The journal's schema, as an ordered list of migrations.

``PRAGMA user_version`` holds how many of ``MIGRATIONS`` a journal has had: a new file is at 0
and gets them all; a journal written by an older elb gets the ones it lacks, in order, each in
one transaction with the version bump. A journal from a newer elb (a version past the end of the
list) is refused: this elb cannot know what the newer one stored.

Append a migration to change the schema; never edit one that shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Migration = Callable[[sqlite3.Connection], None]


class JournalVersionError(Exception):
    """The journal was written by a newer elb (its schema version is past what this one knows)."""


def _baseline(db: sqlite3.Connection) -> None:
    """Version 1: the tables as elb first shipped them, for a new file or a version-0 journal
    (which may lack the nodes' last_up_at column); an index on event times, for pruning."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL, launched_at REAL NOT NULL, "
        "instance_id TEXT, ready_at REAL, last_busy_at REAL, last_up_at REAL, slots INTEGER, private_ip TEXT, "
        "instance_type TEXT, updated_at REAL NOT NULL, reason TEXT)"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
        "node TEXT NOT NULL, state TEXT NOT NULL, instance_id TEXT, detail TEXT)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS events_node ON events(node, id)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS passes (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
        "ok INTEGER NOT NULL, added INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0, "
        "summary TEXT NOT NULL)"
    )
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    have = {str(row[1]) for row in db.execute("PRAGMA table_info(nodes)")}
    if "last_up_at" not in have:
        db.execute("ALTER TABLE nodes ADD COLUMN last_up_at REAL")
    db.execute("CREATE INDEX IF NOT EXISTS events_time ON events(time)")


def _node_group(db: sqlite3.Connection) -> None:
    """Version 2: the node group a node belongs to (``node_groups``; NULL: the first group)."""
    db.execute("ALTER TABLE nodes ADD COLUMN node_group TEXT")


def _slurm_requests(db: sqlite3.Connection) -> None:
    """Version 3: what Slurm's power saving asked (``elb.schedulers.slurm.requests``), one row a request:
    its kind, the nodes (a Slurm hostlist), when Slurm asked, the file it came in (unique: a
    request journalled twice is one row), and when elb carried it out (NULL: not yet)."""
    db.execute(
        "CREATE TABLE slurm_requests (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
        "kind TEXT NOT NULL, nodes TEXT NOT NULL, source TEXT NOT NULL UNIQUE, received_at REAL NOT NULL, "
        "done_at REAL, outcome TEXT)"
    )


def _node_timeline(db: sqlite3.Connection) -> None:
    """Version 4: each node's boot timeline (``elb.core.timeline``), one row a step it reached, the
    first time it reached it (``at``; NULL: reached at a time not journalled).

    The nodes a journal already holds get what their events tell: the first ``requested``,
    ``running`` and ``provisioning`` events, and the first ``ready`` event without a detail (the
    playbook's success; a ready event with a detail is a drain called off). A node the scheduler was
    seen to reach, or to run a job, gets ``registered`` or ``first_job`` without a time: when that
    first happened was not journalled, and no later pass may pass itself off as the first."""
    db.execute("CREATE TABLE node_timeline (name TEXT NOT NULL, step TEXT NOT NULL, at REAL, PRIMARY KEY (name, step))")
    for state, step, only_plain in (
        ("requested", "requested", False),
        ("running", "running", False),
        ("provisioning", "provisioning", False),
        ("ready", "provisioned", True),
    ):
        plain = " AND detail IS NULL" if only_plain else ""
        db.execute(
            "INSERT OR IGNORE INTO node_timeline (name, step, at) "  # noqa: S608 (constant fragments)
            f"SELECT node, ?, MIN(time) FROM events WHERE state = ?{plain} "
            "AND node IN (SELECT name FROM nodes) GROUP BY node",
            (step, state),
        )
    db.execute(
        "INSERT OR IGNORE INTO node_timeline (name, step, at) SELECT name, 'registered', NULL FROM nodes "
        "WHERE last_up_at IS NOT NULL"
    )
    db.execute(
        "INSERT OR IGNORE INTO node_timeline (name, step, at) SELECT name, 'first_job', NULL FROM nodes "
        "WHERE last_busy_at IS NOT NULL"
    )


def _job_interruptions(db: sqlite3.Connection) -> None:
    """Version 5: per job, how many spot interruptions requeued it, when last, and whether elb
    bound it to on-demand nodes (``elb.core.interruptions``)."""
    db.execute(
        "CREATE TABLE job_interruptions (job INTEGER PRIMARY KEY, times INTEGER NOT NULL, last_at REAL NOT NULL, "
        "moved INTEGER NOT NULL DEFAULT 0)"
    )


def _warm_pool(db: sqlite3.Connection) -> None:
    """Version 6: the warm pool (``elb.core.warmpool``): when a node was last stopped into it, and the
    launch template version it was launched with (NULL: not known), for its age limits."""
    db.execute("ALTER TABLE nodes ADD COLUMN stopped_at REAL")
    db.execute("ALTER TABLE nodes ADD COLUMN template_version TEXT")


def _node_asks(db: sqlite3.Connection) -> None:
    """Version 7: what a scheduler that asks for nodes by name (Slurm's power saving) last asked
    of each node, one row a node: the kind (``elb.core.scheduler.AskKind``), when it asked, what it
    said, the releases that failed and when to try again, and when elb answered it and how
    (NULL: open). A newer ask replaces an older one of the same node; the requests themselves
    stay in ``slurm_requests``."""
    db.execute(
        "CREATE TABLE node_asks (node TEXT PRIMARY KEY, kind TEXT NOT NULL, since REAL NOT NULL, "
        "detail TEXT NOT NULL DEFAULT '', received_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
        "retry_at REAL, answered_at REAL, answer TEXT)"
    )


def _job_hosts(db: sqlite3.Connection) -> None:
    """Version 8: the hosts each running job that spans hosts held, and its slots on each, as the
    passes' reads saw them (``elb.core.attribution.spanning_jobs``): one row a job, host and stretch
    of passes that saw it there, for ``elb spend`` where the accounting does not say."""
    db.execute(
        "CREATE TABLE job_hosts (job TEXT NOT NULL, host TEXT NOT NULL, slots INTEGER NOT NULL, "
        "first_seen REAL NOT NULL, last_seen REAL NOT NULL, PRIMARY KEY (job, host, first_seen))"
    )
    db.execute("CREATE INDEX job_hosts_last ON job_hosts(last_seen)")


def _witness_keeps(db: sqlite3.Connection) -> None:
    """Version 9: the last time each node was kept on its own word (``elb.core.model.WitnessKeep``):
    when, its ``last_busy_at`` then, whether it said it runs job processes (1) or could not be
    asked (0), and why (NULL: never kept so)."""
    for column in ("kept_at REAL", "kept_busy_at REAL", "kept_found INTEGER", "kept_why TEXT"):
        db.execute(f"ALTER TABLE nodes ADD COLUMN {column}")


def _event_causes(db: sqlite3.Connection) -> None:
    """Version 10: why a bring-up failed, as its recorder knew it (``elb.core.model.Cause``; NULL:
    not recorded, the back-off reads the detail, as for the events before this version)."""
    db.execute("ALTER TABLE events ADD COLUMN cause TEXT")


MIGRATIONS: tuple[Migration, ...] = (
    _baseline,
    _node_group,
    _slurm_requests,
    _node_timeline,
    _job_interruptions,
    _warm_pool,
    _node_asks,
    _job_hosts,
    _witness_keeps,
    _event_causes,
)
CURRENT = len(MIGRATIONS)


def version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def check_known(found: int, where: str, known: int = CURRENT) -> None:
    """Raise ``JournalVersionError`` when ``found`` is past what this elb knows."""
    if found > known:
        raise JournalVersionError(
            f"journal {where} has schema version {found}, this elb knows up to {known}: "
            "it was written by a newer elb; run that elb (or move the journal aside to start afresh)"
        )


def migrate(db: sqlite3.Connection, where: str, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring ``db`` (autocommit mode) to the last version; the number of migrations run."""
    found = version(db)
    check_known(found, where, len(migrations))
    for i in range(found, len(migrations)):
        db.execute("BEGIN IMMEDIATE")
        try:
            if version(db) == i:  # another process may have migrated meanwhile
                migrations[i](db)
                db.execute(f"PRAGMA user_version = {i + 1:d}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    return len(migrations) - found
