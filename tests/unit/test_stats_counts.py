"""The daemon's stats row counts the held and the in-error waiting jobs (not demand)."""

from __future__ import annotations

from pathlib import Path

from elb.core.config import load_config
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.stats import held_and_error, read_rows
from tests.unit.factories import T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


def test_held_and_error_counts() -> None:
    jobs = [
        pending(1, 60),
        pending(2, 60, state="hqw"),
        pending(3, 60, state="Eqw"),
        pending(4, 60, state="Ehqw"),
        pending(5, 60, state="hRq"),
        running(6, "node001"),
    ]
    assert held_and_error(jobs) == (2, 2)


def test_the_pass_writes_them_to_the_stats_file(tmp_path: Path) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 0}}\n")
    cfg = load_config(path)
    sge = FakeSge(T0, jobs=[pending(1, 60, state="hqw"), pending(2, 60, state="Eqw"), pending(3, 60, state="hqw")])
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=FakeCloud(T0), provisioner=FakeProvisioner(sge)
    )
    assert bal.run_pass().ok
    journal.close()
    (row,) = list(read_rows(cfg.stats_path))
    assert (row.held_jobs, row.error_jobs) == (2, 1)
