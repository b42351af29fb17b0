"""What elb keeps of the Ansible runs' artifacts: by age and by total size.

``artifacts_to_delete`` is the rule (pure, given ``now``); ``prune_artifacts`` applies it to the
``artifacts/`` directory ansible-runner writes. A successful run's directory is deleted after
``retention.artifacts_days``, a failed one after ``failed_factor`` times that (its events are what
an admin reads to learn why a node failed); then, while the total is above
``retention.artifacts_mb``, the oldest go first, successful runs before failed ones. A directory
with no ``status`` file is a run still going (or one that was killed): only age removes it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elb.core.config import RetentionConfig

log = logging.getLogger("elb.provision.retention")

DAY = 86400.0
MB = 1_000_000


@dataclass(frozen=True, slots=True)
class ArtifactRun:
    name: str
    mtime: float
    size: int  # bytes
    status: str | None  # ansible-runner's status file: successful, failed, timeout, canceled; None: none yet


def artifacts_to_delete(runs: Sequence[ArtifactRun], now: float, keep: RetentionConfig) -> list[str]:
    """The runs to delete, oldest first."""
    max_age = keep.artifacts_days * DAY
    doomed: list[ArtifactRun] = []
    left: list[ArtifactRun] = []
    for r in sorted(runs, key=lambda r: (r.mtime, r.name)):
        limit = max_age if r.status == "successful" else max_age * keep.failed_factor
        (doomed if now - r.mtime > limit else left).append(r)
    total = sum(r.size for r in left)
    budget = keep.artifacts_mb * MB
    finished = [r for r in left if r.status is not None]
    # Oldest successful runs first, then the oldest failed ones.
    for r in sorted(finished, key=lambda r: (r.status != "successful", r.mtime, r.name)):
        if total <= budget:
            break
        doomed.append(r)
        total -= r.size
    return [r.name for r in sorted(doomed, key=lambda r: (r.mtime, r.name))]


def _size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def _status(path: Path) -> str | None:
    try:
        return (path / "status").read_text(encoding="utf-8", errors="replace").strip() or None
    except OSError:
        return None


def scan(artifacts: Path) -> Iterable[ArtifactRun]:
    """The run directories under ``artifacts`` (nothing when it does not exist)."""
    try:
        entries = list(artifacts.iterdir())
    except OSError:
        return
    for d in entries:
        try:
            if d.is_symlink() or not d.is_dir():
                continue
            mtime = d.stat().st_mtime
        except OSError:
            continue
        yield ArtifactRun(d.name, mtime, _size(d), _status(d))


def prune_artifacts(artifacts: Path, now: float, keep: RetentionConfig, *, spare: str | None = None) -> list[str]:
    """Delete what ``artifacts_to_delete`` says, except ``spare`` (the run just ended); the names deleted."""
    runs = [r for r in scan(artifacts) if r.name != spare]
    deleted = []
    for name in artifacts_to_delete(runs, now, keep):
        try:
            shutil.rmtree(artifacts / name)
        except OSError as err:
            log.warning("cannot delete old Ansible artifacts %s: %s", artifacts / name, err)
            continue
        deleted.append(name)
    if deleted:
        log.info("deleted the artifacts of %d old Ansible run(s) from %s", len(deleted), artifacts)
    return deleted
