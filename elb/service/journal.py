"""The lifecycle journal: a small SQLite database of every node elb manages and each step it takes.

A step is recorded *before* it starts, so after a crash elb knows what was in flight.
This module is the only one that touches the database.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from elb.core.attribution import SeenOn
from elb.core.model import Cause, Event, History, Node, NodeState, WitnessKeep
from elb.core.orders import Orders
from elb.core.scheduler import Ask, AskKind
from elb.core.tagplan import TagRefusal
from elb.core.timeline import Step, Timeline, timeline_of
from elb.service import migrations
from elb.service.migrations import JournalVersionError

__all__ = ["Journal", "JournalError", "JournalVersionError", "PassRecord"]

_NODE_COLUMNS = (
    "name, state, launched_at, instance_id, ready_at, last_busy_at, last_up_at, slots, private_ip, instance_type, "
    "updated_at, node_group, stopped_at, template_version, kept_at, kept_busy_at, kept_found, kept_why"
)
# A node's own facts, of one life: a node requested under the name of a gone one has none of them
# until given (``Journal.record``); launched_at, state, updated_at and reason are set anew besides.
_KEPT_COLUMNS = ("kept_at", "kept_busy_at", "kept_found", "kept_why")
_LIFE_COLUMNS = (
    "instance_id",
    "ready_at",
    "last_busy_at",
    "last_up_at",
    "slots",
    "private_ip",
    "instance_type",
    "node_group",
    "stopped_at",
    "template_version",
    *_KEPT_COLUMNS,
)
_GONE = (NodeState.TERMINATED.value, NodeState.FAILED.value)
_KEEP_PASSES = 50_000
_KEEP_LIVE_EVENTS = 50  # a live node keeps at least its newest events, however old
_PRUNE_EVERY = 3600.0  # seconds between two prunings of old events
_JOB_HOSTS_GAP = 900.0  # seconds: a job seen on a host again within this goes on the same stretch
log = logging.getLogger("elb.service.journal")
P = ParamSpec("P")
R = TypeVar("R")


class JournalError(Exception):
    """The journal cannot be opened or read (the message names the file)."""


@dataclass(frozen=True, slots=True)
class PassRecord:
    time: float
    ok: bool
    added: int
    removed: int
    summary: str


@dataclass(frozen=True, slots=True)
class SlurmRequestRecord:
    """A journalled request of Slurm's power saving (``elb.schedulers.slurm.requests``)."""

    id: int
    time: float  # when Slurm asked
    kind: str  # resume, suspend, resume-fail
    nodes: str  # a Slurm hostlist
    received_at: float
    done_at: float | None
    outcome: str | None


def _event(row: Sequence[object]) -> Event:
    """An event from its row: time, node, state, instance, detail, cause (NULL in rows written
    before causes were recorded, and in events of no failure)."""
    t, n, s, i, d, c = row
    return Event(
        float(t),  # type: ignore[arg-type]
        str(n),
        NodeState(str(s)),
        None if i is None else str(i),
        None if d is None else str(d),
        None if c is None else Cause(str(c)),
    )


def _changes(state: NodeState, now: float, detail: str | None, *, anew: bool) -> dict[str, tuple[str, object]]:
    """What recording ``state`` at ``now`` sets in a node's record, column by column (its SQL
    expression with one ``?``, and the value for it), before the values the call gives. ``anew``:
    a node requested under the name of a gone one: its record is a new life's, nothing of the
    old node's kept (launched now, no instance, address, size, type, readiness, last sight busy
    or up, node group, stop, template version nor keep until given)."""
    sets: dict[str, tuple[str, object]] = {
        "state": ("?", state.value),
        "updated_at": ("?", now),
        "reason": ("?", detail),
    }
    if anew:
        sets.update(dict.fromkeys(_LIFE_COLUMNS, ("?", None)))
        sets["launched_at"] = ("?", now)
    if state is NodeState.READY:
        sets["ready_at"] = ("COALESCE(ready_at, ?)", now)
    elif state is NodeState.STOPPED:
        sets["stopped_at"] = ("?", now)
    elif state is NodeState.STARTING:  # ready again once started: idle from then on
        sets["ready_at"] = ("?", None)
    elif state is NodeState.REQUESTED:  # a new node under this name: no stop, template version nor keep of the old one
        sets.update(dict.fromkeys(("stopped_at", "template_version", *_KEPT_COLUMNS), ("?", None)))
    return sets


def _locked(method: Callable[P, R]) -> Callable[P, R]:
    """Hold the journal's lock for the whole call: the pass and the operations running in the
    background share one connection, and a transaction must not interleave with another."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with args[0]._lock:  # type: ignore[attr-defined]
            return method(*args, **kwargs)

    return wrapper


class Journal:
    """Node records and their history. One connection, shared by the pass and the node
    operations running in the background: every method holds the journal's lock."""

    def __init__(self, path: Path | str, *, keep_events_days: float | None = None) -> None:
        """Open (creating and migrating as needed) the journal at ``path``.

        ``keep_events_days``: events older than this are pruned as passes are recorded (see
        ``prune_events``); None keeps them all.
        """
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._path = str(path)
        self._lock = threading.RLock()
        self.keep_events_days = keep_events_days
        self._pruned_at: float | None = None
        # Told of each boot step the journal records for the first time (the metrics' histogram).
        self.on_step: Callable[[Timeline, Step], None] | None = None
        self._db = self._connect()

    @classmethod
    def read_only(cls, path: Path) -> Journal:
        """A copy in memory of the journal at ``path``, read with ``mode=ro``: the file is neither
        created nor written (writes go to the copy). No file: an empty journal ("no nodes yet").
        A journal of an older schema is migrated in the copy; a newer one is refused."""
        journal = cls(":memory:")
        if not path.exists():
            return journal
        try:
            source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        except sqlite3.Error as err:
            journal.close()
            raise JournalError(f"journal {path}: cannot be read: {err}") from None
        try:
            migrations.check_known(migrations.version(source), str(path))
            copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            source.backup(copy)
        except sqlite3.Error as err:
            journal.close()
            raise JournalError(f"journal {path}: cannot be read: {err}") from None
        except JournalVersionError:
            journal.close()
            raise
        finally:
            source.close()
        journal._db.close()
        journal._db = copy
        migrations.migrate(copy, f"{path} (copy in memory)")
        return journal

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            migrations.check_known(migrations.version(db), self._path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            migrations.migrate(db, self._path)
        except BaseException:
            db.close()
            raise
        return db

    @_locked
    def close(self) -> None:
        self._db.close()

    @_locked
    def ensure_open(self) -> None:
        """Reconnect if the connection was closed or broke (the database file is the state)."""
        try:
            self._db.execute("SELECT 1").fetchone()
        except (sqlite3.ProgrammingError, sqlite3.OperationalError):
            self._db = self._connect()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- nodes ---------------------------------------------------------------------------
    @staticmethod
    def _node(row: Sequence[object]) -> Node:
        name, state, launched, iid, ready, busy, up, slots, ip, itype, updated, group, stopped, version = row[:14]
        return Node(
            name=str(name),
            state=NodeState(str(state)),
            launched_at=float(launched),  # type: ignore[arg-type]
            instance_id=iid if iid is None else str(iid),
            ready_at=None if ready is None else float(ready),  # type: ignore[arg-type]
            last_busy_at=None if busy is None else float(busy),  # type: ignore[arg-type]
            last_up_at=None if up is None else float(up),  # type: ignore[arg-type]
            slots=None if slots is None else int(slots),  # type: ignore[call-overload]
            private_ip=ip if ip is None else str(ip),
            instance_type=itype if itype is None else str(itype),
            updated_at=None if updated is None else float(updated),  # type: ignore[arg-type]
            group=group if group is None else str(group),
            stopped_at=None if stopped is None else float(stopped),  # type: ignore[arg-type]
            template_version=version if version is None else str(version),
            witness_keep=Journal._witness_keep(row[14:]),
        )

    @staticmethod
    def _witness_keep(row: Sequence[object]) -> WitnessKeep | None:
        """A node's last keep on its own word, from its record's kept_* columns (None: never)."""
        at, busy, found, why = row
        if at is None:
            return None
        return WitnessKeep(
            at=float(at),  # type: ignore[arg-type]
            busy_at=None if busy is None else float(busy),  # type: ignore[arg-type]
            found=bool(found),
            why=str(why or ""),
        )

    @_locked
    def nodes(self, *, include_gone: bool = False) -> list[Node]:
        """Node records, oldest first; terminated and failed ones only if asked."""
        sql = f"SELECT {_NODE_COLUMNS} FROM nodes"  # noqa: S608 (constant column list)
        args: tuple[str, ...] = ()
        if not include_gone:
            sql += " WHERE state NOT IN (?, ?)"
            args = _GONE
        rows = self._db.execute(sql + " ORDER BY launched_at, name", args).fetchall()
        return [self._node(r) for r in rows]

    @_locked
    def node(self, name: str) -> Node | None:
        sql = f"SELECT {_NODE_COLUMNS} FROM nodes WHERE name = ?"  # noqa: S608 (constant column list)
        row = self._db.execute(sql, (name,)).fetchone()
        return None if row is None else self._node(row)

    @_locked
    def record(
        self,
        name: str,
        state: NodeState,
        now: float,
        *,
        detail: str | None = None,
        instance_id: str | None = None,
        private_ip: str | None = None,
        slots: int | None = None,
        instance_type: str | None = None,
        launched_at: float | None = None,
        group: str | None = None,
        step: Step | None = None,
        template_version: str | None = None,
        witness_keep: WitnessKeep | None = None,
        cause: Cause | None = None,
    ) -> Node:
        """Move a node to ``state`` (creating its record if new) and log the step. ``group``:
        its node group (kept once set). ``step``: the boot step (``elb.core.timeline``) this reaches,
        recorded at ``now`` unless the node reached it before. A node requested under the name of
        a gone one (terminated or failed) starts a life of its own: a timeline of its own, and a
        record with nothing of the gone node's (launched ``now``, its instance, address, size,
        type, readiness, last sight busy or up, node group and keep none until given, see
        ``_LIFE_COLUMNS``). Recorded ``stopped``, its ``stopped_at`` is
        ``now``; ``template_version``: the launch template version it runs (kept once set);
        ``witness_keep``: the node was kept on its own word (kept until the next such keep, or a
        node requested anew under its name); ``cause``: why a bring-up failed, in the event."""
        new_step = False
        with self._tx() as db:
            row = db.execute("SELECT state FROM nodes WHERE name = ?", (name,)).fetchone()
            exists = row is not None
            fresh = state is NodeState.REQUESTED and (row is None or str(row[0]) in _GONE)
            if fresh:
                db.execute("DELETE FROM node_timeline WHERE name = ?", (name,))
            if not exists:
                db.execute(
                    "INSERT INTO nodes (name, state, launched_at, updated_at) VALUES (?, ?, ?, ?)",
                    (name, state.value, launched_at if launched_at is not None else now, now),
                )
            sets = _changes(state, now, detail, anew=fresh and exists)
            for col, val in (
                ("instance_id", instance_id),
                ("private_ip", private_ip),
                ("slots", slots),
                ("instance_type", instance_type),
                ("launched_at", launched_at if exists else None),
                ("node_group", group),
                ("template_version", template_version),
            ):
                if val is not None:
                    sets[col] = ("?", val)
            if witness_keep is not None:
                keep = (witness_keep.at, witness_keep.busy_at, int(witness_keep.found), witness_keep.why)
                sets.update({col: ("?", val) for col, val in zip(_KEPT_COLUMNS, keep, strict=True)})
            assignments = ", ".join(f"{col} = {expr}" for col, (expr, _) in sets.items())
            values = [val for _, val in sets.values()]
            db.execute(f"UPDATE nodes SET {assignments} WHERE name = ?", (*values, name))  # noqa: S608 (constant columns)
            iid = db.execute("SELECT instance_id FROM nodes WHERE name = ?", (name,)).fetchone()[0]
            db.execute(
                "INSERT INTO events (time, node, state, instance_id, detail, cause) VALUES (?, ?, ?, ?, ?, ?)",
                (now, name, state.value, iid, detail, None if cause is None else cause.value),
            )
            if step is not None:
                new_step = self._reach(db, name, step, now)
        if new_step:
            self._tell_step(name, step)
        node = self.node(name)
        assert node is not None
        return node

    @_locked
    def reach(self, name: str, step: Step, at: float) -> None:
        """Record that node ``name`` reached boot step ``step`` at ``at``, unless it did before
        (a node the journal does not know, or knows as gone, is left alone)."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO node_timeline (name, step, at) SELECT name, ?, ? FROM nodes "
                "WHERE name = ? AND state NOT IN (?, ?)",
                (step.value, at, name, *_GONE),
            )
            new = bool(cur.rowcount)
        if new:
            self._tell_step(name, step)

    @staticmethod
    def _reach(db: sqlite3.Connection, name: str, step: Step, at: float) -> bool:
        """Record that ``name`` reached ``step`` at ``at`` unless it did before; True if new."""
        cur = db.execute(
            "INSERT OR IGNORE INTO node_timeline (name, step, at) VALUES (?, ?, ?)", (name, step.value, at)
        )
        return bool(cur.rowcount)

    def _tell_step(self, name: str, step: Step | None) -> None:
        """Tell ``on_step`` of a step just recorded for the first time (after its commit). A
        listener that fails is logged: the journal's record stands."""
        if self.on_step is None or step is None:
            return
        timeline = self.timeline(name)
        if timeline is None:
            return
        try:
            self.on_step(timeline, step)
        except Exception:
            log.exception("%s: the listener of boot step %s failed", name, step.value)

    @_locked
    def mark_seen(
        self,
        now: float,
        *,
        busy: Sequence[str] = (),
        up: Sequence[str] = (),
        job_hosts: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Remember what a pass saw at ``now``: nodes running a job (or holding a reservation),
        and nodes the scheduler reached (``Host.up``). The first pass that sees a
        managed node (not terminated nor failed) up records its ``registered`` boot step, the
        first that sees it busy its ``first_job``. ``job_hosts``: the running jobs that span
        hosts, with their slots on each (``elb.core.attribution.spanning_jobs``): a stretch seen
        within ``_JOB_HOSTS_GAP`` seconds goes on, else a new one starts. One transaction, one sync
        to disk, however many nodes."""
        if not busy and not up and not job_hosts:
            return
        reached: list[tuple[str, Step]] = []
        with self._tx() as db:
            for job, hosts in (job_hosts or {}).items():
                for host, slots in hosts.items():
                    cur = db.execute(
                        "UPDATE job_hosts SET last_seen = ?, slots = MAX(slots, ?) WHERE job = ? AND host = ? "
                        "AND last_seen >= ? AND last_seen <= ?",
                        (now, slots, job, host, now - _JOB_HOSTS_GAP, now),
                    )
                    if not cur.rowcount:
                        db.execute(
                            "INSERT OR IGNORE INTO job_hosts (job, host, slots, first_seen, last_seen) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (job, host, slots, now, now),
                        )
            db.executemany("UPDATE nodes SET last_busy_at = ? WHERE name = ?", [(now, n) for n in busy])
            db.executemany("UPDATE nodes SET last_up_at = ? WHERE name = ?", [(now, n) for n in up])
            for step, names in ((Step.REGISTERED, up), (Step.FIRST_JOB, busy)):
                for name in names:
                    cur = db.execute(
                        "INSERT OR IGNORE INTO node_timeline (name, step, at) SELECT name, ?, ? FROM nodes "
                        "WHERE name = ? AND state NOT IN (?, ?)",
                        (step.value, now, name, *_GONE),
                    )
                    if cur.rowcount:
                        reached.append((name, step))
        for name, step in reached:
            self._tell_step(name, step)

    @_locked
    def timeline(self, name: str) -> Timeline | None:
        """The boot timeline of node ``name``; None when the journal has no record of it."""
        row = self._db.execute("SELECT launched_at FROM nodes WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        steps = self._db.execute("SELECT step, at FROM node_timeline WHERE name = ?", (name,)).fetchall()
        return timeline_of(name, float(row[0]), [(str(s), None if a is None else float(a)) for s, a in steps])

    @_locked
    def timelines(self, *, include_gone: bool = False) -> dict[str, Timeline]:
        """The boot timeline of every node (``include_gone``: also the terminated and failed)."""
        sql = "SELECT name, launched_at FROM nodes"
        args: tuple[str, ...] = ()
        if not include_gone:
            sql += " WHERE state NOT IN (?, ?)"
            args = _GONE
        launched = {str(n): float(t) for n, t in self._db.execute(sql, args).fetchall()}
        rows: dict[str, list[tuple[str, float | None]]] = {n: [] for n in launched}
        for name, step, at in self._db.execute("SELECT name, step, at FROM node_timeline").fetchall():
            if str(name) in rows:
                rows[str(name)].append((str(step), None if at is None else float(at)))
        return {n: timeline_of(n, launched[n], rows[n]) for n in launched}

    @_locked
    def events(self, node: str | None = None) -> list[Event]:
        sql = "SELECT time, node, state, instance_id, detail, cause FROM events"
        args: tuple[str, ...] = ()
        if node is not None:
            sql += " WHERE node = ?"
            args = (node,)
        rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [_event(row) for row in rows]

    @_locked
    def events_since(self, since: float) -> list[Event]:
        """The events at or after ``since``, oldest first (what a budget's spend is read from)."""
        rows = self._db.execute(
            "SELECT time, node, state, instance_id, detail, cause FROM events WHERE time >= ? ORDER BY id", (since,)
        ).fetchall()
        return [_event(row) for row in rows]

    @_locked
    def bring_up_events(self, limit: int = 5000) -> list[Event]:
        """The newest ``limit`` events that start, answer or end a bring-up (requested, running,
        ready, draining, failed, terminated), oldest first: what the launch back-off is computed
        from (``elb.core.backoff``: every event its rules read, as the simulator feeds it)."""
        states = (
            NodeState.REQUESTED,
            NodeState.RUNNING,
            NodeState.READY,
            NodeState.DRAINING,
            NodeState.FAILED,
            NodeState.TERMINATED,
        )
        marks = ", ".join("?" * len(states))
        rows = self._db.execute(
            f"SELECT time, node, state, instance_id, detail, cause FROM events WHERE state IN ({marks}) "  # noqa: S608 (marks: only "?")
            "ORDER BY id DESC LIMIT ?",
            (*(s.value for s in states), limit),
        ).fetchall()
        return [_event(row) for row in reversed(rows)]

    # -- passes and policy memory ---------------------------------------------------------
    @_locked
    def record_pass(self, now: float, ok: bool, summary: str, added: int = 0, removed: int = 0) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO passes (time, ok, added, removed, summary) VALUES (?, ?, ?, ?, ?)",
                (now, int(ok), added, removed, summary),
            )
            db.execute("DELETE FROM passes WHERE id <= (SELECT MAX(id) FROM passes) - ?", (_KEEP_PASSES,))
        if self.keep_events_days is not None and (self._pruned_at is None or now - self._pruned_at >= _PRUNE_EVERY):
            self._pruned_at = now
            self.prune_events(now - self.keep_events_days * 86400.0)

    @_locked
    def job_hosts(self, since: float, until: float) -> dict[str, list[SeenOn]]:
        """The jobs spanning hosts that the passes saw in [since, until]: by job, each stretch of
        passes that saw it on a host (``mark_seen``'s ``job_hosts``)."""
        out: dict[str, list[SeenOn]] = {}
        for job, host, slots, first, last in self._db.execute(
            "SELECT job, host, slots, first_seen, last_seen FROM job_hosts WHERE last_seen >= ? AND first_seen <= ? "
            "ORDER BY job, first_seen, host",
            (since, until),
        ):
            out.setdefault(str(job), []).append(SeenOn(str(host), int(slots), float(first), float(last)))
        return out

    @_locked
    def prune_events(self, before: float) -> int:
        """Delete the events older than ``before``, except the newest ``_KEEP_LIVE_EVENTS`` of each
        live node (not terminated or failed); then the records of gone nodes left with no event.
        How many events were deleted."""
        with self._tx() as db:
            cur = db.execute(
                "DELETE FROM events WHERE time < ? AND id NOT IN ("
                " SELECT id FROM (SELECT e.id, ROW_NUMBER() OVER (PARTITION BY e.node ORDER BY e.id DESC) AS k"
                "  FROM events e JOIN nodes n ON n.name = e.node WHERE n.state NOT IN (?, ?)) WHERE k <= ?)",
                (before, *_GONE, _KEEP_LIVE_EVENTS),
            )
            db.execute(
                "DELETE FROM nodes WHERE state IN (?, ?) AND updated_at < ? "
                "AND NOT EXISTS (SELECT 1 FROM events e WHERE e.node = nodes.name)",
                (*_GONE, before),
            )
            db.execute("DELETE FROM node_timeline WHERE name NOT IN (SELECT name FROM nodes)")
            db.execute("DELETE FROM job_interruptions WHERE last_at < ?", (before,))
            db.execute("DELETE FROM job_hosts WHERE last_seen < ?", (before,))
            return int(cur.rowcount)

    @_locked
    def count_interruptions(self, jobs: Sequence[int], now: float) -> list[tuple[int, int, bool]]:
        """One more spot interruption for each of ``jobs`` (each counted once however many of its
        tasks were requeued); ``(job, times so far, bound to on-demand queues already)`` each."""
        distinct = sorted(set(jobs))
        with self._tx() as db:
            db.executemany(
                "INSERT INTO job_interruptions (job, times, last_at) VALUES (?, 1, ?) "
                "ON CONFLICT(job) DO UPDATE SET times = times + 1, last_at = excluded.last_at",
                [(j, now) for j in distinct],
            )
            rows = [
                db.execute("SELECT times, moved FROM job_interruptions WHERE job = ?", (j,)).fetchone()
                for j in distinct
            ]
        return [(j, int(r[0]), bool(r[1])) for j, r in zip(distinct, rows, strict=True)]

    @_locked
    def mark_moved(self, job: int) -> None:
        """Job ``job`` is bound to on-demand queues: no later interruption binds it again."""
        with self._tx() as db:
            db.execute("UPDATE job_interruptions SET moved = 1 WHERE job = ?", (job,))

    @_locked
    def passes(self, limit: int = 100) -> list[PassRecord]:
        rows = self._db.execute(
            "SELECT time, ok, added, removed, summary FROM passes ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
        return [PassRecord(float(t), bool(ok), int(a), int(r), str(s)) for t, ok, a, r, s in reversed(rows)]

    @_locked
    def note_change(self, now: float) -> None:
        """A launch or a removal happened at ``now`` (for stabilization and re-add damping)."""
        self._set_meta("last_change_at", now)

    @_locked
    def note_removal(self, now: float) -> None:
        hist = self.history()
        removals = [t for t in hist.recent_removals if now - t < 24 * 3600] + [now]
        self._set_meta("last_change_at", now)
        self._set_meta("recent_removals", removals[-100:])

    @_locked
    def history(self) -> History:
        last = self._get_meta("last_change_at")
        removals = self._get_meta("recent_removals")
        return History(
            last_change_at=float(last) if isinstance(last, int | float) else None,
            recent_removals=tuple(float(t) for t in removals) if isinstance(removals, list) else (),
        )

    @_locked
    def orders(self) -> Orders:
        """The standing orders (``elb pause``, ``keep``, ``remove``; and the removals the cloud's
        notices ordered, with their cause)."""
        pause = self._get_meta("paused")
        kept = self._get_meta("kept")
        remove = self._get_meta("remove_requests")
        causes = self._get_meta("remove_causes")
        since, why = (pause[0], pause[1]) if isinstance(pause, list) and len(pause) == 2 else (None, "")
        names = frozenset(str(n) for n in remove) if isinstance(remove, list) else frozenset()
        found: dict[str, tuple[str, str]] = {}
        if isinstance(causes, dict):
            for name, value in causes.items():
                if name in names and isinstance(value, list) and len(value) == 2:
                    found[str(name)] = (str(value[0]), str(value[1]))
        return Orders(
            paused_since=float(since) if isinstance(since, int | float) else None,
            pause_reason=str(why),
            kept=frozenset(str(n) for n in kept) if isinstance(kept, list) else frozenset(),
            remove=names,
            causes=found,
        )

    @_locked
    def set_paused(self, since: float | None, reason: str = "") -> None:
        self._set_meta("paused", [since, reason] if since is not None else None)

    @_locked
    def set_order(self, order: str, node: str, on: bool, *, cause: tuple[str, str] | None = None) -> None:
        """Add (``on``) or withdraw ``node`` from the ``kept`` or ``remove`` orders. ``cause``:
        (kind, what) of a removal the cloud ordered (a notice's kind and its words); an admin's
        order has none."""
        key = {"kept": "kept", "remove": "remove_requests"}[order]
        current = self._get_meta(key)
        names = {str(n) for n in current} if isinstance(current, list) else set()
        names = names | {node} if on else names - {node}
        with self._tx():
            self._set_meta(key, sorted(names))
            if order == "remove":
                stored = self._get_meta("remove_causes")
                causes = dict(stored) if isinstance(stored, dict) else {}
                if on and cause is not None:
                    causes[node] = list(cause)
                elif not on or node not in causes:
                    causes.pop(node, None)
                self._set_meta("remove_causes", {k: v for k, v in causes.items() if k in names})

    @_locked
    def add_slurm_request(self, kind: str, nodes: str, asked_at: float, source: str, now: float) -> bool:
        """Journal a request of Slurm's power saving (``nodes``: a hostlist); False when the
        same request (its ``source`` file) is journalled already."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO slurm_requests (time, kind, nodes, source, received_at) VALUES (?, ?, ?, ?, ?)",
                (asked_at, kind, nodes, source, now),
            )
            return bool(cur.rowcount)

    @_locked
    def slurm_requests(self, *, open_only: bool = False) -> list[SlurmRequestRecord]:
        """Slurm's requests, oldest first; ``open_only``: those not yet carried out."""
        sql = "SELECT id, time, kind, nodes, received_at, done_at, outcome FROM slurm_requests"
        if open_only:
            sql += " WHERE done_at IS NULL"
        rows = self._db.execute(sql + " ORDER BY time, id").fetchall()
        return [
            SlurmRequestRecord(int(i), float(t), str(k), str(n), float(r), None if d is None else float(d), o)
            for i, t, k, n, r, d, o in rows
        ]

    @_locked
    def close_slurm_request(self, request_id: int, now: float, outcome: str) -> None:
        """A request carried out (or given up), with what came of it."""
        with self._tx() as db:
            db.execute("UPDATE slurm_requests SET done_at = ?, outcome = ? WHERE id = ?", (now, outcome, request_id))

    @_locked
    def set_node_size(self, slots: int, source: str) -> None:
        """The slots of a new node as the daemon learnt them (``elb.service.nodesize``), for the commands."""
        self._set_meta("node_size", [slots, source])

    @_locked
    def node_size(self) -> tuple[int, str] | None:
        """What ``set_node_size`` last wrote, or None."""
        found = self._get_meta("node_size")
        if isinstance(found, list) and len(found) == 2 and isinstance(found[0], int) and found[0] > 0:
            return int(found[0]), str(found[1])
        return None

    @_locked
    def set_tags_refused(self, refused: TagRefusal | None) -> None:
        """The cloud's last refusal to tag the workers with their node groups (None: the last call
        went through): the daemon's to decide when to ask again, ``elb nodes``'s to say it."""
        self._set_meta("tags_refused", None if refused is None else [refused.at, refused.error])

    @_locked
    def tags_refused(self) -> TagRefusal | None:
        """What ``set_tags_refused`` last wrote, or None."""
        found = self._get_meta("tags_refused")
        if isinstance(found, list) and len(found) == 2 and isinstance(found[0], int | float):
            return TagRefusal(float(found[0]), str(found[1]))
        return None

    # -- what a scheduler asked of each node (Slurm's power saving) ---------------------------
    @_locked
    def add_asks(self, kind: AskKind, nodes: Sequence[str], since: float, detail: str, now: float) -> int:
        """The scheduler's latest word for each of ``nodes``: replaces an older ask of the node
        (answered or not); an ask older than the one journalled is ignored. How many rows changed."""
        changed = 0
        with self._tx() as db:
            for node in nodes:
                cur = db.execute(
                    "INSERT INTO node_asks (node, kind, since, detail, received_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT(node) DO UPDATE SET kind = excluded.kind, since = excluded.since, "
                    "detail = excluded.detail, received_at = excluded.received_at, attempts = 0, "
                    "retry_at = NULL, answered_at = NULL, answer = NULL WHERE excluded.since >= node_asks.since",
                    (node, kind.value, since, detail, now),
                )
                changed += cur.rowcount
        return changed

    @_locked
    def asks(self, *, open_only: bool = True) -> list[Ask]:
        """Each node's latest ask, oldest first; ``open_only``: those elb has not answered."""
        sql = "SELECT node, kind, since, detail, attempts, retry_at FROM node_asks"
        if open_only:
            sql += " WHERE answered_at IS NULL"
        rows = self._db.execute(sql + " ORDER BY since, node").fetchall()
        return [
            Ask(str(n), AskKind(str(k)), float(t), str(d), None, int(a), None if r is None else float(r))
            for n, k, t, d, a, r in rows
        ]

    @_locked
    def answer_ask(self, node: str, since: float, answer: str, now: float) -> None:
        """Elb is done with the ask of ``node`` made at ``since`` (a newer ask stays open)."""
        with self._tx() as db:
            db.execute(
                "UPDATE node_asks SET answered_at = ?, answer = ? WHERE node = ? AND since = ? AND answered_at IS NULL",
                (now, answer, node, since),
            )

    @_locked
    def ask_failed(self, node: str, since: float, retry_at: float) -> None:
        """A release of ``node`` failed: one more attempt counted, the next not before ``retry_at``."""
        with self._tx() as db:
            db.execute(
                "UPDATE node_asks SET attempts = attempts + 1, retry_at = ? WHERE node = ? AND since = ?",
                (retry_at, node, since),
            )

    @_locked
    def answered_asks(self, limit: int = 100) -> list[tuple[str, str, float, str]]:
        """The latest answered asks: (node, kind, answered at, answer), newest first."""
        rows = self._db.execute(
            "SELECT node, kind, answered_at, answer FROM node_asks WHERE answered_at IS NOT NULL "
            "ORDER BY answered_at DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [(str(n), str(k), float(t), str(a)) for n, k, t, a in rows]

    @_locked
    def interrupted_jobs(self) -> list[tuple[int, int, bool]]:
        """Every job spot interruptions requeued: ``(job, times, bound to on-demand already)``."""
        rows = self._db.execute("SELECT job, times, moved FROM job_interruptions ORDER BY job").fetchall()
        return [(int(j), int(t), bool(m)) for j, t, m in rows]

    @_locked
    def _set_meta(self, key: str, value: object) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )

    @_locked
    def _get_meta(self, key: str) -> object | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])
