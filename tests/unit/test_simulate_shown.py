"""What a replay makes only when a pass reads it is what it would have made at once.

A waiting job's ``Job`` value is made at the first snapshot that shows it (a job that starts
before then is never shown waiting), so is a running job's (a job that ends before then is never
shown running), and the nodes in flight, the suspects and the stopped
nodes' records a pass reads are frozen again only after they change. The replays below make
each of them at once instead (a waiting job's value at its submission, a running job's at its
start, the frozen values anew
at every pass) and must be the same in full (every placement, node life, wait, poll and
decision), on seeded random logs under every policy and dispatch, with two node groups, and
with a warm pool behind Grid Engine and behind Slurm; and at every pass the snapshot's jobs are
the ones made anew from the replay's own state.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elb.core.model import Job, JobPhase, Node
from elb.core.planner import PassPlan
from elb.core.warmpool import WarmPool
from elb.simulate.engine import SimOutcome, SimSettings, Simulator, _Node, _Waiting
from elb.simulate.groups import Assignment, SimGroups, load_groups, one_group
from elb.simulate.powersave import Behind
from elb.simulate.swf import SimJob
from tests.unit.test_simulate_records import POLICIES, TWO_GROUPS, mostly_runnable_log, random_log, replay_policy


class AtOnce(Simulator):
    """The replay that makes a waiting job's value at its submission and the frozen values a
    pass reads anew at every pass; it checks each snapshot's jobs against the replay's state."""

    checked = 0

    def _submit(self, job: SimJob, placed: Assignment) -> None:
        super()._submit(job, placed)
        self._shown()

    def _start(self, waiting: _Waiting, parts: list[tuple[_Node, int]], now: float) -> None:
        super()._start(waiting, parts, now)
        self._shown_runs()

    def _in_flight_now(self) -> frozenset[str]:
        return frozenset(self._booting)

    def _suspects_now(self) -> tuple[str, ...]:
        return tuple(self._suspects)

    def _pooled_now(self) -> tuple[Node, ...]:
        return tuple(self._pooled_records.values())

    def _plan(self, now: float) -> PassPlan:
        pp = super()._plan(now)
        assert self.last_inputs is not None
        assert list(self.last_inputs.snapshot.jobs) == self.jobs_now()
        self.checked += 1
        return pp

    def jobs_now(self) -> list[Job]:
        """What qstat shows now, made from the waiting and running jobs: the waiting ones in
        submission order, then the running ones in the order they started."""
        out: list[Job] = []
        for w in self.pending:
            job = w.job
            pe = None if job.slots <= 1 else ("mpi" if job.slots > self.group_slots[w.group] else "smp")
            pe_range = str(job.slots) if job.slots > 1 else None
            value = Job(job.job_id, f"job{job.job_id}", "sgeuser", "qw", JobPhase.WAITING, job.slots, job.submit)
            out.append(dataclasses.replace(value, pe=pe, pe_range=pe_range, hard_runtime=job.requested))
        for r in self.running.values():
            assert r.value is not None  # made at its start
            out.append(r.value)
        return out


def both(
    jobs: list[SimJob], name: str, s: SimSettings, groups: SimGroups | None = None
) -> tuple[SimOutcome, SimOutcome, int]:
    made = Simulator(jobs, replay_policy(name, s.max_nodes, groups), s, groups=groups).run()
    sim = AtOnce(jobs, replay_policy(name, s.max_nodes, groups), s, groups=groups)
    at_once = sim.run()
    return made, at_once, sim.checked


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("dispatch", ["sge", "fifo", "easy"])
def test_values_made_when_read_replay_the_same(name: str, dispatch: str) -> None:
    for seed in range(3):
        jobs = random_log(seed, 300)
        s = SimSettings(slots_per_node=8, max_nodes=6, dispatch=dispatch, record=True)  # type: ignore[arg-type]
        made, at_once, checked = both(jobs, name, s)
        assert made.placements and checked > 0
        assert any(w == 0 for w in made.waits) and any(w > 0 for w in made.waits)  # some never shown waiting
        assert made == at_once


@pytest.mark.parametrize("name", ["elb", "slurm", "parallelcluster"])
def test_values_made_when_read_replay_the_same_with_two_groups(name: str, tmp_path: Path) -> None:
    path = tmp_path / "groups.yml"
    path.write_text(TWO_GROUPS)
    groups = load_groups(path)
    for seed in range(3):
        jobs = random_log(seed + 10, 300)
        s = SimSettings(slots_per_node=8, max_nodes=5, record=True)
        made, at_once, checked = both(jobs, name, s, groups)
        assert len({n.group for n in made.nodes}) == 2 and checked > 10
        assert made == at_once


@pytest.mark.parametrize("scheduler", [Behind.SGE, Behind.SLURM])
def test_values_made_when_read_replay_the_same_with_a_warm_pool(scheduler: Behind) -> None:
    pool = WarmPool(max_nodes=3, restart_time=60.0)
    for seed in range(3):
        jobs = random_log(seed + 20, 200)
        s = SimSettings(slots_per_node=8, max_nodes=5, record=True, scheduler=scheduler)
        made, at_once, _ = both(jobs, "elb", s, one_group(8, 5, pool))
        assert made.stops and made.restarts  # the pool's records came and went
        assert made == at_once


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 120),
    name=st.sampled_from(POLICIES),
    dispatch=st.sampled_from(["sge", "fifo", "easy"]),
    max_nodes=st.integers(1, 6),
)
def test_values_made_when_read_replay_the_same_on_random_logs(
    seed: int, n: int, name: str, dispatch: str, max_nodes: int
) -> None:
    jobs = mostly_runnable_log(seed, n, max_nodes)
    if not jobs:
        return
    s = SimSettings(slots_per_node=8, max_nodes=max_nodes, dispatch=dispatch, record=True)  # type: ignore[arg-type]
    made, at_once, _ = both(jobs, name, s)
    assert made == at_once
