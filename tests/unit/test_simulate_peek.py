"""The quick reaction in a replay: a pass at the first peek that sees a job submitted since the last
pass still waiting (``SimSettings.peek_interval``), never sooner than ``peek_gap`` after the last
pass; the polls then count from that pass. Times known by hand: 8-slot nodes, a 300 s boot, polls
every 60 s from the first submission (0)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from elb.core.policy.base import Policy
from elb.simulate.engine import SimOutcome, SimSettings, Simulator
from elb.simulate.runner import SimError, build_policy, prepare, replay, with_param
from elb.simulate.swf import SimJob, Workload
from tests.unit.test_simulate_wakeup import both, random_log
from tests.unit.test_simulate_wakeup import elb as elb_policy

BOOT = 300.0


def elb() -> Policy:
    """elb's policy, per-second billing: an idle node goes after 150 s."""
    return elb_policy(billing="second")


def run(jobs: list[SimJob], **kw: object) -> SimOutcome:
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=BOOT, record=True, **kw)  # type: ignore[arg-type]
    return Simulator(jobs, elb(), settings).run()


# Job 1 at 0 gets a node (ready at 300, idle from 400, gone by 600); job 2 (a whole node) comes at
# 1003 to an empty cluster.
JOBS = [SimJob(1, 0.0, 100.0, 1), SimJob(2, 1003.0, 100.0, 8)]


def test_without_peeks_a_new_job_waits_for_the_next_poll() -> None:
    out = run(JOBS)
    assert out.waits == [300.0, 317.0]  # seen at the poll at 1020, ready at 1320
    assert out.quick_passes == 0


def test_a_peek_that_sees_the_new_job_waiting_starts_the_pass_at_once() -> None:
    out = run(JOBS, peek_interval=10.0, peek_gap=10.0)
    assert out.waits == [300.0, 307.0]  # seen at the peek at 1010, ready at 1310
    assert out.quick_passes == 1


def test_the_gap_holds_a_peeks_pass_back_after_the_last_pass() -> None:
    """Job 2 at 1022, two seconds after the poll at 1020: the peek at 1030 sees it, but with a
    gap of 30 s the pass waits for the peek at 1050."""
    jobs = [JOBS[0], SimJob(2, 1022.0, 100.0, 8)]
    assert run(jobs, peek_interval=10.0, peek_gap=10.0).waits == [300.0, 308.0]
    assert run(jobs, peek_interval=10.0, peek_gap=30.0).waits == [300.0, 328.0]


def test_a_job_that_started_before_the_peek_brings_no_pass_forward() -> None:
    """Job 2 (1 slot) comes at 350 while job 1 runs on the node: it starts at once, nothing waits."""
    jobs = [SimJob(1, 0.0, 1000.0, 1), SimJob(2, 350.0, 100.0, 1)]
    out = run(jobs, peek_interval=10.0)
    assert out.waits == [300.0, 0.0]
    assert out.quick_passes == 0


def test_peeks_are_the_poll_divided_into_whole_peeks() -> None:
    """A peek of 25 s under a 60 s poll is one every 20 s: job 2 at 1003 is seen at 1020 (the
    poll) either way; at 1023, at the peek at 1040 (the poll: 1080)."""
    assert run(JOBS, peek_interval=25.0).waits == [300.0, 317.0]
    jobs = [JOBS[0], SimJob(2, 1023.0, 100.0, 8)]
    assert run(jobs, peek_interval=25.0).waits == [300.0, 317.0]
    assert run(jobs).waits == [300.0, 357.0]


@pytest.mark.parametrize("gap", [10.0, 30.0])
@pytest.mark.parametrize("seed", range(4))
def test_fast_forward_agrees_with_every_poll_with_peeks(seed: int, gap: float) -> None:
    jobs = [j for j in random_log(random.Random(seed), 32, overrun=0.3) if j.slots <= 16]
    settings = SimSettings(
        slots_per_node=8,
        max_nodes=2,
        boot_time=BOOT,
        record=True,
        stall_limit=86400.0,
        peek_interval=10.0,
        peek_gap=gap,
    )
    fast, slow = both(jobs, elb, settings)
    assert fast.placements == slow.placements
    assert fast.nodes == slow.nodes
    assert fast.quick_passes == slow.quick_passes


def test_a_peers_replay_keeps_its_own_cadence() -> None:
    """``replay`` turns the peek off for a peer (its model is another system's loop)."""
    prepared = prepare(Workload("hand", JOBS), 8, 2)
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=BOOT, peek_interval=10.0)
    kw = {"billing": "second", "slots_per_node": 8, "boot_time": BOOT, "max_nodes": 2}
    _, pc = replay(prepared, build_policy("parallelcluster", **kw), settings, billing="second", price=1.0)  # type: ignore[arg-type]
    _, plain = replay(
        prepared,
        build_policy("parallelcluster", **kw),  # type: ignore[arg-type]
        dataclasses.replace(settings, peek_interval=0.0),
        billing="second",
        price=1.0,
    )
    assert pc.quick_passes == 0
    assert pc.waits == plain.waits
    m, mine = replay(prepared, build_policy("elb", **kw), settings, billing="second", price=1.0)  # type: ignore[arg-type]
    assert mine.quick_passes == m.quick_passes == 1  # in the report (and --json) too


def test_the_peek_is_the_replays_option_not_a_policy_parameter() -> None:
    """``--set peek_interval=2`` would change the policy's config and not the replay: refused."""
    p = build_policy("elb", billing="second", slots_per_node=8, boot_time=BOOT, max_nodes=2)
    with pytest.raises(SimError, match="--peek"):
        with_param(p, "peek_interval", "2")
