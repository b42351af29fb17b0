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
        self, answers: Mapping[int, float | None], pending: Sequence[Job], fail_at: int | None = None
    ) -> tuple[dict[int, float], list[list[int]], dict[int, str]]:
        """The start times known, the calls made and the jobs unread; the call at ``fail_at`` (if
        any) fails (``FAILURE``), and the jobs of the calls after are not asked about."""
        waiting = {j.job_id: j.submitted for j in pending}
        self.known = {k: v for k, v in self.known.items() if k in waiting and waiting[k] == v[0]}
        new = sorted((s if s is not None else 0.0, k) for k, s in waiting.items() if k not in self.known)
        ids = [k for _s, k in new[: self.per_pass]]
        unread = {k: NOT_ASKED.format(n=self.per_pass) for _s, k in new}
        calls = [ids[i : i + self.batch] for i in range(0, len(ids), self.batch)]
        if fail_at is not None and fail_at < len(calls):
            calls = calls[: fail_at + 1]
            unread.update(dict.fromkeys(calls[fail_at], FAILURE))
        for k in [k for call in calls[:fail_at] for k in call]:
            if k in answers:
                self.known[k] = (waiting[k], answers[k])
                del unread[k]
            else:
                unread[k] = "qstat -j did not show its start time (qsub -a)"
        return {k: t for k, (_s, t) in self.known.items() if t is not None}, calls, unread


FAILURE = "qstat: cannot reach the master"


class Answers:
    def __init__(self, answers: Mapping[int, float | None]) -> None:
        self.answers = answers
        self.asked: list[list[int]] = []
        self.fail_at: int | None = None  # the call of a pass that fails, counted from 0

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        self.asked.append(list(job_ids))
        if len(self.asked) - 1 == self.fail_at:
            raise RuntimeError(FAILURE)
        return {k: self.answers[k] for k in job_ids if k in self.answers}


def waiting(numbers: list[tuple[int, int | None]]) -> list[Job]:
    return [Job(n, "j", "u", "qw", JobPhase.WAITING, 1, submitted=None if s is None else float(s)) for n, s in numbers]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(1, 40), st.none() | st.integers(0, 3)), max_size=30),
            st.none() | st.integers(0, 3),
        ),
        max_size=8,
    ),
    st.dictionaries(st.integers(1, 40), st.none() | st.floats(0, 1e6)),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_start_times_keep_the_plain_rule(
    passes: list[tuple[list[tuple[int, int | None]], int | None]],
    answers: dict[int, float | None],
    batch: int,
    per_pass: int,
) -> None:
    """Pass after pass, some with a call that fails (the asking ends there; its jobs are asked
    about again at the next pass, as the ones not reached)."""
    kept, plain, sge = StartTimes(batch, per_pass), Plain(batch, per_pass), Answers(answers)
    for numbers, fail_at in passes:
        pending = waiting(numbers)
        expected, calls, unread = plain.update(answers, pending, fail_at)
        sge.asked.clear()
        sge.fail_at = fail_at
        assert kept.update(sge, pending) == expected
        assert sge.asked == calls
        assert kept.unread == unread
