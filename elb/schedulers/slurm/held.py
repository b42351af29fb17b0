"""Slurm's held jobs' answers (``elb.core.demand.NotDemand``), each worked out once for its squeue line.

A held job (a pending entry Slurm holds for a reason of its own, ``SlurmJob.demand`` false)
is answered from the last pending entry of its number, in squeue's order: its reason, and,
while it waits for its begin time, that time (``until``; a begin time squeue no longer shows
has passed: the job is due now). Almost every number has one pending entry, whose answer is
then a function of its line alone: ``line_of`` works it out with the line's neutral jobs
(``pending_line`` of a pending line's fields, its ``SlurmJob`` not made), and squeue's memo
(``elb.schedulers.slurm.parse.SqueueMemo``, the two its ``derive`` and ``pending``) keeps it
with them, so a line read before brings its answer along. ``held_answers`` takes those, and
works out again only the answers of numbers on several pending entries and those that read
the time. Pure.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, count, islice, repeat
from operator import is_, itemgetter
from typing import Any, Final, cast

from elb.core.demand import NotDemand
from elb.core.frozen import maker
from elb.core.model import Job, JobPhase
from elb.core.state import JobsChange
from elb.schedulers.slurm.aligned import Span, Stretch, carried, carried_indices, spans, within
from elb.schedulers.slurm.parse import (
    PENDING,
    SlurmJob,
    Splice,
    SqueueFields,
    job_of_text,
    not_demand_reason,
    reason_of_text,
)
from elb.schedulers.slurm.view import Made, flat, made_of, pending_job, pending_of

READS_NOW: Final = object()  # a held line whose answer reads the time: worked out at each pass

# A squeue line's job, its neutral jobs (``made_of``), the number of its pending job (None: the
# line is not pending), and its held job's answer from the line alone (None: not held; ``READS_NOW``).
# The job is the line's ``SlurmJob``, or the line's text when a read made its parts straight from
# its fields (``pending_line``: a pending line's; ``squeue_job`` reads the job when asked).
Line = tuple[SlurmJob | str, Made, int | None, NotDemand | object | None]

_MADE, _NUMBER, _ANSWER = itemgetter(1), itemgetter(2), itemgetter(3)
_HELD = JobPhase.HELD  # (a member bound once: read for each new pending line)
_not_demand = maker(NotDemand)  # (``elb.core.frozen.maker``: a read makes one for each new held line)


def answer(job: Job, line: SlurmJob, now: float, before: NotDemand | None = None) -> NotDemand:
    """The held ``job``'s answer from ``line`` (the last pending entry of its number), the one
    ``before`` when it says the same (``answer_of`` its reason and start)."""
    return answer_of(job, line.reason, line.started, now, before)


def answer_of(job: Job, reason: str, started: float | None, now: float, before: NotDemand | None = None) -> NotDemand:
    """The held ``job``'s answer from the ``reason`` and ``started`` time of the last pending
    entry of its number, the one ``before`` when it says the same."""
    why = not_demand_reason(reason) or "held by Slurm"
    # Held for its begin time only: not yet demand, until then (a requeued job's hold too); a
    # begin time squeue no longer shows (N/A) has passed: the job is due at Slurm's next
    # scheduling cycle.
    until = (started or now) if reason == "BeginTime" else None
    if before is not None and before.job is job and before.reason == why and before.until == until:
        return before
    return _not_demand(job, why, until, until is None)  # (until, held: by position, as cheaper)


def line_of(job: SlurmJob) -> Line:
    """The line of ``job``: the job, its neutral jobs, its pending number, its held job's own answer."""
    if job.state != PENDING:  # (``SlurmJob.pending``, read directly: a read works it out for each new line)
        return job, made_of(job), None, None
    neutral = pending_job(job)  # (a pending line makes one job: ``made_of``'s)
    return job, neutral, neutral.job_id, _own_answer(neutral, job.reason, job.started)


def pending_line(text: str, fields: SqueueFields) -> Line:
    """``line_of`` the job of a pending squeue line of ``text`` and ``fields`` (its node list
    empty), with the text in place of the job: no ``SlurmJob`` made (``squeue_job`` makes it)."""
    neutral = pending_of(fields)
    if neutral.phase is not _HELD:  # (``_own_answer``'s first test: most pending lines wait)
        return text, neutral, neutral.job_id, None
    return text, neutral, neutral.job_id, _own_answer(neutral, fields[3], fields[8])  # (its reason and start)


def _own_answer(neutral: Job, reason: str, started: float | None) -> NotDemand | object | None:
    """A pending line's held job's answer from the line alone (``Line``'s item), of its neutral job."""
    if neutral.phase is not _HELD:
        return None
    if reason == "BeginTime" and not started:  # (until: now)
        return READS_NOW
    return answer_of(neutral, reason, started, 0.0)  # (the time is not read)


def squeue_job(line: Line) -> SlurmJob:
    """The ``SlurmJob`` of ``line``: its own, or read again of its text (``pending_line``'s)."""
    job = line[0]
    return job_of_text(job) if isinstance(job, str) else job


def line_reason(line: Line) -> str:
    """The reason of ``line``'s job (``squeue_job``'s), read off its text when it has no job."""
    job = line[0]
    return reason_of_text(job) if isinstance(job, str) else job.reason


@dataclass(frozen=True, slots=True)
class Columns:
    """A read's squeue ``lines`` and their parts, in the lines' order: their neutral jobs one
    after the other (``jobs``: the snapshot's), each line's held job's own answer (``Line``'s
    item) in a list, the indices of the lines that are not pending (``others``: their number
    None), and those of the lines whose neutral jobs are a tuple (``several``: only a line that
    is not pending may have other than one, ``line_of``) with how many jobs past one the lines
    up to each of them have (``past``, summed), and the numbers on more than one pending line
    (``shared``). Made of the lines (``columns``), or carried from the read before's by the
    stretches of lines the read took in place (``carried_columns``): the same. ``distinct``: the
    pending lines' numbers when none is shared, for the next read's columns to carry (the one
    carry takes it out; empty: made anew). ``change``: the jobs against the read before's, when
    carried (``JobsChange``: the jobs of its lines not taken in place left, those of the lines
    read anew came)."""

    lines: Sequence[Line]
    jobs: tuple[Job, ...]
    answers: list[NotDemand | object | None]
    others: list[int]
    several: list[int]
    past: list[int]
    shared: set[int]
    distinct: list[set[int]]
    change: JobsChange | None = field(default=None, compare=False, repr=False)

    def not_pending(self) -> tuple[Job, ...]:
        """The neutral jobs of the lines that are not pending (``others``), in their order: every
        job a read shows started is one of them (a pending line's job waits or is held)."""
        made = self.lines
        return flat([made[i][1] for i in self.others])

    def job_at(self, line: int) -> int:
        """Where the neutral jobs of the line at ``line`` (or the end, past the last) start in ``jobs``."""
        before = bisect_left(self.several, line)
        return line + (self.past[before - 1] if before else 0)


def columns(lines: Sequence[Line]) -> Columns:
    """The ``Columns`` of ``lines``, each line's parts picked out."""
    numbers = list(map(_NUMBER, lines))
    others = list(compress(count(), map(is_, numbers, repeat(None))))
    made = list(map(_MADE, lines))
    tuples = [i for i in others if type(made[i]) is tuple]
    past = list(accumulate(len(cast("tuple[Job, ...]", made[i])) - 1 for i in tuples))
    shared, distinct = _shared(numbers, len(numbers) - len(others))
    answers = list(map(_ANSWER, lines))
    return Columns(lines, flat(made, tuples), answers, others, tuples, past, shared, distinct)


def carried_columns(lines: Sequence[Line], splice: Splice[Line] | None, last: Columns | None) -> Columns:
    """The ``Columns`` of ``lines``: ``last``'s (the read before's) carried a stretch at a time
    when ``splice`` says how ``lines`` were taken from its lines (``splice``'s entries are
    ``last``'s very lines), each other line's parts picked out; else made of the lines."""
    if splice is None or last is None or splice[0] is not last.lines:
        return columns(lines)
    _, stretches, passed = splice
    size = len(lines)
    walk = spans(stretches, size)

    def parts(item: Callable[[Line], Any]) -> Callable[[int, int], Iterator[Any]]:
        return lambda i, k: map(item, lines[i:k])

    def others(i: int, k: int) -> Iterator[int]:
        return compress(count(i), map(is_, map(_NUMBER, lines[i:k]), repeat(None)))

    tuples, extra, jobs, change = _carried_jobs(lines, walk, last)
    not_pending = carried_indices(last.others, walk, others)
    distinct = _carried_distinct(lines, stretches, passed, last)
    if distinct is None:
        shared, kept = _shared(list(map(_NUMBER, lines)), size - len(not_pending))
    else:
        shared, kept = set(), [distinct]
    answers = carried(last.answers, walk, parts(_ANSWER))
    return Columns(lines, jobs, answers, not_pending, tuples, list(accumulate(extra)), shared, kept, change)


def _carried_distinct(
    lines: Sequence[Line], stretches: Sequence[Stretch], passed: Sequence[Line], last: Columns
) -> set[int] | None:
    """The pending numbers of ``lines`` when none is on two pending lines: ``last``'s (taken out
    of it), less the numbers of its lines the ``stretches`` did not take (``passed``: their
    lines, as the last read's own list may be this read's by now), and with those of the other
    ``lines``; None when ``last`` had none to give, or a number is now on two pending lines."""
    if not last.distinct:
        return None
    distinct = last.distinct.pop()
    came: list[int | None] = []
    at = 0  # (the read's lines)
    for i, _, run in stretches:
        came += map(_NUMBER, lines[at:i])
        at = i + run
    came += map(_NUMBER, lines[at:])
    distinct.difference_update(map(_NUMBER, passed))
    before = len(distinct)
    pending = [n for n in came if n is not None]
    distinct.update(pending)
    return distinct if len(distinct) == before + len(pending) else None


def _carried_jobs(
    lines: Sequence[Line], walk: Sequence[Span], last: Columns
) -> tuple[list[int], list[int], tuple[Job, ...], JobsChange]:
    """The lines whose neutral jobs are a tuple and the jobs past one each has, the neutral
    jobs of ``lines`` one after the other: ``last``'s jobs taken a stretch of lines at a time
    (``Columns.job_at``), each other line's own (``walk``: the read's ``spans``), and how they
    differ from ``last``'s (the jobs between the stretches taken, on either side)."""
    pieces: list[Iterable[Job]] = []
    left: list[Job] = []
    came: list[Job] = []
    tuples: list[int] = []
    extra: list[int] = []
    before, past, old = last.several, last.past, last.jobs
    done = 0  # where in ``old`` the last stretch taken ended
    for i, k, j in walk:
        if j is None:
            made = list(map(_MADE, lines[i:k]))
            here = [n for n, each in enumerate(made) if type(each) is tuple]
            fresh = flat(made, here)
            pieces.append(fresh)
            came += fresh
            tuples.extend(i + n for n in here)
            extra.extend(len(cast("tuple[Job, ...]", made[n])) - 1 for n in here)
        else:
            start, end = last.job_at(j), last.job_at(j + k - i)
            # The chain below walks each job once anyway; a slice of them first copies each reference
            # and frees it after, two more looks at each job's memory (a queue's jobs are scattered
            # over the heap). So a stretch longer than the jobs before it is walked in place (the
            # walk looks once at each job it skips), a shorter one sliced.
            pieces.append(islice(old, start, end) if end - start > start else old[start:end])
            left += old[done:start]
            done = end
            start, end = within(before, j, k - i)
            tuples.extend(n + i - j for n in before[start:end])
            extra.extend(past[t] - (past[t - 1] if t else 0) for t in range(start, end))
    left += old[done:]
    jobs = tuple(chain.from_iterable(pieces))
    return tuples, extra, jobs, JobsChange(old, jobs, tuple(left), tuple(came))


def _shared(numbers: list[int | None], pending: int) -> tuple[set[int], list[set[int]]]:
    """The numbers of more than one pending line (``numbers``: each line's, None: not pending;
    ``pending``: how many are), and the pending ones in a list when there are none such (``Columns.distinct``)."""
    distinct = set(numbers)
    distinct.discard(None)
    if len(distinct) == pending:
        return set(), [cast("set[int]", distinct)]
    return {n for n, times in Counter(numbers).items() if times > 1 and n is not None}, []


def held_answers(
    read: Columns, now: float, due_since: MutableMapping[str, float] | None = None
) -> tuple[NotDemand, ...]:
    """The answers of the held jobs of a read (its squeue lines' ``Columns``, in squeue's order), in the
    order of the snapshot's held jobs: each line's own, but for the numbers on several pending
    lines (the last one's reason) and the answers that read ``now``. ``due_since``: when each
    job (squeue's id) was first read due (its begin time passed, squeue showing N/A), kept by the
    caller from one read to the next: such a job's answer is due since then, not since ``now``;
    the line that answers for a job is the last pending one of its number, so a job is read due
    when that line shows its begin time passed (the entries of jobs no longer read due are
    dropped)."""
    lines, answers = read.lines, read.answers
    shared = read.shared
    if not shared:
        held = tuple(filter(None, answers))  # (an answer is true, None is not)
        if not any(map(is_, held, repeat(READS_NOW))):
            if due_since:
                due_since.clear()  # no job is read due now
            return cast("tuple[NotDemand, ...]", held)
    answers = list(answers)  # (the ones worked out again replaced in a copy)
    again = list(compress(count(), map(is_, answers, repeat(READS_NOW))))
    last: dict[int, int] = {}  # each shared number's last pending line
    if shared:
        numbers = list(map(_NUMBER, lines))
        on_shared = list(compress(count(), map(shared.__contains__, numbers)))
        last = {cast("int", numbers[i]): i for i in on_shared}  # (the last line of each number kept)
        again += (i for i in on_shared if answers[i] is not None and answers[i] is not READS_NOW)
    seen: dict[str, float] = {}
    for i in again:
        own, neutral = answers[i], cast("Job", lines[i][1])  # (a pending line's one job)
        before = own if isinstance(own, NotDemand) else None
        line = squeue_job(lines[last.get(cast("int", lines[i][2]), i)])
        at = now
        if due_since is not None and line.reason == "BeginTime" and not line.started:  # (the answer reads the time)
            at = seen[line.job_id] = due_since.get(line.job_id, now)
        answers[i] = answer(neutral, line, at, before)
    if due_since is not None:
        due_since.clear()
        due_since.update(seen)
    return tuple(cast("list[NotDemand]", list(filter(None, answers))))


def jobs(lines: Sequence[Line]) -> tuple[SlurmJob, ...]:
    """The squeue jobs of ``lines``, in their order (``squeue_job``)."""
    return tuple(map(squeue_job, lines))


__all__: Sequence[str] = (
    "READS_NOW",
    "Columns",
    "Line",
    "answer",
    "answer_of",
    "carried_columns",
    "columns",
    "held_answers",
    "jobs",
    "line_of",
    "line_reason",
    "pending_line",
    "squeue_job",
)
