"""Ansible artifacts kept by age and total size: the rule, and its application to a directory."""

from __future__ import annotations

import os
from pathlib import Path

from elb.core.config import RetentionConfig
from elb.provision.retention import DAY, MB, ArtifactRun, artifacts_to_delete, prune_artifacts

NOW = 100 * DAY
KEEP = RetentionConfig(artifacts_days=14, artifacts_mb=500, failed_factor=4)


def run(name: str, age_days: float, size_mb: float = 1, status: str | None = "successful") -> ArtifactRun:
    return ArtifactRun(name, NOW - age_days * DAY, int(size_mb * MB), status)


def test_age_limit_and_failed_runs_kept_longer() -> None:
    runs = [
        run("ok-old", 15),
        run("ok-new", 13),
        run("failed-old", 15, status="failed"),
        run("failed-older", 57, status="failed"),
        run("timeout", 57, status="timeout"),
    ]
    assert artifacts_to_delete(runs, NOW, KEEP) == ["failed-older", "timeout", "ok-old"]


def test_size_limit_removes_oldest_successful_first() -> None:
    runs = [run("a", 5, 200, "failed"), run("b", 4, 200), run("c", 3, 200), run("d", 1, 50)]
    assert artifacts_to_delete(runs, NOW, KEEP) == ["b"]  # 650 -> 450 MB; the older failed run stays
    runs = [run("a", 5, 400, "failed"), run("b", 4, 300, "failed"), run("c", 3, 100)]
    assert artifacts_to_delete(runs, NOW, KEEP) == ["a", "c"]  # successful ones first, then the oldest failed


def test_a_run_with_no_status_goes_only_by_age() -> None:
    runs = [run("going", 1, 900, None)]
    assert artifacts_to_delete(runs, NOW, KEEP) == []
    assert artifacts_to_delete([run("killed", 57, 1, None)], NOW, KEEP) == ["killed"]


def test_prune_artifacts_on_disk(tmp_path: Path) -> None:
    now = 1_000 * DAY
    for name, age, status in (("r1", 20, "successful"), ("r2", 20, "failed"), ("r3", 1, None)):
        d = tmp_path / name
        d.mkdir()
        if status:
            (d / "status").write_text(status)
        os.utime(d, (now - age * DAY, now - age * DAY))
    (tmp_path / "stray-file").write_text("not a run")
    assert prune_artifacts(tmp_path, now, KEEP, spare="r3") == ["r1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r2", "r3", "stray-file"]
    assert prune_artifacts(tmp_path / "missing", now, KEEP) == []
