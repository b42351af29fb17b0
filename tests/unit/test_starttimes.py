"""``StartTimes`` (the ``qsub -a`` times, a bounded number asked for each pass, in batches)
against the plain rule it keeps: a job forgotten once it no longer waits or waits with another
submission time, the oldest jobs not asked about yet asked next, the start times known returned,
every new job not answered held (``unread``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.model import Job, JobPhase
from elb.schedulers.sge.starttimes import NOT_ASKED, StartTimes


class Plain:
    """The rule written plainly: job number -> (submission time, start time or None)."""

    def __init__(self, batch: int, per_pass: int) -> None:
        self.batch, self.per_pass = batch, per_pass
        self.known: dict[int, tuple[float | None, float | None]] = {}

    def update(
        self, answers: Mapping[int, float | None], pending: Sequence[Job]
    ) -> tuple[dict[int, float], list[list[int]], dict[int, str]]:
        waiting = {j.job_id: j.submitted for j in pending}
        self.known = {k: v for k, v in self.known.items() if k in waiting and waiting[k] == v[0]}
        new = sorted((s if s is not None else 0.0, k) for k, s in waiting.items() if k not in self.known)
        ids = [k for _s, k in new[: self.per_pass]]
        unread = {k: NOT_ASKED.format(n=self.per_pass) for _s, k in new}
        for k in ids:
            if k in answers:
                self.known[k] = (waiting[k], answers[k])
                del unread[k]
            else:
                unread[k] = "qstat -j did not show its start time (qsub -a)"
        calls = [ids[i : i + self.batch] for i in range(0, len(ids), self.batch)]
        return {k: t for k, (_s, t) in self.known.items() if t is not None}, calls, unread


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
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_start_times_keep_the_plain_rule(
    passes: list[list[tuple[int, int | None]]], answers: dict[int, float | None], batch: int, per_pass: int
) -> None:
    kept, plain, sge = StartTimes(batch, per_pass), Plain(batch, per_pass), Answers(answers)
    for numbers in passes:
        pending = waiting(numbers)
        expected, calls, unread = plain.update(answers, pending)
        sge.asked.clear()
        assert kept.update(sge, pending) == expected
        assert sge.asked == calls
        assert kept.unread == unread
