"""The shared placement rule: FreeIndex against a scan of every node, Packing against task-by-task first fit."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from elb.core.policy.forecast import Forecast, _capacity, forecast
from elb.core.policy.placement import Bin, FreeIndex, Key, Packing, host_order, named, width
from elb.core.policy.view import ClusterView, cluster_view
from elb.core.state import join
from tests.unit.factories import T0, host, pending, snap


def test_host_order_and_width() -> None:
    assert sorted(["node1000", "node999", "node010", "node002"], key=host_order) == [
        "node002",
        "node010",
        "node999",
        "node1000",
    ]
    assert (width(8, 8), width(9, 8), width(24, 8), width(10**9, 8)) == (0, 2, 3, 125_000_000)


@pytest.mark.parametrize("seed", range(20))
def test_free_index_answers_as_a_scan_of_every_node_would(seed: int) -> None:
    rng = random.Random(seed)
    spn = rng.choice([4, 8, 32])
    index: FreeIndex[int] = FreeIndex(spn)
    nodes: dict[int, tuple[int, int]] = {}
    for _ in range(400):
        key = rng.randrange(60)
        if rng.random() < 0.15:
            index.remove(key)
            nodes.pop(key, None)
        else:
            total = rng.choice([spn, spn, spn // 2])
            free = rng.randrange(total + 1)
            index.set(key, free, total)
            nodes[key] = (free, total)
        slots = rng.randrange(1, spn + 1)
        fits = sorted(k for k, (f, _) in nodes.items() if f >= slots)
        assert index.first(slots) == (fits[0] if fits else None)
        fullest = min(((f, k) for k, (f, _) in nodes.items() if f >= slots), default=None)
        assert index.fullest(slots) == (fullest[1] if fullest else None)
        empty = sorted(k for k, (f, t) in nodes.items() if f == t and t >= spn)
        assert index.empties(3) == empty[:3]
        assert len(index) == len(nodes)


@pytest.mark.parametrize("seed", range(20))
def test_free_index_set_many_builds_the_index_one_set_at_a_time_would(seed: int) -> None:
    """On an empty index (sorted once) or not, with keys given twice or not."""
    rng = random.Random(seed)
    spn = rng.choice([4, 8])
    entries = []
    for _ in range(rng.randrange(60)):
        total = rng.choice([spn, spn, spn // 2, 0])
        entries.append((rng.randrange(80), rng.randrange(total + 1), total))
    one: FreeIndex[int] = FreeIndex(spn)
    many: FreeIndex[int] = FreeIndex(spn)
    if rng.random() < 0.3:  # not empty: one set at a time
        one.set(3, 1, spn)
        many.set(3, 1, spn)
    for key, free, total in entries:
        one.set(key, free, total)
    many.set_many(entries)
    assert many._free == one._free
    assert many._buckets == one._buckets
    assert many._empty == one._empty


def _reference(
    bins: Sequence[tuple[str | None, int, int]], jobs: list[tuple[int, int]], spn: int
) -> tuple[int, set[str]]:
    """Task-by-task first fit onto a list of bins, new nodes appended as needed (no limit)."""
    free = [f for _, f, _ in bins]
    total = [t for _, _, t in bins]
    names: list[str | None] = [n for n, _, _ in bins]
    new = 0
    assigned: set[str] = set()
    for slots, tasks in jobs:
        for _ in range(tasks):
            if slots > spn:
                k = math.ceil(slots / spn)
                take = [i for i in range(len(free)) if free[i] == total[i] and total[i] >= spn][:k]
                for i in take:
                    free[i] = 0
                    if names[i] is not None:
                        assigned.add(names[i])  # type: ignore[arg-type]
                new += k - len(take)
                continue
            for i in range(len(free)):
                if free[i] >= slots:
                    free[i] -= slots
                    if names[i] is not None:
                        assigned.add(names[i])  # type: ignore[arg-type]
                    break
            else:
                new += 1
                names.append(None)
                free.append(spn - slots)
                total.append(spn)
    return new, assigned


@pytest.mark.parametrize("seed", range(30))
def test_packing_places_arrays_as_task_by_task_first_fit_would(seed: int) -> None:
    rng = random.Random(seed)
    spn = rng.choice([4, 8])
    bins = [(f"node{i:03d}", rng.randrange(spn + 1), spn) for i in range(rng.randrange(8))]
    jobs = [(rng.choice([1, 1, 2, 3, spn, spn + 1, 2 * spn]), rng.randrange(1, 6)) for _ in range(rng.randrange(1, 8))]
    new, assigned = _reference(bins, jobs, spn)
    packing = Packing([Bin(n, f, t) for n, f, t in bins], spn, limit=10**6)
    for slots, tasks in jobs:
        packing.place(slots, tasks)
    assert (packing.new_nodes, packing.assigned, packing.complete) == (new, assigned, True)


def test_packing_keeps_placing_on_existing_bins_past_the_limit() -> None:
    packing = Packing([Bin("node001", 2, 8)], 8, limit=1)
    assert packing.place(8, 5).new_nodes == 5  # counted arithmetically, past the limit
    later = packing.place(2, 3)
    assert (later.new_nodes, later.short) == (0, 2)  # one task fits node001; two fit nowhere counted
    assert packing.assigned == {"node001"}
    assert not packing.complete


@pytest.mark.parametrize("seed", range(40))
def test_past_the_limit_jobs_no_bin_has_room_for_are_answered_as_a_search_would(seed: int) -> None:
    """Once new nodes are no longer counted, a narrow job at least as wide as one that found no
    existing bin is answered without a search: the same answer as searching."""
    rng = random.Random(seed)
    spn = rng.choice([4, 8])
    bins = [(f"node{i:03d}", rng.randrange(spn + 1), spn) for i in range(rng.randrange(12))]
    jobs = [(rng.choice([1, 1, 2, 3, spn, spn + 1]), rng.randrange(1, 6)) for _ in range(rng.randrange(1, 40))]
    limit = rng.randrange(4)
    quick = Packing([Bin(n, f, t) for n, f, t in bins], spn, limit=limit)
    searching = Packing([Bin(n, f, t) for n, f, t in bins], spn, limit=limit)
    for slots, tasks in jobs:
        searching._no_room = spn + 1  # never answers without a search
        assert quick.place(slots, tasks) == searching.place(slots, tasks)
    assert (quick.new_nodes, quick.assigned, quick.complete) == (
        searching.new_nodes,
        searching.assigned,
        searching.complete,
    )
    assert [(b.name, b.free) for b in quick.bins] == [(b.name, b.free) for b in searching.bins]


def _forecast_job_by_job(view: ClusterView, horizon: float, limit: int) -> Forecast:
    """forecast() as a plain walk: every waiting job placed, none counted in bulk."""
    bins, ready, booting, freed = _capacity(view, horizon)
    packing = Packing(bins, view.slots_per_node, max(0, limit))
    short_jobs = short_slots = 0
    for job in view.pending:
        short = packing.place(job.slots, job.tasks).short
        if short:
            short_jobs += 1
            short_slots += short * job.slots
    return Forecast(
        packing.new_nodes,
        short_jobs,
        short_slots,
        frozenset(packing.assigned),
        ready,
        booting,
        freed,
        packing.complete,
    )


@pytest.mark.parametrize("seed", range(60))
def test_forecast_counts_the_jobs_after_saturation_as_a_walk_would(seed: int) -> None:
    rng = random.Random(seed)
    spn = rng.choice([2, 4, 8])
    hosts = [host(f"node{i:03d}", slots=spn, used=rng.randrange(spn + 1)) for i in range(1, rng.randrange(1, 6))]
    sizes = [0, 1, 1, 1, 2, spn, spn + 1, 3 * spn]
    jobs = [
        pending(i, waited=rng.randrange(1000), slots=rng.choice(sizes), tasks=rng.randrange(1, 5))
        for i in range(1, rng.randrange(2, 80))
    ]
    view = cluster_view(join([], (), snap(jobs, hosts), now=T0), "master", spn)
    limit = rng.randrange(3)
    assert forecast(view, T0 + 300, limit=limit) == _forecast_job_by_job(view, T0 + 300, limit)


@pytest.mark.parametrize("seed", range(30))
def test_packing_on_a_kept_index_read_through_places_as_on_the_list_of_bins(seed: int) -> None:
    """The ready workers in a ``FreeIndex`` the caller keeps (never changed by the packing), named
    bins over and beside them and anonymous ones after: the same placements as one list of bins
    in host order, and the kept index as it was."""
    rng = random.Random(seed)
    spn = rng.choice([4, 8])
    names = [f"node{i:03d}" for i in rng.sample(range(1, 200), 40)]
    ready: dict[str, tuple[int, int]] = {}
    for name in names[:30]:
        total = rng.choice([spn, spn, spn // 2])
        ready[name] = (rng.randrange(total + 1), total)
    over: dict[str, tuple[int, int]] = {}
    for name in rng.sample(names[:30], 8) + names[30:36]:  # gains on ready ones, booting ones
        total = ready[name][1] if name in ready else spn
        over[name] = (rng.randint(ready[name][0] if name in ready else 0, total), total)
    tail = [(spn, spn)] * rng.randrange(4)
    index: FreeIndex[tuple[int, int, str]] = FreeIndex(spn)
    for name, (free, total) in ready.items():
        index.set(named(name), free, total)
    kept = dict(index._free)
    merged = {**ready, **over}
    listed = [Bin(n, *merged[n]) for n in sorted(merged, key=host_order)] + [Bin(None, *b) for b in tail]
    plain = Packing(listed, spn, rng.randrange(6))
    through = Packing([Bin(None, *b) for b in tail], spn, plain.limit, index, [Bin(n, *over[n]) for n in sorted(over)])
    for _ in range(40):
        slots = rng.choice([1, 2, 3, spn, spn + 1, 2 * spn])
        tasks = rng.choice([1, 1, 2, 5])
        assert through.place(slots, tasks) == plain.place(slots, tasks)
        assert through.saturated == plain.saturated
    assert (through.new_nodes, through.complete, through.assigned) == (plain.new_nodes, plain.complete, plain.assigned)
    assert index._free == kept


@pytest.mark.parametrize("seed", range(60))
def test_a_packing_on_a_kept_index_places_as_on_the_list_of_its_bins(seed: int) -> None:
    """Placing on the workers of an index read through (``ready``, keyed ``named``), with named
    bins over some of them, gives what placing on the same bins as a list in host order gives:
    each job's answer, the new nodes, the workers assigned; the index is never changed."""
    rng = random.Random(seed)
    spn = rng.choice([4, 8])
    names = [f"node{i:03d}" for i in rng.sample(range(1, 200), rng.randrange(1, 14))]
    free = {n: rng.choice([0, spn, spn, rng.randrange(spn + 1)]) for n in names}
    over = {n: min(spn, free[n] + rng.randrange(spn)) for n in names if rng.random() < 0.3}
    freed = rng.randrange(3)  # whole nodes that ending wide jobs free, after the workers
    jobs = [
        (rng.choice([1, 2, 3, spn, spn + 1, 2 * spn, 3 * spn]), rng.randrange(1, 4))
        for _ in range(rng.randrange(1, 12))
    ]
    limit = rng.randrange(6)
    ready: FreeIndex[Key] = FreeIndex(spn)
    for n, f in free.items():
        ready.set(named(n), f, spn)
    kept = Packing(
        [Bin(None, spn, spn) for _ in range(freed)], spn, limit, ready, [Bin(n, f, spn) for n, f in over.items()]
    )
    in_order = sorted(names, key=host_order)
    listed = Packing(
        [Bin(n, over.get(n, free[n]), spn) for n in in_order] + [Bin(None, spn, spn) for _ in range(freed)], spn, limit
    )
    for slots, tasks in jobs:
        assert kept.place(slots, tasks) == listed.place(slots, tasks)
    assert (kept.new_nodes, kept.assigned, kept.complete) == (listed.new_nodes, listed.assigned, listed.complete)
    assert ready._free == {named(n): (f, spn) for n, f in free.items()}
