"""The demand split and the start-time reads, against plain reference versions on generated queues.

``split_demand`` and ``StartTimes.update`` run on every pass over every waiting job (50,000 of
them on a large cluster), so they are written for speed; the references here are the plain
definitions (``place`` job by job; a sort of the jobs not asked about yet), and the two must give
the very same answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.demand import DemandSplit, NotDemand
from elb.core.groups import NodeGroups
from elb.core.model import Job, Snapshot
from elb.schedulers.sge.demand import DemandError, JobBinding, NotYet, Servable, check_offers, place
from elb.schedulers.sge.servable import UNREAD, split_demand
from elb.schedulers.sge.starttimes import StartTimes
from elb.schedulers.sge.states import job_phase
from tests.unit.test_demand import EXTRA, GROUP_SETS, NOW, PLAIN, SITE, waiting_jobs


def reference_split(
    snapshot: Snapshot,
    gs: NodeGroups,
    site: object,
    name: str | None,
    starts: Mapping[int, float],
    unread: Mapping[int, str] | None = None,
) -> DemandSplit:
    """What ``split_demand`` means: ``place`` each eligible waiting job; keep the servable ones
    (none when the groups do not fit the site); a job whose start time was not read is held."""
    kept, refused, group_of = [], [], {}
    try:
        check_offers(gs, site)  # type: ignore[arg-type]
    except DemandError as err:
        misfit = f"the node group configuration does not fit the site: {err}"
    else:
        misfit = ""
    for j in snapshot.jobs:
        if not j.is_pending:
            kept.append(j)
            continue
        if misfit:
            refused.append(NotDemand(j, misfit))
            continue
        if unread and j.job_id in unread:
            refused.append(NotDemand(j, UNREAD + unread[j.job_id], held=True))
            continue
        binding = JobBinding(j.hard_queues, starts.get(j.job_id))
        p = place(j, gs, site, snapshot.now, binding=binding, new_node_name=name)  # type: ignore[arg-type]
        if isinstance(p, Servable):
            kept.append(j)
            group_of[j] = p.group.name
        else:
            refused.append(NotDemand(j, p.reason, p.start_time if isinstance(p, NotYet) else None))
    return DemandSplit(dataclasses.replace(snapshot, jobs=tuple(kept)), tuple(refused), group_of)


@settings(max_examples=100, deadline=None)
@given(
    waiting_jobs(),
    st.sampled_from(range(len(GROUP_SETS))),
    st.sampled_from([SITE, PLAIN, EXTRA]),
    st.lists(st.sampled_from([NOW - 60, NOW + 3600]), max_size=40),
    st.sampled_from([None, "node002"]),
    st.dictionaries(st.integers(1, 7), st.sampled_from(["qstat -j timed out", "not asked yet"]), max_size=4),
)
def test_split_demand_is_place_job_by_job(
    drawn: tuple[list[Job], list[JobBinding | None]],
    which: int,
    site: object,
    times: list[float],
    name: str | None,
    unread: dict[int, str],
) -> None:
    """Each eligible waiting job placed alone, those whose start time was not read (``unread``,
    several sharing a reason) held with why."""
    jobs, bindings = drawn
    queued = [
        dataclasses.replace(j, hard_queues=b.hard_queues if b is not None else (), job_id=j.job_id % 7 + 1)
        for j, b in zip(jobs, bindings, strict=True)
    ]
    running = Job(99, "r", "u", "r", job_phase("r"), 1, started=NOW - 60, queue="all.q@node001")
    snapshot = Snapshot(NOW, (running, *queued), ())
    starts = {n + 1: t for n, t in enumerate(times[:7])}
    gs = GROUP_SETS[which]
    got = split_demand(snapshot, gs, site, new_node_name=name, start_times=starts, unread=unread)  # type: ignore[arg-type]
    want = reference_split(snapshot, gs, site, name, starts, unread)
    assert got.snapshot == want.snapshot
    assert got.not_demand == want.not_demand
    assert dict(got.group_of) == dict(want.group_of)
    assert got == want


def reference_asked(known: set[int], pending: Sequence[Job], limit: int) -> list[int]:
    """The jobs ``StartTimes.update`` asks about: the oldest ``limit`` not asked about yet."""
    new = sorted(
        (j for j in pending if j.job_id not in known),
        key=lambda j: (j.submitted if j.submitted is not None else 0.0, j.job_id),
    )
    ids: list[int] = []
    for j in new:
        if j.job_id not in ids:
            ids.append(j.job_id)
        if len(ids) >= limit:
            break
    return ids


class Recorder:
    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        self.asked.append(list(job_ids))
        return {j: (NOW + j if j % 3 == 0 else None) for j in job_ids}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 30), max_size=60), st.integers(1, 8))
def test_start_times_ask_about_the_oldest_jobs_not_asked_about_yet(ids: list[int], limit: int) -> None:
    """Entries of one job share its submission time (array tasks split by state); ties broken
    by job number; a job without a submission time first."""
    pending = [
        Job(i, "j", "u", "qw", job_phase("qw"), 1, submitted=None if i % 5 == 0 else NOW - i % 3 * 10) for i in ids
    ]
    times, sge = StartTimes(per_pass=limit), Recorder()
    known: set[int] = set()
    for _ in range(4):
        calls = len(sge.asked)
        got = times.update(sge, pending)
        want = reference_asked(known, pending, limit)
        assert sge.asked[calls:] == ([want] if want else [])
        known |= set(want)
        assert got == {i: NOW + i for i in known if i % 3 == 0}


def test_the_split_leaves_the_cycle_collector_as_it_found_it() -> None:
    import gc

    snapshot = Snapshot(NOW, (Job(1, "j", "u", "qw", job_phase("qw"), 1, submitted=NOW - 60),), ())
    assert gc.isenabled()
    split_demand(snapshot, GROUP_SETS[0], SITE)
    assert gc.isenabled()
    gc.disable()
    try:
        split_demand(snapshot, GROUP_SETS[0], SITE)
        assert not gc.isenabled()
    finally:
        gc.enable()
