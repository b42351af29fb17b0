"""The stats file: one CSV row per pass, for plots (``elb plot``) and later analysis.

A row is the cluster as its pass found it (``time``: when SGE was read; jobs from that snapshot,
nodes by state from the journal at that moment) and what the pass then did (``added``,
``removed``, ``action``): nodes a pass adds are counted from the next row on.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path


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


COLUMNS = [f.name for f in fields(StatsRow)]


def append_row(path: Path, row: StatsRow) -> None:
    """Append one row, writing the header first if the file is new or empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            w.writeheader()
        w.writerow(asdict(row))


def read_rows(path: Path) -> Iterator[StatsRow]:
    """Rows of a stats file; a malformed row raises ValueError naming its line."""
    with path.open(newline="", encoding="utf-8") as f:
        for n, rec in enumerate(csv.DictReader(f), start=2):
            try:
                yield StatsRow(
                    time=float(rec["time"]),
                    ok=rec["ok"] == "True",
                    pending_jobs=int(rec["pending_jobs"]),
                    pending_slots=int(rec["pending_slots"]),
                    oldest_wait=float(rec["oldest_wait"]),
                    running_jobs=int(rec["running_jobs"]),
                    nodes_booting=int(rec["nodes_booting"]),
                    nodes_ready=int(rec["nodes_ready"]),
                    nodes_draining=int(rec["nodes_draining"]),
                    added=int(rec["added"]),
                    removed=int(rec["removed"]),
                    action=rec["action"] or "",
                )
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{path}:{n}: bad stats row: {err}") from None
