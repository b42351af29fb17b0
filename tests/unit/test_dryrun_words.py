"""The dry run says each job that is not demand once: in its report, not also as the daemon's
"not demand" warning on stderr just before it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeSge
from tests.unit.test_unservable import LONG, UNSERVABLE


def test_the_dry_run_says_a_job_that_is_not_demand_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    sge = FakeSge(T0, jobs=[UNSERVABLE[0], pending(20, LONG)], complexes="qconf-sc-site.txt")
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    monkeypatch.setattr(factory, "make_cloud", lambda cfg: FakeCloud(T0))
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 2}}\n")
    with caplog.at_level(logging.INFO):
        assert main(["once", "--dry-run", "-c", str(path)]) == 0
    out, err = capsys.readouterr()
    said = "job 10: unservable: bound to queue other.q"
    logged = [r.getMessage() for r in caplog.records if said in r.getMessage()]
    assert out.count(said) == 1
    assert err.count(said) + len(logged) == 0, (err, logged)
