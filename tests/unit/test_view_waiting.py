"""The waiting jobs of a view worked out from the last snapshot's (``elb.core.policy.view.waiting_of``
with ``last``) are the very jobs, in the very order, with the same totals, that a view of the
snapshot alone has: whatever left, came, moved, is there twice, ties, or has no submission
time, slot or task; and so are they when the snapshot's producer hands over which jobs left
and came (``elb.core.state.JobsChange``), in place of the walk that finds them."""

from __future__ import annotations

import gc
import random
from difflib import SequenceMatcher

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import elb.core.policy.view as view_module
from elb.core.model import Job, JobPhase
from elb.core.policy.view import ClusterView, ViewCache, Waiting, cluster_view, waiting_of
from elb.core.state import JobsChange, join
from tests.unit.factories import T0, snap


def _job(k: int, rng: random.Random, *, plain: bool = True, timeless: float = 0.0) -> Job:
    """A job of the pool: most waiting, some held or running; submission times from a few
    values or many, ``timeless`` of them none; job numbers that repeat now and then (ties);
    unless ``plain``, some of no slot."""
    phase = rng.choice([JobPhase.WAITING] * 6 + [JobPhase.HELD, JobPhase.RUNNING])
    when = rng.choice([0.0, 10.0, 60.0, 600.0]) if rng.random() < 0.1 else float(rng.randint(0, 99_999))
    submitted = None if rng.random() < timeless else T0 - when
    slots = rng.choice([1, 1, 2, 4]) if plain or rng.random() < 0.9 else 0
    number = rng.randint(1, 50) if rng.random() < 0.1 else rng.randint(1, 10**6)
    return Job(number, f"job{k}", "user", "PENDING", phase, slots, submitted=submitted, tasks=rng.randint(1, 3))


def _fresh(jobs: tuple[Job, ...], now: float) -> ClusterView:
    return cluster_view(join([], (), snap(list(jobs), now=now), now=now), "master", 4)


def _same(got: Waiting | ClusterView, want: ClusterView) -> None:
    slots = got.slots if isinstance(got, Waiting) else got.pending_slots
    plain = got.plain if isinstance(got, Waiting) else got.pending_plain
    assert [id(j) for j in got.pending] == [id(j) for j in want.pending]
    assert (slots, plain) == (want.pending_slots, want.pending_plain)


def _next(jobs: list[Job], pool: list[Job], rng: random.Random, k: int, timeless: float = 0.0) -> list[Job]:
    """A next snapshot of ``jobs``: a stretch gone, jobs come (new ones, or ones of the pool:
    back, moved, or there twice), one replaced in place, two swapped."""
    out = list(jobs)
    for _ in range(rng.randint(0, 3)):
        kind = rng.randrange(5)
        if kind == 0 and out:
            at = rng.randrange(len(out))
            del out[at : at + rng.choice([1, 2, 9, 70, 600])]
        elif kind == 1:
            at = rng.randint(0, len(out))
            out[at:at] = [_job(k * 10_000 + n, rng, timeless=timeless) for n in range(rng.choice([1, 3, 20, 100, 700]))]
        elif kind == 2 and pool:
            out.insert(rng.randint(0, len(out)), rng.choice(pool))
        elif kind == 3 and out:
            out[rng.randrange(len(out))] = _job(k * 10_000 + 9_999, rng)
        elif kind == 4 and len(out) > 1:
            a, b = rng.randrange(len(out)), rng.randrange(len(out))
            out[a], out[b] = out[b], out[a]
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 1500), st.booleans(), st.sampled_from([0.0, 0.0, 0.001, 0.05]))
def test_the_order_from_the_last_snapshot_is_the_order_of_a_sort(
    seed: int, size: int, plain: bool, timeless: float
) -> None:
    rng = random.Random(seed)
    jobs = [_job(n, rng, plain=plain, timeless=timeless) for n in range(size)]
    pool = list(jobs)
    last = waiting_of(tuple(jobs), T0)
    for k in range(1, 6):
        jobs = _next(jobs, pool, rng, k, timeless)
        pool += jobs[-3:]
        now = T0 + k
        got = waiting_of(tuple(jobs), now, last)
        _same(got, _fresh(tuple(jobs), now))
        last = got


def _orders_from_the_last_one(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each order asked for from then on came from the last one (``_since``), in turn."""
    made: list[bool] = []
    since = view_module._since

    def counted(jobs: tuple[Job, ...], last: Waiting, change: JobsChange | None = None) -> Waiting | None:
        found = since(jobs, last, change)
        made.append(found is not None)
        return found

    monkeypatch.setattr(view_module, "_since", counted)
    return made


def test_most_orders_of_those_examples_come_from_the_last_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples above go through the work from the last order (not only through the sort)."""
    made = _orders_from_the_last_one(monkeypatch)
    for seed in range(40):
        rng = random.Random(seed)
        jobs = [_job(n, rng) for n in range(rng.randint(0, 1500))]
        last = waiting_of(tuple(jobs), T0)
        for k in range(1, 4):
            jobs = _next(jobs, [], rng, k)
            last = waiting_of(tuple(jobs), T0 + k, last)
            _same(last, _fresh(tuple(jobs), T0 + k))
    assert made.count(True) > len(made) // 2


def test_a_large_queue_with_stretches_gone_and_come_and_jobs_replaced() -> None:
    """The shapes of a daemon's passes: a stretch of the oldest gone, new ones at the end and in
    the middle, running ones replaced in place, each pass from the last one's."""
    rng = random.Random(7)
    jobs = [_job(n, rng) for n in range(6000)]
    last = waiting_of(tuple(jobs), T0)
    for k in range(1, 5):
        del jobs[100 : 100 + 700]
        jobs += [_job(k * 10_000 + n, rng) for n in range(600)]
        jobs[3000:3000] = [_job(k * 20_000 + n, rng) for n in range(50)]
        for at in range(0, len(jobs), 97):
            jobs[at] = _job(k * 30_000 + at, rng)
        got = waiting_of(tuple(jobs), T0 + k, last)
        _same(got, _fresh(tuple(jobs), T0 + k))
        last = got


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 400), st.sampled_from([1, 2, 3, 8]))
def test_the_order_from_the_last_one_in_blocks_of_a_few_jobs_is_the_order_of_a_sort(
    seed: int, size: int, block: int
) -> None:
    """The last order's blocks (``_Order``) at a few jobs each: jobs leave and come at their
    edges, blocks empty and split, and jobs of one submission time run over several blocks;
    the order is the sort's."""
    rng = random.Random(seed)
    jobs = [_job(n, rng) for n in range(size)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(view_module, "ORDER_BLOCK", block)
        last = waiting_of(tuple(jobs), T0)
        for k in range(1, 6):
            jobs = _next(jobs, [], rng, k)
            last = waiting_of(tuple(jobs), T0 + k, last)
            _same(last, _fresh(tuple(jobs), T0 + k))


def test_a_job_newer_than_every_other_then_one_just_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job put past the last block's last is that block's last from then on: a job that comes
    next, submitted between the two, goes before it."""
    monkeypatch.setattr(view_module, "ORDER_BLOCK", 2)
    made = _orders_from_the_last_one(monkeypatch)

    def waiting(number: int, age: float) -> Job:
        return Job(number, f"job{number}", "user", "PENDING", JobPhase.WAITING, 1, submitted=T0 - age)

    jobs = tuple(waiting(n, 100.0 - n) for n in range(9))
    last = waiting_of(jobs, T0)
    for k, age in enumerate((10.0, 50.0, 30.0), 1):
        jobs = (*jobs, waiting(100 + k, age))
        last = waiting_of(jobs, T0 + k, last)
        _same(last, _fresh(jobs, T0 + k))
    assert made == [True, True, True]


def test_an_order_taken_from_the_last_one_twice_is_the_sorts_both_times() -> None:
    """The first order from the last one takes its blocks and changes them; a second from the
    same last one makes them anew of its jobs, and is the sort's order too."""
    rng = random.Random(23)
    jobs = tuple(j for j in (_job(n, rng) for n in range(2000)) if j.submitted is not None)
    last = waiting_of(jobs, T0)
    first = waiting_of(jobs[30:], T0 + 1, last)
    assert first.order  # (the last one's blocks, changed: for the next order)
    new = (*jobs[:1000], *(_job(10_000 + n, rng) for n in range(40)), *jobs[1000:])
    for _ in range(2):
        _same(waiting_of(new, T0 + 2, last), _fresh(new, T0 + 2))
    _same(waiting_of(new, T0 + 2, first), _fresh(new, T0 + 2))


def test_nothing_waiting_changed_keeps_the_order_itself() -> None:
    rng = random.Random(3)
    jobs = [j for j in (_job(n, rng) for n in range(500)) if j.submitted is not None]
    last = waiting_of(tuple(jobs), T0)
    running = Job(1, "r", "user", "RUNNING", JobPhase.RUNNING, 1, submitted=T0)
    got = waiting_of((*jobs[:200], running, *jobs[200:]), T0 + 1, last)
    assert got.pending is last.pending
    _same(got, _fresh((*jobs[:200], running, *jobs[200:]), T0 + 1))


def test_the_cache_views_from_one_snapshot_to_the_next_equal_fresh_ones() -> None:
    rng = random.Random(11)
    cache = ViewCache()
    jobs = [_job(n, rng) for n in range(2000)]
    pool = list(jobs)
    for k in range(8):
        now = T0 + k
        view = cache.view(join([], (), snap(jobs, now=now), now=now), "master", 4)
        _same(view, _fresh(tuple(jobs), now))
        jobs = _next(jobs, pool, rng, k + 1)


def test_the_cache_sets_its_view_aside_from_the_collectors_walks() -> None:
    """The view a cache builds (its waiting order, as long as the queue, lives until the next
    state's) is set aside from the collector as made (``elb.core.gcpause``): in none of its
    generations, so that no collection walks its order's references."""
    rng = random.Random(12)
    jobs = [_job(n, rng) for n in range(500)]
    gc.collect()
    view = ViewCache().view(join([], (), snap(jobs, now=T0), now=T0), "master", 4)
    assert view.pending and gc.is_tracked(view.pending)
    young = {id(o) for generation in (0, 1, 2) for o in gc.get_objects(generation)}
    assert id(view.pending) not in young and id(view) not in young


def test_a_job_there_twice_leaves_once_or_both_times() -> None:
    rng = random.Random(5)
    jobs = [j for j in (_job(n, rng) for n in range(300)) if j.submitted is not None]
    twice = next(j for j in jobs if j.phase is JobPhase.WAITING)
    start = (*jobs[:50], twice, *jobs[50:])
    for nxt in (
        tuple(j for j in start if j is not twice),  # both gone
        (*jobs[:50], *jobs[51:]) if jobs[50] is not twice else start[1:],  # one gone
        (*start[:150], twice, *start[150:]),  # there three times
    ):
        last = waiting_of(start, T0)
        _same(waiting_of(nxt, T0 + 1, last), _fresh(nxt, T0 + 1))


def test_a_stretch_of_entries_replaced_by_as_many_is_worked_out_from_the_last_order() -> None:
    """A job over several nodes (an entry for each) replaced by another over as many, in place,
    beside waiting jobs gone and come: the order comes from the last one's, not from a sort."""
    rng = random.Random(13)
    jobs = [j for j in (_job(n, rng) for n in range(3000)) if j.submitted is not None]
    last = waiting_of(tuple(jobs), T0)
    for k, width in enumerate((2, 4, 7), start=1):
        at = rng.randrange(100, 2000)
        jobs[at : at + width] = [_job(k * 10_000 + n, rng) for n in range(width)]
        del jobs[2100:2150]
        jobs += [j for j in (_job(k * 20_000 + n, rng) for n in range(60)) if j.submitted is not None]
        got = view_module._since(tuple(jobs), last)
        assert got is not None
        _same(got, _fresh(tuple(jobs), T0 + k))
        last = got


def _change(old: tuple[Job, ...], new: tuple[Job, ...]) -> JobsChange:
    """How ``new`` differs from ``old`` as a producer that knows it hands it over: the jobs of
    each outside the stretches of the very same objects the two share (difflib's matching
    blocks, by identity), in their order."""
    blocks = SequenceMatcher(None, list(map(id, old)), list(map(id, new)), autojunk=False).get_matching_blocks()
    left: list[Job] = []
    came: list[Job] = []
    i = j = 0
    for a, b, size in blocks:
        left += old[i:a]
        came += new[j:b]
        i, j = a + size, b + size
    return JobsChange(old, new, tuple(left), tuple(came))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 1200), st.booleans(), st.sampled_from([0.0, 0.0, 0.001, 0.05]))
def test_the_order_from_the_change_handed_over_is_the_order_of_a_sort(
    seed: int, size: int, plain: bool, timeless: float
) -> None:
    """Each snapshot's waiting jobs from the last one's and the change handed over (at times a
    change of another snapshot, or none: then found by the walk) are a fresh view's."""
    rng = random.Random(seed)
    jobs = [_job(n, rng, plain=plain, timeless=timeless) for n in range(size)]
    pool = list(jobs)
    first = tuple(jobs)
    last = waiting_of(first, T0, None, _change((), first))  # (a cold view: no order to follow)
    _same(last, _fresh(first, T0))
    for k in range(1, 6):
        jobs = _next(jobs, pool, rng, k, timeless)
        pool += jobs[-3:]
        now, new = T0 + k, tuple(jobs)
        change = _change(last.jobs, new)
        if rng.random() < 0.2:  # a change against another read than the view's last
            change = _change(tuple(pool[: len(pool) // 2]), new)
        got = waiting_of(new, now, last, change)
        _same(got, _fresh(new, now))
        last = got


def test_a_change_of_the_last_snapshot_takes_the_place_of_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the change of the view's last jobs handed over, the two tuples are not walked; with a
    change of other jobs, or none, they are."""
    walked: list[int] = []
    walk = view_module._changes

    def counted(new: tuple[Job, ...], old: tuple[Job, ...]) -> tuple[list[Job], list[Job]] | None:
        walked.append(len(new))
        return walk(new, old)

    monkeypatch.setattr(view_module, "_changes", counted)
    rng = random.Random(17)
    jobs = tuple(j for j in (_job(n, rng) for n in range(3000)) if j.submitted is not None)
    last = waiting_of(jobs, T0)
    new = (*jobs[40:1500], *(_job(10_000 + n, rng) for n in range(30)), *jobs[1500:])
    new = tuple(j for j in new if j.submitted is not None)
    got = waiting_of(new, T0 + 1, last, _change(jobs, new))
    assert walked == []
    assert got.pending is not last.pending
    _same(got, _fresh(new, T0 + 1))
    for other in (None, _change(jobs[1:], new), _change(jobs, tuple(list(new)))):
        _same(waiting_of(new, T0 + 1, last, other), _fresh(new, T0 + 1))
    assert len(walked) == 3  # (the last change's jobs are equal to the snapshot's, not the very tuple)


def test_a_change_of_more_than_a_quarter_of_the_jobs_is_sorted_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(19)
    jobs = tuple(j for j in (_job(n, rng) for n in range(400)) if j.submitted is not None)
    last = waiting_of(jobs, T0)
    new = jobs[150:]
    monkeypatch.setattr(view_module, "_Order", None)  # (not made: sorted anew)
    _same(waiting_of(new, T0 + 1, last, _change(jobs, new)), _fresh(new, T0 + 1))
