"""``elb.schedulers.waiting.wait_until_up``: the bounded wait both drivers run after a bring-up."""

from __future__ import annotations

import logging
import threading

from elb.schedulers.waiting import wait_until_up

log = logging.getLogger("test")


class Reads:
    """A scheduler whose reads show the nodes up one read after another; a read may fail."""

    def __init__(self, up_by_read: list[set[str]], fail: frozenset[int] = frozenset()) -> None:
        self.up_by_read = up_by_read
        self.fail = fail
        self.reads = 0

    def __call__(self, names: set[str], seen: dict[str, str]) -> list[str]:
        n = self.reads
        self.reads += 1
        if n in self.fail:
            seen.update((name, "reading: refused") for name in names)
            return []
        up = self.up_by_read[min(n, len(self.up_by_read) - 1)]
        for name in names - up:
            seen[name] = f"down at read {n}"
        return sorted(names & up)


def wait(reads: Reads, names: list[str], timeout: float = 5.0, stopping: threading.Event | None = None) -> object:
    return wait_until_up(
        names,
        reads,
        timeout=timeout,
        poll=0.001,
        stopping=stopping or threading.Event(),
        log=log,
        since="a test",
        failed=lambda shown: f"not up ({shown})",
    )


def test_every_node_up_ends_the_wait_and_a_failed_read_is_read_again() -> None:
    reads = Reads([set(), {"a"}, {"a", "b"}], fail=frozenset({0}))
    assert wait(reads, ["a", "b"]) == {}
    assert reads.reads == 3


def test_the_nodes_not_up_in_time_come_back_with_what_the_last_read_showed() -> None:
    reads = Reads([{"a"}])
    assert wait(reads, ["b", "a", "c"], timeout=0.05) == {
        "b": f"not up (down at read {reads.reads - 1})",
        "c": f"not up (down at read {reads.reads - 1})",
    }


def test_a_stop_ends_the_wait_without_an_answer_and_a_failed_last_read_is_the_reason() -> None:
    stop = threading.Event()
    stop.set()
    assert wait(Reads([set()]), ["a"], stopping=stop) is None
    assert wait(Reads([set()], fail=frozenset({0})), ["a"], timeout=0) == {"a": "not up (reading: refused)"}
