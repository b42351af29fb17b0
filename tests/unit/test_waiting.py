"""``elb.schedulers.waiting.wait_until_up``: the bounded wait both drivers run after a bring-up.

The wait's clock is the test's: each read of the stand-in scheduler and each poll between two
reads moves it by as long as they are said to take, and nothing sleeps."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import pytest

from elb.core.scheduler import SchedulerError
from elb.schedulers.waiting import SLOW_READ, WAIT_CAP, wait_until_up
from tests.clock import Clock

log = logging.getLogger("test")

POLL = 1.0


class Polls(threading.Event):
    """Stopping that is never set, whose wait moves the test's clock by the poll."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.t += timeout or 0.0
        return self.is_set()


@dataclass(frozen=True)
class Read:
    """One read: how long it takes, and what it shows (``fail``: it fails, ``transient``: the
    scheduler did not answer; otherwise the names up)."""

    took: float = 0.1
    up: frozenset[str] = frozenset()
    fail: bool = False
    transient: bool = True


class Reads:
    """A scheduler that answers the reads in ``script`` one after another, the last one for ever."""

    def __init__(self, clock: Clock, script: list[Read]) -> None:
        self.clock, self.script = clock, script
        self.reads = 0

    def __call__(self, names: set[str], seen: dict[str, str]) -> list[str]:
        n = self.reads
        self.reads += 1
        read = self.script[min(n, len(self.script) - 1)]
        self.clock.t += read.took
        if read.fail:
            raise SchedulerError(f"reading: refused at read {n}", transient=read.transient)
        for name in names - read.up:
            seen[name] = f"down at read {n}"
        return sorted(names & read.up)


def waiter(script: list[Read], clock: Clock | None = None) -> tuple[Reads, Clock]:
    clock = clock or Clock(0.0)
    return Reads(clock, script), clock


def wait(
    reads: Reads, names: list[str], timeout: float = 5.0, stopping: threading.Event | None = None
) -> dict[str, str] | None:
    return wait_until_up(
        names,
        reads,
        timeout=timeout,
        poll=POLL,
        stopping=stopping or Polls(reads.clock),
        log=log,
        since="a test",
        failed=lambda shown: f"not up ({shown})",
        clock=reads.clock,
    )


def test_every_node_up_ends_the_wait_and_a_failed_read_is_read_again() -> None:
    reads, _ = waiter([Read(fail=True), Read(up=frozenset("a")), Read(up=frozenset("ab"))])
    assert wait(reads, ["a", "b"]) == {}
    assert reads.reads == 3


def test_a_scheduler_that_answers_and_never_shows_the_node_up_fails_it_at_the_timeout() -> None:
    reads, clock = waiter([Read()])
    assert wait(reads, ["b", "a", "c"], timeout=120) == {
        "a": f"not up (down at read {reads.reads - 1})",
        "b": f"not up (down at read {reads.reads - 1})",
        "c": f"not up (down at read {reads.reads - 1})",
    }
    assert 120 <= clock.t < 120 + 2 * (POLL + 0.1)  # the timeout, not the cap


def test_reads_that_fail_for_longer_than_the_timeout_stop_its_clock() -> None:
    """slurmctld busy: its reads time out (30 s each, transient) for 200 s, more than the
    timeout; then the node, whose slurmd kept trying to register, is up: not failed."""
    script = [Read(took=30, fail=True)] * 7 + [Read(up=frozenset("a"))]
    reads, clock = waiter(script)
    assert wait(reads, ["a"], timeout=120) == {}
    assert clock.t > 120 and reads.reads == 8


def test_reads_that_answer_slowly_count_only_their_first_seconds_toward_the_timeout() -> None:
    """A read that takes 40 s answers, but the scheduler was busy for all but SLOW_READ of it."""
    script = [Read(took=40)] * 5 + [Read(up=frozenset("a"))]
    reads, clock = waiter(script)
    assert wait(reads, ["a"], timeout=120) == {}
    assert clock.t > 200 and 5 * (SLOW_READ + POLL) < 120


def test_a_scheduler_that_never_answers_ends_the_wait_at_its_cap_not_the_nodes_fault() -> None:
    reads, clock = waiter([Read(took=30, fail=True)])
    with pytest.raises(SchedulerError) as caught:
        wait(reads, ["a"], timeout=120)
    assert caught.value.transient
    assert "did not answer" in str(caught.value) and "reading: refused" in str(caught.value)
    assert WAIT_CAP * 120 <= clock.t < WAIT_CAP * 120 + 30 + POLL  # bounded: the cap and one read


def test_a_miss_after_the_scheduler_was_out_for_a_good_part_of_the_wait_is_not_the_nodes_fault() -> None:
    """Out for 90 s (more than half the timeout), then answering for the whole timeout without
    the node up: the node may have been kept from registering meanwhile; left for a later pass."""
    reads, _ = waiter([Read(took=30, fail=True)] * 3 + [Read()])
    with pytest.raises(SchedulerError) as caught:
        wait(reads, ["a"], timeout=120)
    assert caught.value.transient


def test_a_short_outage_does_not_excuse_a_node_the_scheduler_never_showed_up() -> None:
    reads, clock = waiter([Read(took=10, fail=True), Read()])
    assert wait(reads, ["a"], timeout=120) == {"a": f"not up (down at read {reads.reads - 1})"}
    assert 120 + 11 <= clock.t < 120 + 11 + 2 * (POLL + 0.1)  # the outage (read and poll) did not count


def test_a_read_the_scheduler_refused_is_an_answer_and_the_nodes_are_failed() -> None:
    reads, clock = waiter([Read(fail=True, transient=False)])
    assert wait(reads, ["a"], timeout=10) == {"a": "not up (reading: refused at read" + f" {reads.reads - 1})"}
    assert clock.t < 10 + 2 * (POLL + 0.1)


def test_a_wait_whose_last_read_failed_is_not_the_nodes_fault() -> None:
    reads, _ = waiter([Read(fail=True)])
    with pytest.raises(SchedulerError) as caught:
        wait(reads, ["a"], timeout=0)
    assert caught.value.transient


def test_a_stop_ends_the_wait_without_an_answer() -> None:
    stop = threading.Event()
    stop.set()
    assert wait(waiter([Read()])[0], ["a"], stopping=stop) is None
