"""The stats file: one CSV row per pass, for plots (``elb plot``) and later analysis.

A row is the cluster as its pass found it (``time``: when the scheduler was read; jobs from that snapshot,
nodes by state from the journal at that moment) and what the pass then did (``added``,
``removed``, ``action``; ``finished``: when the pass ended): nodes a pass adds are counted from
the next row on.

The file is rotated by size: once it is over ``max_bytes`` it becomes ``stats.csv.1`` (the
older ones move up to ``.2`` ... ``.keep``, the oldest is deleted). At a 60 s poll a year is
about 50 MB of rows, so the defaults (10 MB, 5 old files) keep about a year. Readers take the
rotated files too, oldest first, and can skip to a window of time without parsing the rows
before it.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from pathlib import Path

from elb.core.model import Job, JobPhase

MAX_BYTES = 10 * 1024 * 1024
KEEP = 5


@dataclass(frozen=True, slots=True)
class StatsRow:
    time: float
    ok: bool
    pending_jobs: int
    pending_slots: int
    oldest_wait: float
    running_jobs: int
    nodes_booting: int
    nodes_ready: int
    nodes_draining: int
    added: int
    removed: int
    action: str
    held_jobs: int = 0  # held (h) or waiting on a dependency or a start time: not demand
    error_jobs: int = 0  # in error (E): an admin must look
    finished: float | None = None  # when the pass ended (its actions done); None: not recorded

    @property
    def nodes(self) -> int:
        return self.nodes_booting + self.nodes_ready + self.nodes_draining

    @property
    def done_at(self) -> float:
        """When this row's actions had finished (the pass's end, else its start)."""
        return self.finished if self.finished is not None else self.time


def held_and_error(jobs: Iterable[Job]) -> tuple[int, int]:
    """Waiting jobs that are not demand: (held, in error), as ``StatsRow`` counts them. A job
    both held and in error counts as in error (the driver's ``JobPhase.ERROR``): an admin must
    look at it first."""
    held = error = 0
    for j in jobs:
        if j.queue is not None:
            continue  # on a host (a hold on a running job does not keep it waiting)
        if j.phase is JobPhase.ERROR:
            error += 1
        elif j.phase is JobPhase.HELD:
            held += 1
    return held, error


COLUMNS = [f.name for f in fields(StatsRow)]
_INT = {"pending_jobs", "pending_slots", "running_jobs", "nodes_booting", "nodes_ready", "nodes_draining"}
_INT |= {"added", "removed", "held_jobs", "error_jobs"}
_OPTIONAL = {"held_jobs", "error_jobs", "finished"}  # absent from files written before these columns


def rotated(path: Path, keep: int = KEEP) -> list[Path]:
    """The stats file and its rotated predecessors that exist, oldest first."""
    olds = [path.with_name(f"{path.name}.{i}") for i in range(keep, 0, -1)]
    return [p for p in [*olds, path] if p.exists()]


def _rotate(path: Path, keep: int) -> None:
    oldest = path.with_name(f"{path.name}.{keep}")
    oldest.unlink(missing_ok=True)
    for i in range(keep - 1, 0, -1):
        src = path.with_name(f"{path.name}.{i}")
        if src.exists():
            src.replace(path.with_name(f"{path.name}.{i + 1}"))
    if keep > 0:
        path.replace(path.with_name(f"{path.name}.1"))
    else:
        path.unlink()


def append_row(path: Path, row: StatsRow, *, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
    """Append one row, writing the header first if the file is new or empty; rotate the file
    first once it is ``max_bytes`` or more."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size if path.exists() else 0
    if size >= max_bytes:
        _rotate(path, keep)
        size = 0
    with path.open("a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        if size == 0:
            w.writeheader()
        w.writerow(asdict(row))


def _bool(raw: str) -> bool:
    return raw == "True"


def _text(raw: str) -> str:
    return raw


def _finished(raw: str) -> float | None:
    return float(raw) if raw else None


def _count(raw: str) -> int:
    return int(raw) if raw else 0


def _absent(_raw: str) -> None:
    return None


def _zero(_raw: str) -> int:
    return 0


def _converters(header: list[str]) -> list[tuple[int, Callable[[str], object]]]:
    """Per column of StatsRow: its index in the file's header and how to read it (a column the
    file predates reads as its default). Raises KeyError for a required column."""
    where = {name: i for i, name in enumerate(header)}
    out: list[tuple[int, Callable[[str], object]]] = []
    for name in COLUMNS:
        if name not in where:
            if name not in _OPTIONAL:
                raise KeyError(name)
            out.append((0, _absent if name == "finished" else _zero))
            continue
        conv: Callable[[str], object]
        if name == "ok":
            conv = _bool
        elif name == "action":
            conv = _text
        elif name == "finished":
            conv = _finished
        elif name in _OPTIONAL:
            conv = _count
        elif name in _INT:
            conv = int
        else:
            conv = float
        out.append((where[name], conv))
    return out


def read_rows(path: Path, *, since: float = -math.inf, until: float = math.inf) -> Iterator[StatsRow]:
    """Rows of one stats file with ``since <= time <= until``; a malformed row raises ValueError
    naming its line. Rows outside the window are skipped on their first column alone."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return
        if not header or header[0] != "time":
            raise ValueError(f"{path}:1: not a stats file (header {header[:3]})")
        try:
            convs = _converters(header)
        except KeyError as err:
            raise ValueError(f"{path}:1: stats file without column {err}") from None
        for n, rec in enumerate(reader, start=2):
            try:
                t = float(rec[0])
                if t < since:
                    continue
                if t > until:
                    return
                yield StatsRow(*[conv(rec[i]) for i, conv in convs])  # type: ignore[arg-type]
            except (IndexError, TypeError, ValueError) as err:
                raise ValueError(f"{path}:{n}: bad stats row: {err}") from None


def read_all(path: Path, *, since: float = -math.inf, until: float = math.inf, keep: int = KEEP) -> Iterator[StatsRow]:
    """Rows of the stats file and its rotated predecessors in the window, oldest first."""
    for p in rotated(path, keep):
        yield from read_rows(p, since=since, until=until)


def time_span(
    path: Path, *, since: float = -math.inf, until: float = math.inf, keep: int = KEEP
) -> tuple[float, float] | None:
    """The first and last row times in the window (only the time column is parsed)."""
    first: float | None = None
    last = -math.inf
    for p in rotated(path, keep):
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            next(reader, None)
            for n, rec in enumerate(reader, start=2):
                try:
                    t = float(rec[0])
                except (IndexError, ValueError):
                    raise ValueError(f"{p}:{n}: bad stats row: no time") from None
                if since <= t <= until:
                    first = t if first is None else first
                    last = t
    return None if first is None else (first, last)


def resample(rows: Iterable[StatsRow], buckets: int, start: float, end: float) -> list[StatsRow]:
    """At most ``buckets`` rows for a plot of [start, end]: per bucket the last row's levels,
    the sums of ``added`` and ``removed``, not ok if any pass in it failed, and the peak of
    waiting jobs (a burst shorter than a bucket stays visible). Rows stream through: memory
    is bounded by ``buckets``, not by the number of rows."""
    if buckets <= 0:
        raise ValueError("buckets must be positive")
    width = max((end - start) / buckets, 1e-9)
    last: dict[int, StatsRow] = {}
    sums: dict[int, list[int]] = {}  # added, removed, failed passes, peak waiting
    for r in rows:
        key = min(buckets - 1, max(0, int((r.time - start) / width)))
        last[key] = r
        acc = sums.get(key)
        if acc is None:
            sums[key] = [r.added, r.removed, 0 if r.ok else 1, r.pending_jobs]
        else:
            acc[0] += r.added
            acc[1] += r.removed
            acc[2] += 0 if r.ok else 1
            acc[3] = max(acc[3], r.pending_jobs)
    out = []
    for k in sorted(last):
        added, removed, failed, peak = sums[k]
        out.append(replace(last[k], added=added, removed=removed, ok=not failed, pending_jobs=peak))
    return out


def window_start(text: str) -> float:
    """An ISO 8601 date or time (local time unless it carries an offset) as POSIX seconds."""
    try:
        return datetime.fromisoformat(text).astimezone().timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. 2026-11-01T08:00)") from None
