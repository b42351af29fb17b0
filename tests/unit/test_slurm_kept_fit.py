"""Slurm's peer's shortcuts held to the plain way: a fit carried on over the jobs submitted since
(``peers._KeptFit``) against a fresh packing of the whole queue, and the quiet hint's look at the
first idle worker (``SlurmPolicy._first_due``) against the list of due ones ``decide`` makes."""

from __future__ import annotations

import random

import pytest

from elb.core.model import Host, Job, Snapshot
from elb.core.policy.peers import Limits, SlurmPolicy, _Fit, _fit, _KeptFit, _SlurmReads
from elb.core.policy.placement import Packing
from elb.core.policy.tally import WorkerTally
from tests.unit.factories import T0, host, pending

NAMES = [f"node{i:03d}" for i in range(1, 9)]
SPN = 8
STEPS = ["submit", "submit", "submit", "start", "start and submit", "withdraw", "host", "forget", "limit", "nothing"]


def _queue(rng: random.Random) -> list[Job]:
    """Waiting jobs, each submitted after the one before (the tally's order is theirs): narrow,
    arrays, and wide ones over several nodes."""
    jobs = []
    for i in range(1, 121):
        slots, tasks = rng.choice([(1, 1), (2, 3), (4, 1), (8, 1), (3, 5), (12, 1), (20, 2), (1, 9)])
        jobs.append(pending(i, 10_000.0 - 10 * i, slots, tasks))
    return jobs


@pytest.mark.parametrize("seed", range(6))
def test_a_kept_fit_is_the_fit_of_a_fresh_packing_at_every_step(seed: int) -> None:
    """Steps that submit jobs, start the oldest one (and submit others, so the queue is as long or
    longer), withdraw the newest one, change a worker's free slots (with the tally forgotten or not),
    change the limit, or nothing:
    the kept fit equals a fresh packing's of the whole queue each time, and carries on at the
    steps that only submit."""
    rng = random.Random(seed)
    hosts = {(n, used): host(n, slots=SPN, used=used) for n in NAMES for used in (0, 2, 5, 8)}
    chosen: dict[str, Host] = {n: hosts[n, rng.choice((0, 2, 5, 8))] for n in NAMES}
    jobs = _queue(rng)
    first, last = 0, 3  # the waiting jobs: jobs[first:last]
    limit = 3
    tally, kept = WorkerTally(), _KeptFit()
    carried = 0
    for _ in range(150):
        step = rng.choice(STEPS)
        if step.startswith("start") and first < last - 1:
            first += 1
        if step.endswith("submit"):
            last = min(len(jobs), last + rng.randint(1, 3))
        if step == "withdraw" and first < last - 1:
            last -= 1
        if step == "forget":  # the tally starts again (another index), and a worker changes
            tally.clear()
        if step in {"host", "forget"}:
            name = rng.choice(NAMES)
            chosen[name] = hosts[name, rng.choice((0, 2, 5, 8))]
        elif step == "limit":
            limit = rng.choice((0, 1, 3, 10))
        snapshot = Snapshot(T0, tuple(jobs[first:last]), tuple(chosen.values()))
        assert tally.update(snapshot, (), "master", "node")
        queue = tally.pending(snapshot, T0)
        assert [j.job_id for j in queue] == [j.job_id for j in jobs[first:last]]
        packing, placed = kept._packing, kept._jobs
        got = kept.fit(tally, SPN, limit, queue)
        fresh = _fit(Packing([], SPN, limit, ready=tally.name_bins(SPN)), queue)
        assert got == fresh
        carried += packing is not None and kept._packing is packing and len(queue) > len(placed)
    assert carried > 10


def _reads(idle: list[tuple[float, str]]) -> _SlurmReads:
    return _SlurmReads(len(idle), (), SPN, idle, lambda limit: _Fit(frozenset(), 0), lambda n: ())


@pytest.mark.parametrize("seed", range(20))
def test_the_first_due_idle_worker_is_when_decide_finds_one(seed: int) -> None:
    """``now`` when ``_idle_due`` finds a worker to power down, else its next time (inf: none),
    for idle workers some of which a waiting job was given, some due, some not yet."""
    rng = random.Random(seed)
    policy = SlurmPolicy(Limits(max_nodes=20, slots_per_node=SPN))
    now = T0
    for _ in range(50):
        idle = sorted((now - rng.choice([0.0, 100.0, 299.0, 300.0, 301.0, 900.0]), n) for n in rng.sample(NAMES, 5))
        assigned = frozenset(n for _, n in idle if rng.random() < 0.4)
        reads, fit = _reads(idle), _Fit(assigned, 0)
        removals, nxt = policy._idle_due(reads, fit, now)
        assert policy._first_due(reads, fit, now) == (now if removals else nxt)
