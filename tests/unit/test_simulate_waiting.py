"""The simulator's SGE dispatch through ``WaitingJobs`` (one queue per need) starts the same jobs at
the same times on the same nodes as SGE's rule read literally (every waiting job, in submission
order, starts if it fits), on generated and real logs under every policy; and a pass looks at one
job per need that does not fit, not at every waiting job."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from elb.core.model import History, Plan
from elb.core.state import ClusterState
from elb.simulate import runner
from elb.simulate.engine import SimOutcome, SimSettings, Simulator, _Node, _Waiting
from elb.simulate.groups import SimGroups, load_groups
from elb.simulate.runner import Prepared, build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload, read_swf
from elb.simulate.waiting import WaitingJobs
from tests.unit.test_simulate_groups import GB, GROUPS
from tests.unit.test_simulate_logs import POLICIES, needs_logs
from tests.unit.test_tally import synthetic_jobs
from tests.unit.traces import KTH

Result = tuple[dict[str, object], SimOutcome]


class EveryJobInOrder(Simulator):
    """The reference: SGE's dispatch without reservations as stated, a walk over every waiting job
    in submission order, each one that fits starting where ``_place_now`` puts it."""

    def _around(self, now: float) -> None:
        for w in list(self.pending):
            parts = self._place_now(w)
            if parts is not None:
                self._start(w, parts, now)


def both(
    monkeypatch: pytest.MonkeyPatch, prepared: Prepared, name: str, *, groups: SimGroups | None = None, **kw: object
) -> tuple[Result, Result]:
    """The same replay with the simulator's dispatch and with the reference's."""
    results = []
    for cls in (Simulator, EveryJobInOrder):
        monkeypatch.setattr(runner, "Simulator", cls)
        policy = build_policy(
            name, billing="second", slots_per_node=8, boot_time=300, max_nodes=prepared.max_nodes, groups=groups
        )
        settings = SimSettings(slots_per_node=8, max_nodes=prepared.max_nodes, record=True, **kw)  # type: ignore[arg-type]
        m, out = replay(prepared, policy, settings, billing="second", price=1.0)
        results.append(({k: v for k, v in m.as_dict().items() if k != "replay_seconds"}, out))
    return results[0], results[1]


def assert_same(indexed: Result, walked: Result) -> None:
    assert indexed[1].placements == walked[1].placements  # the same jobs, times and nodes
    assert indexed[1].nodes == walked[1].nodes
    assert indexed[1].waits == walked[1].waits
    assert indexed[0] == walked[0]


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("placement", ["first", "best"])
@pytest.mark.parametrize("seed", [1, 2])
def test_generated_logs_replay_as_the_walk_over_every_job(
    monkeypatch: pytest.MonkeyPatch, name: str, placement: str, seed: int
) -> None:
    jobs = synthetic_jobs(seed, 500)  # bursts of narrow, smp and wide jobs on at most 12 nodes
    indexed, walked = both(monkeypatch, prepare(Workload("generated", jobs), 8, 12), name, placement=placement)
    assert_same(indexed, walked)
    assert len(indexed[1].placements) > 400
    assert max(indexed[1].waits) > 0  # jobs did queue


@pytest.mark.parametrize("name", ["elb", "starcluster", "slurm"])
def test_two_groups_replay_as_the_walk_over_every_job(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    """Footprints of memory-hungry jobs and two groups' own nodes make needs of their own."""
    path = tmp_path / "groups.yml"
    path.write_text(GROUPS)
    groups = load_groups(path)
    rng = random.Random(7)
    jobs = [
        SimJob(j.job_id, j.submit, j.run, j.slots, j.requested, memory_kb=rng.choice([1, 1, 6, 20, 100]) * GB)
        for j in synthetic_jobs(4, 400)
        if j.slots <= 16
    ]
    indexed, walked = both(
        monkeypatch, prepare(Workload("generated", jobs), 8, None, groups=groups), name, groups=groups
    )
    assert_same(indexed, walked)
    assert {life.group for life in indexed[1].nodes} == {"compute", "bigmem"}


@needs_logs
@pytest.mark.parametrize("name", POLICIES)
def test_kth_interleaved_replays_as_the_walk_over_every_job(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Four interleaved copies of four days of KTH, as the benchmark builds them: a long queue."""
    copies = 4
    wl = read_swf(KTH, start=100 * 86400, days=4)
    jobs = [
        SimJob(j.job_id * copies + c, j.submit + (c * 937) % 3600, j.run, j.slots, j.requested)
        for j in wl.jobs
        for c in range(copies)
    ]
    indexed, walked = both(monkeypatch, prepare(Workload(wl.source, jobs), 8, 52 * copies), name)
    assert_same(indexed, walked)


# -- what a pass looks at ----------------------------------------------------------------------


def test_a_pass_offers_each_needs_oldest_job_in_submission_order_until_one_does_not_fit() -> None:
    waiting: WaitingJobs[str, int] = WaitingJobs()
    seqs = {}
    for i, need in enumerate(["wide", "one", "wide", "two", "one", "two", "one", *["wide"] * 1000]):
        seqs[i] = waiting.add(i, need)
    assert waiting.head() == 0 and waiting.needs == 3 and len(waiting) == 1007
    room = {"one": 2, "two": 1, "wide": 0}  # how many of each need fit
    offered: list[int] = []

    def start(i: int) -> bool:
        offered.append(i)
        need = "one" if i in (1, 4, 6) else "two" if i in (3, 5) else "wide"
        if room[need] == 0:
            return False
        room[need] -= 1
        waiting.remove(seqs[i])
        return True

    waiting.start_in_order(start)
    assert offered == [0, 1, 3, 4, 5, 6]  # one look at "wide" for 1,002 jobs; one miss each of the others
    assert list(waiting)[:4] == [0, 2, 5, 6] and waiting.head() == 0


def test_removing_a_later_job_keeps_the_order() -> None:
    waiting: WaitingJobs[int, str] = WaitingJobs()
    seqs = [waiting.add(s, len(s)) for s in ["a", "bb", "c", "dd", "e"]]
    waiting.remove(seqs[2])  # not the oldest of its need
    waiting.remove(seqs[0])
    assert list(waiting) == ["bb", "dd", "e"] and waiting.head() == "bb"
    waiting.remove(seqs[1])
    waiting.remove(seqs[3])
    assert waiting.needs == 1 and waiting.head() == "e"
    waiting.remove(seqs[4])
    assert not waiting and waiting.head() is None and waiting.needs == 0


class NoScaling:
    """A policy that never acts: the cluster stays at its initial nodes."""

    name = "none"

    def decide(self, state: ClusterState, history: History) -> Plan:
        return Plan(reason="fixed")


def test_a_backlog_that_cannot_start_is_not_looked_at_after_each_event() -> None:
    """One long 4-slot job holds one of two nodes; 500 jobs wanting both nodes whole queue behind
    it while 1-slot jobs come and go on the free slots (then, after the long job, run one by one)."""
    jobs = [SimJob(1, 0.0, 1e6, 4)]
    jobs += [SimJob(2 + i, 10.0 + i, 100.0, 16) for i in range(500)]
    jobs += [SimJob(1000 + i, 600.0 + 7 * i, 5.0, 1) for i in range(300)]
    sim = Simulator(jobs, NoScaling(), SimSettings(slots_per_node=8, max_nodes=2, stall_limit=600), initial_nodes=2)
    looks = 0
    place = sim._place_now

    def counted(w: _Waiting, allowed: dict[str, int] | None = None) -> list[tuple[_Node, int]] | None:
        nonlocal looks
        looks += 1
        return place(w, allowed)

    sim._place_now = counted  # type: ignore[method-assign]
    out = sim.run()
    assert len(out.waits) == 801 and out.never_started == 0
    # a few looks per event (the head of the wide jobs, the 1-slot job), not 500 per event
    assert looks < 3 * 1600, looks
