"""The demos' summary counts launches from the journal: how many, how many failed, and how many
came after the last job ended (the daemon must launch nothing once the work is done)."""

from __future__ import annotations

from pathlib import Path

from elb.core.model import NodeState
from elb.service.journal import Journal
from elbdev.demo_steps import launch_line


def test_launches_after_the_last_job_are_counted(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.sqlite")
    try:
        for name, at in (("node001", 100.0), ("node002", 100.0), ("node003", 500.0)):
            j.record(name, NodeState.REQUESTED, at, launched_at=at)
            j.record(name, NodeState.LAUNCHING, at)
        j.record("node002", NodeState.FAILED, 300.0, detail="not ready in time")
        assert launch_line(j, 400.0) == "  launches:          3 (1 failed); after the last job ended: 1"
        assert launch_line(j, 600.0).endswith("after the last job ended: 0")
        assert launch_line(j, None).endswith("after the last job ended: 0")
    finally:
        j.close()
