"""``elb.service.reaction``: at each look, the poll's pass when due, else a pass at once when the
driver's peek shows new waiting work a gap after the last pass; a failing peek changes nothing but
a line in the log. Times are a fake monotonic clock: looks every 5 s, a 60 s poll, a 10 s gap."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from elb.core.config import parse_config
from elb.core.scheduler import Peek, SchedulerError
from elb.service.daemon import run_forever
from elb.service.executor import Executor
from elb.service.reaction import Reaction


class Peeking:
    """A driver's peek that answers from a script: a set of job numbers, or an error to raise."""

    name = "SGE"

    def __init__(self, *answers: set[str] | Exception) -> None:
        self.answers = list(answers)
        self.timeouts: list[float] = []

    def peek(self, timeout: float) -> Peek:
        self.timeouts.append(timeout)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Peek(frozenset(answer))


def reaction(driver: object, **policy: object) -> Reaction:
    cfg = parse_config({"policy": {"peek_interval": 5, "peek_gap": 10, **policy}})
    return Reaction.of(cfg, driver, 60.0)  # type: ignore[arg-type]


def test_a_new_waiting_job_starts_a_pass_at_the_next_look() -> None:
    d = Peeking({"1"}, {"1"}, {"1", "2"})
    r = reaction(d)
    assert r.look(0.0) == "poll"  # the first pass at once; its peek is the baseline
    assert r.look(5.0) is None
    why = r.look(10.0)
    assert why is not None and "new waiting work (2)" in why
    assert d.timeouts == [5.0, 5.0, 5.0]  # each peek bounded by one look


def test_fewer_waiting_is_no_news_and_becomes_the_baseline() -> None:
    d = Peeking({"1", "2"}, {"2"}, {"2", "1"})
    r = reaction(d)
    assert r.look(0.0) == "poll"
    assert r.look(5.0) is None  # job 1 started
    assert r.look(10.0) is not None  # job 1 is back (sent back to wait): new to the last look


def test_news_too_soon_after_a_pass_waits_for_the_gap_and_still_counts() -> None:
    d = Peeking({"1"}, {"1", "2"}, {"1", "2"}, {"1", "2", "3"}, {"1", "2", "3"})
    r = reaction(d)
    assert r.look(0.0) == "poll"
    assert r.look(5.0) is None  # job 2 came, but the gap (10 s) since the pass at 0 has not passed
    assert r.look(10.0) is not None
    assert r.look(15.0) is None  # job 3: 5 s after the pass at 10
    assert r.look(20.0) is not None


def test_a_long_pass_holds_the_next_peeks_pass_ten_times_its_length() -> None:
    """A pass of 3 s: the peek's pass waits 30 s from its start, not the 10 s gap."""
    d = Peeking({"1"}, *([{"1", "2"}] * 6))
    r = reaction(d)
    assert r.look(0.0) == "poll"
    r.passed(3.0)
    assert [r.look(t) for t in (5.0, 10.0, 15.0, 20.0, 25.0)] == [None] * 5
    assert r.look(30.0) is not None


def test_the_poll_counts_from_the_last_pass_whatever_started_it() -> None:
    d = Peeking({"1"}, {"1", "2"}, *([{"1", "2"}] * 12))
    r = reaction(d)
    assert r.look(0.0) == "poll"
    assert r.look(5.0) is None and r.look(10.0) is not None
    assert [r.look(t) for t in range(15, 70, 5)] == [None] * 11
    assert r.look(70.0) == "poll"


def test_a_failing_peek_is_logged_once_and_the_poll_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    down = SchedulerError("qstat: unable to contact qmaster")
    d = Peeking({"1"}, down, down, down, {"1", "2"}, *([down] * 8), {"1", "2", "3"})
    r = reaction(d)
    with caplog.at_level(logging.INFO, logger="elb"):
        assert r.look(0.0) == "poll"
        assert [r.look(t) for t in (5.0, 10.0, 15.0)] == [None, None, None]
        assert r.look(20.0) is not None  # it answers again: job 2 is new to the last good peek
        assert [r.look(t) for t in range(25, 60, 5)] == [None] * 7
        assert r.look(60.0) is None  # a failed peek at the poll's look...
        assert r.look(80.0) == "poll"  # ...and the poll's pass all the same
    lines = [rec.getMessage() for rec in caplog.records]
    assert sum("peeking at SGE failed" in line for line in lines) == 2  # once for each stretch of failures
    assert sum("answers again" in line for line in lines) == 2


def test_a_driver_that_cannot_peek_or_no_peek_interval_is_plain_polling() -> None:
    for r in (reaction(SimpleNamespace(name="Q")), reaction(Peeking(), peek_interval=0)):
        assert r.peeker is None
        assert r.cadence.tick == 60.0
        assert r.look(0.0) == "poll"
        assert r.look(60.0) == "poll"


class Balancer:
    """What ``run_forever`` needs of the balancer: a pass that counts, a driver that peeks."""

    def __init__(self, driver: Peeking) -> None:
        self.config = parse_config({"policy": {"peek_interval": 1, "peek_gap": 0}})
        self.scheduler = driver
        self.stopping = threading.Event()
        self.provisioner = None
        self.executor = Executor(inline=True)
        self.passes = 0

    def clock(self) -> float:
        return 0.0

    def collect_finished(self, result: object) -> None:
        del result

    def run_pass(self) -> SimpleNamespace:
        self.passes += 1
        if self.passes == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return SimpleNamespace(ok=True, summary=lambda: "nothing to do")


@pytest.fixture
def restore_signals() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_run_forever_runs_a_pass_when_the_peek_shows_a_new_job_not_an_hour_later(restore_signals: None) -> None:
    """The poll is an hour: the second pass can only come from the peek that sees job 2."""
    b = Balancer(Peeking(set(), {"2"}, *([{"2"}] * 50)))
    run_forever(b, 3600)  # type: ignore[arg-type]
    assert b.passes == 2
