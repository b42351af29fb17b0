"""``StartTimes`` (the ``qsub -a`` times, a few asked for each pass) against the plain rule it
keeps: a job forgotten once it no longer waits or waits with another submission time, the
oldest jobs not asked about yet asked next, the start times known returned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.model import Job, JobPhase
from elb.schedulers.sge.starttimes import StartTimes


class Plain:
    """The rule written plainly: job number -> (submission time, start time or None)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.known: dict[int, tuple[float | None, float | None]] = {}

    def update(self, answers: Mapping[int, float | None], pending: Sequence[Job]) -> tuple[dict[int, float], list[int]]:
        waiting = {j.job_id: j.submitted for j in pending}
        self.known = {k: v for k, v in self.known.items() if k in waiting and waiting[k] == v[0]}
        new = sorted((s if s is not None else 0.0, k) for k, s in waiting.items() if k not in self.known)
        ids = [k for _s, k in new[: self.limit]]
        for k in ids:
            if k in answers:
                self.known[k] = (waiting[k], answers[k])
        return {k: t for k, (_s, t) in self.known.items() if t is not None}, ids


class Answers:
    def __init__(self, answers: Mapping[int, float | None]) -> None:
        self.answers = answers
        self.asked: list[list[int]] = []

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        self.asked.append(list(job_ids))
        return {k: self.answers[k] for k in job_ids if k in self.answers}


def waiting(numbers: list[tuple[int, int | None]]) -> list[Job]:
    return [Job(n, "j", "u", "qw", JobPhase.WAITING, 1, submitted=None if s is None else float(s)) for n, s in numbers]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(1, 40), st.none() | st.integers(0, 3)), max_size=30), max_size=8),
    st.dictionaries(st.integers(1, 40), st.none() | st.floats(0, 1e6)),
    st.integers(1, 6),
)
def test_start_times_keep_the_plain_rule(
    passes: list[list[tuple[int, int | None]]], answers: dict[int, float | None], limit: int
) -> None:
    kept, plain, sge = StartTimes(limit), Plain(limit), Answers(answers)
    for numbers in passes:
        pending = waiting(numbers)
        expected, ids = plain.update(answers, pending)
        sge.asked.clear()
        assert kept.update(sge, pending) == expected
        assert sge.asked == ([ids] if ids else [])
        assert kept.unread == dict.fromkeys(
            [k for k in ids if k not in answers], "qstat -j did not show its start time (qsub -a)"
        )
