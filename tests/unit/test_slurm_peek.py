"""Slurm's peek: the request files its power saving left, listed, nothing read; a new file is a new
ask, which the pass takes (and removes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.core.config import parse_config
from elb.core.scheduler import PeeksDemand, SchedulerError
from elb.schedulers.slurm.driver import Slurm
from elb.schedulers.slurm.requests import RequestKind, touch_heartbeat, waiting, write
from elb.service.journal import Journal
from tests.unit.factories import T0
from tests.unit.slurm_fakes import FakeSlurm


def driver(spool: Path, journal: Journal) -> Slurm:
    cfg = parse_config({"scheduler": "slurm", "slurm": {"requests": str(spool)}})
    return Slurm(cfg, journal, FakeSlurm())


def test_the_peek_lists_the_requests_not_the_heartbeat_nor_a_file_set_aside(tmp_path: Path) -> None:
    touch_heartbeat(tmp_path, T0, 180)
    (tmp_path / "old.bad").write_text("x")
    (tmp_path / ".half.tmp").write_text("x")
    assert waiting(tmp_path) == frozenset()
    first = write(tmp_path, RequestKind.RESUME, "node[001-002]", T0)
    assert waiting(tmp_path) == {first.name}
    assert waiting(tmp_path / "missing") == frozenset()  # no directory yet: nothing asked


def test_a_new_request_shows_until_the_pass_takes_it(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    slurm = driver(spool, Journal(":memory:"))
    assert isinstance(slurm, PeeksDemand)
    before = slurm.peek(1.0)
    asked = write(spool, RequestKind.RESUME, "node001", T0)
    assert slurm.peek(1.0).waiting - before.waiting == {asked.name}
    slurm.take_requests(T0 + 1)
    assert slurm.peek(1.0).waiting == frozenset()


def test_a_directory_that_cannot_be_listed_fails_the_peek(tmp_path: Path) -> None:
    spool = tmp_path / "file"
    spool.write_text("not a directory")
    with pytest.raises(SchedulerError, match="listing"):
        driver(spool, Journal(":memory:")).peek(1.0)
