"""The daemon's side of the request hand-off: Slurm's requests into the journal.

Each request file (``elb.slurm.requests``) is journalled (a request already journalled, after a
crash between journalling and removing its file, is not journalled twice) and then removed.
Files that are not requests are set aside by ``requests.pending`` and returned here to be
reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elb.journal import Journal
from elb.slurm.parse import compress
from elb.slurm.requests import Request, done, pending


@dataclass(frozen=True, slots=True)
class Intake:
    new: tuple[Request, ...]  # journalled now
    bad: tuple[str, ...]  # files set aside, and why


def take(directory: Path, journal: Journal, now: float, limit: int = 1000) -> Intake:
    """Journal the waiting requests (at most ``limit``, oldest first) and remove their files."""
    found = pending(directory, limit)
    new: list[Request] = []
    for request in found.requests:
        if journal.add_slurm_request(request.kind.value, compress(request.nodes), request.time, request.source, now):
            new.append(request)
        done(directory, request)
    return Intake(tuple(new), found.bad)


__all__: Sequence[str] = ("Intake", "take")
