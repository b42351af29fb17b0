"""A replay makes a node's record again only when the node turns idle (its ``last_busy_at``),
not when it turns busy: the replay is the same as one whose records say the node was seen busy at every
job start and end on it, as a new record each time. Compared in full (every placement, node life,
wait, poll and decision) on seeded random logs under every policy, with SGE's dispatch, FIFO and
EASY, and on KTH's log as interleaved copies when the logs are there.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from elb.core.policy.base import Policy
from elb.simulate.engine import SimOutcome, SimSettings, Simulator, _Node, _Run, _Waiting
from elb.simulate.groups import SimGroups
from elb.simulate.runner import build_policy, prepare
from elb.simulate.swf import SimJob, read_swf
from tests.unit.traces import KTH, needs

POLICIES = ("elb", "starcluster", "parallelcluster", "slurm", "static")
# Two node groups for the replay tests (``elb.simulate.groups.load_groups`` of a file of this text).
TWO_GROUPS = """\
node_groups:
  - {name: compute, slots: 8, max_nodes: 2, price_per_hour: 0.34}
  - {name: wide, slots: 16, max_nodes: 3, price_per_hour: 0.9}
"""


class SeenAtEveryJob(Simulator):
    """The replay whose records note the node seen busy at every job start and end on it."""

    def _start(self, waiting: _Waiting, parts: list[tuple[_Node, int]], now: float) -> None:
        super()._start(waiting, parts, now)
        self._seen(parts, now)

    def _finish(self, run: _Run, now: float) -> None:
        super()._finish(run, now)
        self._seen(run.parts, now)

    def _seen(self, parts: list[tuple[_Node, int]], now: float) -> None:
        for node, _ in parts:
            node.last_busy_at = now
            self._touch(node)


def random_log(seed: int, n: int) -> list[SimJob]:
    """``n`` jobs in bursts, narrow and wide, some running past their requested time."""
    rng = random.Random(seed)
    jobs: list[SimJob] = []
    t = 0.0
    for i in range(n):
        t += rng.choice((0.0, 0.0, rng.uniform(1, 120), rng.uniform(120, 1800), rng.uniform(1800, 5400)))
        slots = rng.choice((1, 1, 2, 3, 4, 8, rng.randint(1, 24)))
        run = rng.uniform(30, 2400)
        requested = round(run * rng.uniform(0.8, 2.0)) if rng.random() < 0.85 else None
        jobs.append(SimJob(i + 1, round(t, 1), round(run, 1), slots, requested))
    return jobs


def mostly_runnable_log(seed: int, n: int, max_nodes: int) -> list[SimJob]:
    """``random_log``, with about half the jobs wider than ``max_nodes`` nodes of 8 slots left out:
    a few that no group can run are kept."""
    rng = random.Random(seed)
    return [j for j in random_log(seed, n) if j.slots <= 8 * max_nodes or rng.random() < 0.5]


def replay_policy(name: str, max_nodes: int, groups: SimGroups | None = None) -> Policy:
    """The policy ``name`` of the replay tests: 8 slots a node, booted in 300 s, billed by the second."""
    return build_policy(name, billing="second", slots_per_node=8, boot_time=300, max_nodes=max_nodes, groups=groups)


def both(jobs: list[SimJob], name: str, settings: SimSettings) -> tuple[SimOutcome, SimOutcome]:
    made = Simulator(jobs, replay_policy(name, settings.max_nodes), settings).run()
    seen = SeenAtEveryJob(jobs, replay_policy(name, settings.max_nodes), settings).run()
    return made, seen


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("dispatch", ["sge", "fifo", "easy"])
def test_records_made_at_idle_turns_replay_the_same(name: str, dispatch: str) -> None:
    for seed in range(3):
        jobs = random_log(seed, 300)
        settings = SimSettings(slots_per_node=8, max_nodes=6, dispatch=dispatch, record=True)  # type: ignore[arg-type]
        made, seen = both(jobs, name, settings)
        assert made.placements  # jobs ran, several at once on a node
        assert made == seen


@needs(KTH)
@pytest.mark.parametrize("name", ["elb", "slurm"])
def test_records_made_at_idle_turns_replay_kth_copies_the_same(name: str) -> None:
    whole = read_swf(KTH, start=100 * 86400, days=5)
    copies = [
        dataclasses.replace(j, job_id=j.job_id + c * 1_000_000, submit=j.submit + (c * 937) % 3600)
        for c in range(4)
        for j in whole.jobs
    ]
    prepared = prepare(dataclasses.replace(whole, jobs=copies), 8, 4 * 52)
    settings = SimSettings(slots_per_node=8, max_nodes=prepared.max_nodes, record=True)
    made = Simulator(prepared.jobs, replay_policy(name, prepared.max_nodes), settings).run()
    seen = SeenAtEveryJob(prepared.jobs, replay_policy(name, prepared.max_nodes), settings).run()
    assert made.placements
    assert made == seen
