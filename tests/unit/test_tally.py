"""Slurm's, StarCluster's and ParallelCluster's peers reading the cluster from a ``WorkerTally``, and elb's policy
reading it from a ``CapacityTally`` (each brought up to date by what changed), decide exactly as
they do from the full view (``cluster_view``), at every call of a replay and on hand-built
sequences of cluster states; and the simulator's snapshots carry their changes."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.model import History, Host, Job, Node, NodeState, Plan, Snapshot
from elb.core.policy.default import ElbPolicy
from elb.core.policy.peers import Limits, ParallelclusterPolicy, SlurmPolicy, StarclusterPolicy
from elb.core.policy.placement import FreeIndex, Key, named
from elb.core.policy.tally import CapacityTally, Noted, Revised, WorkerTally
from elb.core.policy.view import oldest_wait
from elb.core.state import ClusterState, join, started_host
from elb.schedulers.sge.states import job_phase
from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.runner import prepare, replay
from elb.simulate.swf import SimJob, Workload, read_swf
from tests.unit.factories import T0, host, node, pending, running
from tests.unit.test_simulate_logs import needs_logs
from tests.unit.traces import KTH

Peer = SlurmPolicy | StarclusterPolicy | ParallelclusterPolicy | ElbPolicy


def peer(name: str, limits: Limits, **elb: object) -> Peer:
    """Slurm's, StarCluster's or ParallelCluster's peer, or elb's policy (``name`` "elb", "elb-hour": per-hour
    billing) with these limits and ``elb``'s other options."""
    if name.startswith("elb"):
        billing = "hour" if name == "elb-hour" else "second"
        cfg = PolicyConfig(
            min_nodes=limits.min_nodes,
            max_nodes=limits.max_nodes,
            slots_per_node=limits.slots_per_node,
            billing=billing,
            **elb,
        )
        return ElbPolicy(cfg, ClusterConfig(master=limits.master, node_prefix=limits.node_prefix))
    if name == "parallelcluster":
        return ParallelclusterPolicy(limits)
    return SlurmPolicy(limits) if name == "slurm" else StarclusterPolicy(limits)


@dataclass
class Twin:
    """A peer with its tally, checked at every call against the same peer on the full view
    (``calls``: the checked calls, of ``decide`` and of ``quiet_until``, which the simulator asks
    before a pass as well)."""

    quick: Peer
    calls: int = 0
    reference: Peer = field(init=False)
    name: str = "twin"

    def __post_init__(self) -> None:
        self.reference = dataclasses.replace(self.quick, incremental=False)

    def decide(self, state: ClusterState, history: History) -> Plan:
        now = state.now
        plan = self.quick.decide(state, history)
        assert plan == self.reference.decide(state, history), now
        self.calls += 1
        return plan

    def quiet_until(self, state: ClusterState, history: History) -> float:
        now = state.now
        until = self.quick.quiet_until(state, history)
        assert until == self.reference.quiet_until(state, history), now
        self.calls += 1
        return until


def synthetic_jobs(seed: int, count: int = 400) -> list[SimJob]:
    """Narrow, smp and wide jobs arriving in bursts, some with a requested time (for backfill)."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(count):
        t += rng.choice([0.0, 0.0, 5.0, 30.0, 400.0, 1500.0])
        slots = rng.choice([1, 1, 2, 4, 8, 12, 16, 40])
        run = rng.uniform(30, 4000)
        jobs.append(SimJob(i + 1, t, run, slots, run * rng.choice([1.0, 1.5]) if rng.random() < 0.5 else None))
    return jobs


@pytest.mark.parametrize("name", ["slurm", "starcluster", "parallelcluster", "elb", "elb-hour"])
@pytest.mark.parametrize("dispatch", ["sge", "fifo", "easy"])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_decision_of_a_replay_is_the_full_views(name: str, dispatch: str, seed: int) -> None:
    twin = Twin(peer(name, Limits(min_nodes=1, max_nodes=12, slots_per_node=8)))
    # StarCluster's master runs jobs (as ``replay`` sets it up for that peer)
    settings = SimSettings(
        slots_per_node=8,
        max_nodes=12,
        poll_interval=10.0,
        dispatch=dispatch,  # type: ignore[arg-type]
        master_exec_slots=8 if name == "starcluster" else 0,
    )
    Simulator(synthetic_jobs(seed), twin, settings).run()
    assert twin.calls > 100


def test_the_simulators_snapshots_say_what_changed_since_the_last_one() -> None:
    sim = Simulator(synthetic_jobs(3, 60), SlurmPolicy(Limits(max_nodes=12, slots_per_node=8)), SimSettings())
    seen: list[tuple[Snapshot, tuple[Node, ...]]] = []
    real = sim.snapshot

    def snapshot(now: float) -> tuple[Snapshot, tuple[Node, ...]]:
        seen.append(real(now))
        return seen[-1]

    sim.snapshot = snapshot  # type: ignore[method-assign]
    sim.run()
    revised = 0
    for (before, nodes_before), (after, nodes_after) in itertools.pairwise(seen):
        for old, new in ((before.jobs, after.jobs), (before.hosts, after.hosts), (nodes_before, nodes_after)):
            if new is old:
                continue
            assert isinstance(new, Revised)
            assert new.after == id(old)
            before_ids, gone, came = {id(o) for o in old}, {id(g) for g in new.gone}, {id(c) for c in new.came}
            assert gone <= before_ids  # only what the last one held went; what came is new
            assert not came & before_ids
            assert (before_ids - gone) | came == {id(o) for o in new}
            revised += 1
    assert revised > 50


# Three one-slot jobs on a one-slot master: two wait with nothing changing until StarCluster's
# wait time, when the pass after the changes alone (none) launches a node.
_WAIT_ALONE = [SimJob(i, 0.0, 20000.0, 1, None) for i in (1, 2, 3)]


@pytest.mark.parametrize(("jobs", "exec_slots"), [(synthetic_jobs(3, 60), 8), (_WAIT_ALONE, 1)])
def test_the_simulators_noted_changes_and_the_snapshots_after_them_say_what_changed(
    jobs: list[SimJob], exec_slots: int
) -> None:
    """StarCluster's hint before a pass is given the changes alone (``Noted``); every tuple handed
    out after them, noted or whole, revises the last one (after changes alone with none in them
    too), and a whole one holds every object."""
    policy = StarclusterPolicy(Limits(max_nodes=12, slots_per_node=8))
    sim = Simulator(jobs, policy, SimSettings(master_exec_slots=exec_slots))
    handed: list[tuple[tuple[object, ...], ...]] = []
    real_snapshot, real_noted = sim.snapshot, sim._noted

    def snapshot(now: float) -> tuple[Snapshot, tuple[Node, ...]]:
        out = real_snapshot(now)
        handed.append((out[0].jobs, out[0].hosts, out[1]))
        return out

    def noted() -> tuple[Noted[Job], Noted[Host], Noted[Node]] | None:
        out = real_noted()
        if out is not None:
            handed.append(out)
        return out

    sim.snapshot, sim._noted = snapshot, noted  # type: ignore[method-assign]
    sim.run()
    live = [{id(o) for o in first} for first in handed[0]]
    kinds: Counter[str] = Counter()
    for before, after in itertools.pairwise(handed):
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            if new is old and not isinstance(old, Noted):
                continue
            assert isinstance(new, Revised)
            assert new.after == id(old)
            gone, came = {id(g) for g in new.gone}, {id(c) for c in new.came}
            assert gone <= live[i]
            assert not came & live[i]
            live[i] = (live[i] - gone) | came
            if isinstance(new, Noted):
                assert len(new) == 0
                kinds["noted"] += 1
            else:
                assert live[i] == {id(o) for o in new}
                kinds["whole after noted" if isinstance(old, Noted) else "whole"] += 1
    assert kinds["noted"] > 5
    assert kinds["whole after noted"] > 0


@pytest.mark.parametrize("options", [{"launch_delay": 120.0}, {"grow": "wait_time"}, {"boot_time": 900.0}])
def test_every_decision_of_elbs_replay_is_the_full_views_with_other_options(options: dict[str, object]) -> None:
    twin = Twin(peer("elb", Limits(min_nodes=1, max_nodes=12, slots_per_node=8), **options))
    Simulator(synthetic_jobs(4), twin, SimSettings(slots_per_node=8, max_nodes=12, poll_interval=10.0)).run()
    assert twin.calls > 100


@needs_logs
@pytest.mark.parametrize("name", ["slurm", "starcluster", "parallelcluster", "elb"])
@pytest.mark.parametrize("copies", [1, 4])
def test_a_kth_replay_is_identical_with_and_without_the_tally(name: str, copies: int) -> None:
    """The way the fast-forward test compares: every placement, node life and figure."""
    wl = read_swf(KTH, start=100 * 86400, days=4)
    jobs = [
        SimJob(j.job_id * copies + c, j.submit + (c * 937) % 3600, j.run, j.slots, j.requested)
        for j in wl.jobs
        for c in range(copies)
    ]
    prepared = prepare(Workload(wl.source, jobs), 8, 52 * copies)
    outs = []
    policies = []
    for incremental in (True, False):
        policy = dataclasses.replace(
            peer(name, Limits(max_nodes=52 * copies, slots_per_node=8)), incremental=incremental
        )
        settings = SimSettings(slots_per_node=8, max_nodes=52 * copies, record=True)
        outs.append(replay(prepared, policy, settings, billing="second", price=1.0))
        policies.append(policy)
    if isinstance(policies[0], ElbPolicy):  # per-second billing: the idle workers read by idle since alone
        assert policies[0].tally._by_since is not None and policies[0].tally._idle is None
    (fast, fout), (slow, sout) = outs
    assert fout.placements == sout.placements
    assert fout.nodes == sout.nodes
    assert fout.decisions == sout.decisions
    ignore = {"replay_seconds"}
    assert {k: v for k, v in fast.as_dict().items() if k not in ignore} == {
        k: v for k, v in slow.as_dict().items() if k not in ignore
    }


# -- hand-built sequences: plain tuples and lists, objects kept or made again, odd inputs ------------

NAMES = [f"node{i:03d}" for i in range(1, 8)] + ["master", "other9"]
STATES = [NodeState.READY, NodeState.READY, NodeState.PROVISIONING, NodeState.DRAINING, NodeState.TERMINATED]


def _pool() -> tuple[list[Host], list[Node], list[Job]]:
    """Objects to pick from: picking the same one again is what a tally takes as unchanged."""
    hosts = [host(n, slots=s, used=u, states=q) for n in NAMES for s, u, q in ((8, 0, ""), (8, 3, ""), (8, 8, "u"))]
    nodes = [
        node(n, age, st_, last_busy_at=T0 - idle, slots=8 if age > 200 else None)
        for n in NAMES
        for age, st_, idle in ((900.0, STATES[0], 100.0), (500.0, STATES[1], 400.0), (30.0, STATES[2], 0.0))
    ]
    nodes += [node(n, 50.0, s) for n in NAMES[:3] for s in STATES[3:]]
    jobs = [running(100 + i, n, slots=2) for i, n in enumerate(NAMES)]
    # With a requested run time (the forecast finds them by their expected end), one wide.
    jobs += [
        dataclasses.replace(running(120 + i, n, slots=s), hard_runtime=rt)
        for i, (n, s, rt) in enumerate([(NAMES[0], 1, 300.0), (NAMES[1], 12, 60.0), (NAMES[2], 3, 4000.0)])
    ]
    jobs += [
        pending(i, waited, slots, tasks)
        for i, (waited, slots, tasks) in enumerate([(10, 1, 1), (50, 4, 3), (50, 12, 1), (90, 20, 2), (10, 1, 1)], 1)
    ]
    jobs.append(Job(50, "held", "u", "hqw", job_phase("hqw"), 1, submitted=T0 - 5))
    jobs.append(Job(51, "nosubmit", "u", "qw", job_phase("qw"), 2))
    return hosts, nodes, jobs


def _minus(items: Sequence[object], less: Sequence[object]) -> list[object]:
    """``items`` without ``less``, as multisets of objects (by identity)."""
    left = Counter(map(id, less))
    out = []
    for o in items:
        if left[id(o)]:
            left[id(o)] -= 1
        else:
            out.append(o)
    return out


HOSTS, NODES, JOBS = _pool()
steps = st.lists(
    st.tuples(
        st.lists(st.sampled_from(HOSTS), max_size=8),
        st.lists(st.sampled_from(NODES), max_size=8),
        st.lists(st.sampled_from(JOBS), max_size=8),
        st.sampled_from(["tuple", "list", "revised"]),
        st.floats(0, 1000),
    ),
    min_size=1,
    max_size=6,
)


def _as_given(
    given: tuple[Sequence[object], ...], kind: str, last: list[tuple[object, ...]]
) -> tuple[list[Sequence[object]], list[tuple[object, ...]]]:
    """Each of ``given`` as a step of kind ``kind`` hands it: a list, a tuple, or a ``Revised``
    tuple saying what changed since ``last`` (the tuples handed the step before); and the tuples
    handed this time (``last`` unchanged when lists were)."""
    made: list[Sequence[object]] = []
    for i, items in enumerate(given):
        if kind == "list":
            made.append(list(items))
        elif kind == "revised" and last:
            before = last[i]
            made.append(Revised(items, before, _minus(items, before), _minus(before, items)))
        else:
            made.append(tuple(items))
    if kind != "list":
        last = [tuple_ for tuple_ in made if isinstance(tuple_, tuple)]
    return made, last


@settings(max_examples=300, deadline=None)
@given(
    steps=steps,
    configured=st.sampled_from([8, None]),
    min_nodes=st.integers(0, 3),
    name=st.sampled_from(["slurm", "starcluster", "parallelcluster", "elb", "elb-hour"]),
    changed=st.sampled_from([None, -100.0, -1000.0]),
)
def test_a_sequence_of_cluster_states_gets_the_full_views_plans(
    steps: list[tuple[list[Host], list[Node], list[Job], str, float]],
    configured: int | None,
    min_nodes: int,
    name: str,
    changed: float | None,
) -> None:
    """``changed``: when the cluster last changed (StarCluster waits to stabilize after one)."""
    twin = Twin(peer(name, Limits(min_nodes=min_nodes, max_nodes=6, slots_per_node=configured)))
    history = History() if changed is None else History(T0 + changed)
    last: list[tuple[object, ...]] = []
    for hosts, nodes, jobs, kind, later in steps:
        now = T0 + later
        made, last = _as_given((jobs, hosts, nodes), kind, last)
        snapshot = Snapshot(now, made[0], made[1])  # type: ignore[arg-type]
        plan = twin.decide(join(made[2], (), snapshot, now=now), history)  # type: ignore[arg-type]
        if plan.empty:
            twin.quiet_until(join(made[2], (), snapshot, now=now), history)  # type: ignore[arg-type]


def _kept(tally: CapacityTally) -> tuple[object, ...]:
    """What a ``CapacityTally`` keeps between updates, as plain values."""
    bins = tally.bins
    return (
        dict(tally._entries),
        sorted(tally.booting),
        sorted(tally.idle),
        tally.idle_by_since,
        dict(bins._free),
        {free: list(keys) for free, keys in bins._buckets.items()},
        list(bins._empty),
        tally._ready_count,
        tally.pending_slots,
        tally.pending_plain,
        tally.waiting,
        tally.busy,
        # The running jobs by expected end, and without one by start: (that time, the job) each.
        sorted((at, key) for at, _, key in tally._ends),
        sorted((at, key) for at, _, key in tally._starts),
        {key: (place[0], id(job), on) for key, (place, job, on) in tally._ending.items()},
    )


@settings(max_examples=300, deadline=None)
@given(steps=steps, spn=st.sampled_from([4, 8]))
def test_a_capacity_tally_kept_up_to_date_equals_one_built_afresh(
    steps: list[tuple[list[Host], list[Node], list[Job], str, float]], spn: int
) -> None:
    """After each step of a random sequence of inputs (as tuples, lists or ``Revised`` tuples
    saying what changed), the tally brought up to date holds what a new tally taking in the same
    inputs whole holds: its entries, its booting and idle workers, the idle ones by idle since,
    the index of bins a forecast packs on (ready and booting workers), the waiting slots and the
    oldest one's wait."""
    kept = CapacityTally()
    late = CapacityTally()  # its bins and idle workers (by name, by since) read only after the last step
    seldom = CapacityTally()  # its bins read after the first step and the last: the changes in between, at once
    last: list[tuple[object, ...]] = []
    modelled = True
    for step, (hosts, nodes, jobs, kind, later) in enumerate(steps):
        now = T0 + later
        made, last = _as_given((jobs, hosts, nodes), kind, last)
        snapshot = Snapshot(now, made[0], made[1])  # type: ignore[arg-type]
        modelled = kept.update_for(snapshot, made[2], "master", "node", spn)  # type: ignore[arg-type]
        assert late.update_for(snapshot, made[2], "master", "node", spn) is modelled  # type: ignore[arg-type]
        assert seldom.update_for(snapshot, made[2], "master", "node", spn) is modelled  # type: ignore[arg-type]
        if step == 0:
            seldom.bins, seldom.name_bins(spn), seldom.oldest_wait(now)
        afresh = CapacityTally()
        whole = Snapshot(now, tuple(jobs), tuple(hosts))
        assert afresh.update_for(whole, tuple(nodes), "master", "node", spn) is modelled
        if modelled:
            assert _kept(kept) == _kept(afresh)
            assert _running_by_end(kept) == _running_by_end_of(jobs)
            assert kept._ends == sorted(kept._ends) and kept._starts == sorted(kept._starts)
            assert kept.idle_by_since == sorted((kept.idle_since(n), n) for n in kept.idle)
            idle = kept.idle_workers()  # what the cost rule reads: each one's idle since, the one rule's
            assert [(w.name, w.idle_since) for w in idle] == [(n, kept.idle_since(n)) for n in kept.idle]
            assert all(w.idle_since == w.node.quiet_since for w in idle)
            entries = kept._entries.items()
            bins = {named(n): e.ready for n, e in entries if e.ready is not None}
            bins |= {named(n): (e.booting or spn, e.booting or spn) for n, e in entries if e.booting is not None}
            assert kept.bins._free == bins
            assert kept._ready_count == sum(e.ready is not None for _, e in entries)
            assert _index(kept.name_bins(spn)) == _index(_name_bins(kept, spn))
            # The submissions, kept from the first read on: the oldest waiting job's wait.
            assert kept.oldest_wait(now) == oldest_wait(kept.pending(whole, now), now)
    if modelled:
        assert late.oldest_wait(now) == seldom.oldest_wait(now) == kept.oldest_wait(now)
        assert _index(late.bins) == _index(kept.bins)
        assert _index(seldom.bins) == _index(kept.bins)
        assert _index(late.name_bins(spn)) == _index(kept.name_bins(spn))
        assert _index(seldom.name_bins(spn)) == _index(kept.name_bins(spn))
        assert late.idle_by_since == kept.idle_by_since  # made at the first read, and kept since
        assert late.idle == kept.idle  # the same


def _running_by_end(tally: CapacityTally) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """The running jobs a tally's forecast finds by their expected end, and without one by their
    start: (that time, the job's id) each, in order (the ones at the same time, by id)."""
    return sorted((at, key) for at, _, key in tally._ends), sorted((at, key) for at, _, key in tally._starts)


def _running_by_end_of(jobs: Sequence[Job]) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """``_running_by_end`` of the jobs, made afresh: each started job filed under a host."""
    ends: list[tuple[float, int]] = []
    starts: list[tuple[float, int]] = []
    for j in jobs:
        if started_host(j) is not None and j.started is not None:
            if j.hard_runtime is None:
                starts.append((j.started, id(j)))
            else:
                ends.append((j.started + j.hard_runtime, id(j)))
    return sorted(ends), sorted(starts)


def _name_bins(tally: WorkerTally, spn: int) -> FreeIndex[Key]:
    """Slurm's peer's bins of a tally's entries, made afresh: ``peers._bins``'s list (the ready
    workers with a free slot, then the booting ones, each by name as text) in an index whose
    keys' order is that list's."""
    entries = sorted(tally._entries.items())
    bins = [((0, 0, n), *e.room) for n, e in entries if e.room is not None]
    bins += [((0, 1, n), e.booting or spn, e.booting or spn) for n, e in entries if e.booting is not None]
    assert sorted(bins) == bins
    index: FreeIndex[Key] = FreeIndex(spn)
    for key, free, total in bins:
        index.set(key, free, total)
    return index


def _index(index: FreeIndex[Key]) -> tuple[object, ...]:
    """What a ``FreeIndex`` holds: each key's (free, total), the keys by free slots, the empty ones."""
    return index.whole, index._free, {f: keys for f, keys in index._buckets.items() if keys}, index._empty


def test_inputs_it_does_not_model_make_it_forget_and_the_view_decide() -> None:
    tally = WorkerTally()
    h = host("node001")
    assert tally.update(Snapshot(T0, (), (h, h)), (), "master", "node") is False
    assert tally.size == 0
    assert tally.update(Snapshot(T0, (), (h, host("node001", used=2))), (), "master", "node") is False
    assert tally.update(Snapshot(T0, (), (h,)), (), "master", "node") is True
    assert tally.size == 1
    # A change said to go that was never there, or to come that is there already, or twice.
    other = host("node002")
    for came, gone in (((other,), (other,)), ((h,), ()), ((other, other), ())):
        before = (h,)
        assert tally.update(Snapshot(T0, (), before), (), "master", "node") is True
        revised = Revised((h, *came), before, came, gone)
        assert tally.update(Snapshot(T0, (), revised), (), "master", "node") is False
        assert tally.size == 0


def test_changes_alone_are_taken_in_only_after_the_inputs_they_revise() -> None:
    """``advance`` takes in ``Noted`` changes of the last inputs, as ``update`` takes the whole
    ``Revised`` inputs; changes of other inputs make it forget (the caller then hands whole ones)."""
    h1, h2, h3 = host("node001"), host("node002"), host("node003")
    jobs: tuple[Job, ...] = ()
    nodes: tuple[Node, ...] = ()
    hosts = (h1, h2)
    tally, whole = WorkerTally(), WorkerTally()
    for t in (tally, whole):
        assert t.update(Snapshot(T0, jobs, hosts), nodes, "master", "node") is True
    assert tally.advance(Noted(jobs, (), ()), Noted(hosts, (h3,), (h1,)), Noted(nodes, (), ()), "master", "node")
    assert whole.update(Snapshot(T0, jobs, Revised((h2, h3), hosts, (h3,), (h1,))), nodes, "master", "node")
    assert (tally.size, tally.total_slots(), tally.new_names(1, "node", 3)) == (2, 16, ("node004",))
    assert (whole.size, whole.total_slots(), whole.new_names(1, "node", 3)) == (2, 16, ("node004",))
    assert not tally.advance(Noted(jobs, (), ()), Noted(hosts, (), ()), Noted(nodes, (), ()), "master", "node")
    assert tally.size == 0


def test_a_list_changed_in_place_is_taken_in_again() -> None:
    """A live caller may hand the same list again with other records in it."""
    twin = Twin(SlurmPolicy(Limits(max_nodes=6, slots_per_node=8)))
    hosts = (host("node001"), host("node002"))
    records = [node("node001", 900.0, last_busy_at=T0 - 100), node("node002", 900.0, last_busy_at=T0 - 100)]
    snapshot = Snapshot(T0, (), hosts)
    assert twin.decide(join(records, (), snapshot, now=T0), History()).empty
    records[1] = node("node002", 900.0, last_busy_at=T0 - 600)  # idle past SuspendTime now
    plan = twin.decide(join(records, (), snapshot, now=T0), History())
    assert [r.node for r in plan.remove] == ["node002"]


@pytest.mark.parametrize("name", ["slurm", "starcluster", "parallelcluster", "elb"])
def test_a_node_that_is_down_takes_no_place_and_the_tally_leaves_it_to_the_view(name: str) -> None:
    """node002 died under a job: its instance is listed as stopped, the scheduler no longer
    reaches it and still lists the job there. At max_nodes 2 the node takes no place, so the
    waiting jobs get a node (named after node002, whose name stays in use); the tally does not
    model it and the full view decides, in a row of states the tally kept up to date before."""
    from elb.core.interfaces import Instance

    twin = Twin(peer(name, Limits(min_nodes=0, max_nodes=2, slots_per_node=8)))
    records = (node("node001", 900.0, instance_id="i-1"), node("node002", 900.0, instance_id="i-2"))
    hosts = (host("node001", used=8), host("node002", used=8))
    busy = (running(1, "node001", slots=8, ran=3000), running(2, "node002", slots=8, ran=3000))
    waiting = tuple(pending(3 + i, 900) for i in range(9))  # more than the 8 slots up (StarCluster's rule)

    def instances(second: str) -> tuple[Instance, ...]:
        return (Instance("i-1", "node001", "running", T0 - 900), Instance("i-2", "node002", second, T0 - 900))  # type: ignore[arg-type]

    full = twin.decide(join(records, instances("running"), Snapshot(T0, (*busy, *waiting), hosts), now=T0), History())
    assert full.add == 0
    dead = (hosts[0], host("node002", used=8, states="u"))
    state = join(records, instances("stopped"), Snapshot(T0 + 60, (*busy, *waiting), dead), now=T0 + 60)
    assert state.down == {"node002"}
    fewer = Snapshot(T0 + 60, busy, dead)  # another view of the scheduler: the same nodes down
    assert state.seeing(fewer).down == join(records, instances("stopped"), fewer, now=T0 + 60).down == {"node002"}
    plan = twin.decide(state, History())
    assert plan.add == 1 and plan.add_names == ("node003",), plan.reason
    # Not listed at all: no evidence; the node keeps its place.
    hollow = join(records, instances("running")[:1], Snapshot(T0 + 60, (*busy, *waiting), dead), now=T0 + 60)
    assert hollow.down == frozenset() and twin.decide(hollow, History()).add == 0
