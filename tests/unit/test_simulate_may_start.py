"""A replay dispatches after events only when a job may start (``Simulator._may_start``: slots
freed, or a job come that waits behind none of its kind); the replay is the same as one that
dispatches after every event. Compared in full (every placement, node life, wait, poll and
decision) on seeded random logs under every policy and dispatch, with two node groups, and with
failed bring-ups and a warm pool.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elb.core.warmpool import WarmPool
from elb.simulate.engine import SimOutcome, SimSettings, Simulator
from elb.simulate.groups import SimGroups, load_groups, one_group
from elb.simulate.swf import SimJob
from tests.unit.test_simulate_records import POLICIES, TWO_GROUPS, mostly_runnable_log, random_log, replay_policy

DISPATCHES = ("sge", "fifo", "easy")


class AtEveryEvent(Simulator):
    """The replay that dispatches after every event."""

    def _events_at(self, t: float) -> None:
        self._may_start = True
        super()._events_at(t)


def both(
    jobs: list[SimJob], name: str, s: SimSettings, groups: SimGroups | None = None
) -> tuple[SimOutcome, SimOutcome]:
    skipping = Simulator(jobs, replay_policy(name, s.max_nodes, groups), s, groups=groups).run()
    every = AtEveryEvent(jobs, replay_policy(name, s.max_nodes, groups), s, groups=groups).run()
    return skipping, every


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("dispatch", DISPATCHES)
def test_dispatch_when_a_job_may_start_replays_as_at_every_event(name: str, dispatch: str) -> None:
    for seed in range(3):
        jobs = random_log(seed, 300)
        s = SimSettings(slots_per_node=8, max_nodes=6, dispatch=dispatch, record=True)  # type: ignore[arg-type]
        skipping, every = both(jobs, name, s)
        assert skipping.placements and any(w > 0 for w in skipping.waits)
        assert skipping == every


@pytest.mark.parametrize("dispatch", DISPATCHES)
def test_dispatch_when_a_job_may_start_replays_as_at_every_event_with_two_groups(dispatch: str, tmp_path: Path) -> None:
    path = tmp_path / "groups.yml"
    path.write_text(TWO_GROUPS)
    groups = load_groups(path)
    for seed in range(3):
        jobs = random_log(seed + 10, 300)
        s = SimSettings(slots_per_node=8, max_nodes=5, dispatch=dispatch, record=True)  # type: ignore[arg-type]
        skipping, every = both(jobs, "elb", s, groups)
        assert len({n.group for n in skipping.nodes}) == 2
        assert skipping == every


def test_dispatch_when_a_job_may_start_replays_as_at_every_event_with_failures_and_a_pool() -> None:
    pool = WarmPool(max_nodes=3, restart_time=60.0)
    for seed in range(3):
        jobs = random_log(seed + 20, 200)
        s = SimSettings(slots_per_node=8, max_nodes=5, record=True, provision_failure_rate=0.2, seed=seed)
        skipping, every = both(jobs, "elb", s, one_group(8, 5, pool))
        assert skipping.failed_bringups and skipping.restarts
        assert skipping == every


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 120),
    name=st.sampled_from(POLICIES),
    dispatch=st.sampled_from(DISPATCHES),
    max_nodes=st.integers(1, 6),
)
def test_dispatch_when_a_job_may_start_replays_as_at_every_event_on_random_logs(
    seed: int, n: int, name: str, dispatch: str, max_nodes: int
) -> None:
    jobs = mostly_runnable_log(seed, n, max_nodes)
    if not jobs:
        return
    s = SimSettings(slots_per_node=8, max_nodes=max_nodes, dispatch=dispatch, record=True)  # type: ignore[arg-type]
    skipping, every = both(jobs, name, s)
    assert skipping == every
