"""Grid Engine's peek: ``qstat -s p -u '*'`` in plain text, the numbers of the jobs that wait and may
run; a fake ``qstat`` (real processes, as ``test_sge_commands``) prints hand-made 8.1.9 text."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.core.config import Config
from elb.core.scheduler import PeeksDemand, SchedulerError
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.errors import SgeError, SgeParseError, SgeTimeoutError
from elb.schedulers.sge.peek import PEEK_ARGS, waiting_jobs
from tests.unit.test_sge_commands import HANDMADE, FakeSge


@pytest.fixture
def fake(tmp_path: Path) -> FakeSge:
    return FakeSge(tmp_path)


def test_the_waiting_jobs_are_those_neither_held_nor_in_error() -> None:
    text = (HANDMADE / "qstat-s-p.txt").read_bytes()
    assert waiting_jobs(text) == {"201", "202", "210", "211"}


def test_no_job_is_no_output() -> None:
    assert waiting_jobs(b"") == frozenset()


def test_a_line_that_is_not_a_jobs_fails_the_peek() -> None:
    with pytest.raises(SgeParseError, match="not a job's line"):
        waiting_jobs(b"error: commlib error: got select error (Connection refused)\n")


def test_the_peek_runs_qstat_once_with_its_own_time_out(fake: FakeSge) -> None:
    fake.prints("qstat", "../handmade/qstat-s-p.txt")
    assert fake.client().waiting_jobs(5.0) == {"201", "202", "210", "211"}
    assert fake.argv() == [["qstat", *PEEK_ARGS]]
    assert PEEK_ARGS == ("-s", "p", "-u", "*")


def test_a_failed_peek_is_not_tried_again(fake: FakeSge) -> None:
    fake.says("qstat", stderr="error: unable to contact qmaster using port 6444 on host master", code=1)
    with pytest.raises(SgeError, match="unable to contact qmaster"):
        fake.client().waiting_jobs(5.0)
    assert len(fake.calls()) == 1  # the pass's reads are tried again; a peek is not worth it
    assert fake.slept == []


def test_a_peek_past_its_time_out_is_killed(fake: FakeSge) -> None:
    fake.command("qstat", "time.sleep(30)\n")
    with pytest.raises(SgeTimeoutError):
        fake.client(timeout=20.0).waiting_jobs(1.0)  # the peek's time-out, not sge.timeout


def test_the_driver_can_peek_and_says_so_as_a_scheduler_error(fake: FakeSge) -> None:
    fake.prints("qstat", "../handmade/qstat-s-p.txt")
    driver = GridEngine(Config(), fake.client())
    assert isinstance(driver, PeeksDemand)
    assert driver.peek(5.0).waiting == {"201", "202", "210", "211"}
    fake.says("qstat", stderr="error: failed receiving gdi request", code=1)
    with pytest.raises(SchedulerError):
        driver.peek(5.0)


def test_a_client_that_cannot_peek_fails_the_peek_only() -> None:
    class NoPeek:
        pass

    driver = GridEngine(Config(), NoPeek())  # type: ignore[arg-type]
    with pytest.raises(SchedulerError, match="cannot peek"):
        driver.peek(5.0)


def test_a_header_without_its_rule_or_a_stray_line_among_the_jobs_fails_the_peek() -> None:
    text = (HANDMADE / "qstat-s-p.txt").read_bytes()
    head, rule, *jobs = text.splitlines(keepends=True)
    with pytest.raises(SgeParseError, match="no rule"):
        waiting_jobs(head + b"".join(jobs))
    with pytest.raises(SgeParseError, match="not a job's line"):
        waiting_jobs(head + rule + jobs[0] + b"qstat: warning: something odd\n" + b"".join(jobs[1:]))
    assert waiting_jobs(head + rule + jobs[0] + b"\n") == {"201"}  # a blank line is nothing


def test_an_output_the_same_as_the_last_peeks_is_not_parsed_again(
    fake: FakeSge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elb.schedulers.sge import commands

    fake.prints("qstat", "../handmade/qstat-s-p.txt")
    client = fake.client()
    parsed: list[bytes] = []

    def counted(out: bytes) -> frozenset[str]:
        parsed.append(out)
        return waiting_jobs(out)

    monkeypatch.setattr(commands, "waiting_jobs", counted)
    first = client.waiting_jobs(5.0)
    assert client.waiting_jobs(5.0) == first
    assert len(parsed) == 1
