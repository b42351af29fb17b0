"""Fast-forward wakes the replay at every moment a rule changes with the clock alone.

A replay that skips polls on a policy's ``quiet_until`` must give exactly the replay that asks the
policy at every poll: the same placements, node lives and figures. The rules that change with the
clock alone (a running job becoming overdue, ``launch_delay``, stabilization, idle timers, the end
of a paid period, a waiting job's age) are crossed here on purpose: seeded random logs whose jobs
run past their requested time while others wait.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.planner import PassPlan
from elb.core.policy import make_policy
from elb.core.policy.base import Policy, QuietHint
from elb.simulate.engine import SimOutcome, SimSettings, Simulator
from elb.simulate.report import Billing
from elb.simulate.runner import build_policy, with_param
from elb.simulate.swf import SimJob

BOOT = 300.0


def elb(**kw: object) -> Policy:
    base: dict[str, object] = {"max_nodes": 2, "slots_per_node": 8, "boot_time": BOOT}
    return make_policy(PolicyConfig(**{**base, **kw}), ClusterConfig())


def both(jobs: list[SimJob], make: Callable[[], Policy], settings: SimSettings) -> tuple[SimOutcome, SimOutcome]:
    """The replay with fast-forward and without it, each on a policy object of its own."""
    fast = Simulator(jobs, make(), settings).run()
    slow = Simulator(jobs, make(), dataclasses.replace(settings, fast_forward=False)).run()
    return fast, slow


def test_a_job_queued_behind_one_that_becomes_overdue_waits_the_same_with_fast_forward() -> None:
    """Job 1 (8 slots, requests 600 s, runs 10,000 s) starts at 300 on the first node; job 2
    (8 slots) comes at 700, when job 1's requested end (900) is within a boot time: no launch.
    At 1020 job 1 is more than the grace (120 s) past its requested end and counts as running
    on: the poll at 1080 launches, the node is ready at 1380, job 2 waits 680 s."""
    jobs = [SimJob(1, 0.0, 10000.0, 8, 600.0), SimJob(2, 700.0, 600.0, 8, 600.0), SimJob(3, 20000.0, 60.0, 1, 600.0)]
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=BOOT, record=True)
    fast, slow = both(jobs, elb, settings)
    assert slow.waits == [300.0, 680.0, 340.0]
    assert fast.waits == slow.waits
    assert fast.placements == slow.placements
    assert fast.nodes == slow.nodes
    assert fast.decisions < slow.decisions


def random_log(rng: random.Random, n: int, *, overrun: float) -> list[SimJob]:
    """``n`` jobs in bursts: narrow and wide, most with a requested time, ``overrun`` of those
    running past it by a minute to an hour, some ending well before it."""
    jobs: list[SimJob] = []
    t = 0.0
    for i in range(n):
        t += rng.choice((0.0, 0.0, rng.uniform(1, 120), rng.uniform(120, 1800), rng.uniform(1800, 5400)))
        slots = rng.choice((1, 1, 2, 4, 8, rng.randint(1, 24)))
        run = rng.uniform(30, 2400)
        requested: float | None = None
        if rng.random() < 0.85:
            requested = round(run * rng.uniform(1.0, 2.0))
            if rng.random() < overrun:
                run = requested + rng.uniform(60, 3600)
        jobs.append(SimJob(i + 1, round(t, 1), round(run, 1), slots, requested))
    return jobs


def _policy(kind: str, billing: Billing, spn: int, max_nodes: int) -> Policy:
    if kind.startswith("elb"):
        p = build_policy("elb", billing=billing, slots_per_node=spn, boot_time=BOOT, max_nodes=max_nodes)
        for option in kind.split(":")[1:]:
            key, _, value = option.partition("=")
            p = with_param(p, key, value)
        return p
    return build_policy(kind, billing=billing, slots_per_node=spn, boot_time=BOOT, max_nodes=max_nodes)


def _settings(probe: Policy, spn: int, max_nodes: int) -> SimSettings:
    """The replay's settings for the policy ``probe``, as ``replay`` sets them up: Slurm decides
    on its own clock, StarCluster's master runs jobs."""
    interval = getattr(probe, "interval", None)
    return SimSettings(
        slots_per_node=spn,
        max_nodes=max_nodes,
        boot_time=BOOT,
        poll_interval=float(interval) if interval else 60.0,
        master_exec_slots=spn if getattr(probe, "master_exec", False) else 0,
        stall_limit=86400.0,  # a stranded job (StarCluster's) ends the replay a day on, both ways
        record=True,
    )


KINDS = (
    "elb",
    "elb:launch_delay=200",
    "elb:idle_factor=0.1",
    "elb:grow=wait_time",
    "elb:shrink=timer",
    "starcluster",
    "parallelcluster",
    "slurm",
    "static",
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("billing", ["second", "hour"])
@pytest.mark.parametrize("seed", range(4))
def test_fast_forward_agrees_with_every_poll_on_random_logs_with_overruns(
    kind: str, billing: Billing, seed: int
) -> None:
    rng = random.Random(seed * 1000 + len(kind))
    spn = rng.choice((4, 8))
    max_nodes = rng.randint(2, 6)
    jobs = random_log(rng, 32, overrun=0.4)
    jobs = [j for j in jobs if j.slots <= spn * max_nodes]  # none bigger than the cluster
    probe = _policy(kind, billing, spn, max_nodes)
    if not isinstance(probe, QuietHint):
        pytest.skip(f"{kind} offers no quiet_until")
    settings = _settings(probe, spn, max_nodes)
    fast, slow = both(jobs, lambda: _policy(kind, billing, spn, max_nodes), settings)
    assert fast.placements == slow.placements
    assert fast.nodes == slow.nodes
    assert (fast.launches, fast.terminations, fast.stalled) == (slow.launches, slow.terminations, slow.stalled)


class Counted(Simulator):
    """The replay as it runs, counting the passes it plans."""

    planned = 0

    def _plan(self, now: float) -> PassPlan:
        self.planned += 1
        return super()._plan(now)


class PlanEveryPass(Counted):
    """The replay that plans at every pass, never asking the quiet hint first; it counts them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hint_first = False


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_a_pass_the_quiet_hint_shows_empty_is_the_pass_planned(kind: str, seed: int) -> None:
    """A pass whose plan the hint, asked first, shows empty is not planned: the replay is the one
    that plans every pass (every figure, the passes counted included), with fewer plans made."""
    rng = random.Random(seed * 7919 + len(kind))
    spn = rng.choice((4, 8))
    max_nodes = rng.randint(2, 6)
    jobs = [j for j in random_log(rng, 40, overrun=0.4) if j.slots <= spn * max_nodes]
    settings = _settings(_policy(kind, "second", spn, max_nodes), spn, max_nodes)
    skipping = Counted(jobs, _policy(kind, "second", spn, max_nodes), settings)
    planning = PlanEveryPass(jobs, _policy(kind, "second", spn, max_nodes), settings)
    fast, every = skipping.run(), planning.run()
    assert fast == every
    assert planning.planned == every.decisions
    if kind in ("elb:grow=wait_time", "elb:shrink=timer"):  # either classic rule: the hint is always now
        assert skipping.planned == planning.planned
    else:
        assert skipping.planned < planning.planned


class WholeHint(Counted):
    """The replay whose quiet hint before a pass reads the whole snapshot, never the changes alone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._noted_hint = None


class NotedCounted(Counted):
    """The replay as it runs, counting the hints given the changes alone that told."""

    noted = 0

    def _noted_until(self, now: float) -> float | None:
        until = super()._noted_until(now)
        self.noted += until is not None
        return until


@pytest.mark.parametrize("seed", range(6))
def test_a_hint_given_the_changes_alone_is_the_hint_on_the_whole_snapshot(seed: int) -> None:
    """StarCluster's hint before a pass, given what came and went since the last snapshot
    (``NotedHint``), is the replay whose hint reads a whole snapshot each time: every figure
    and the passes planned; the changes alone told at most passes."""
    rng = random.Random(seed * 104729 + 11)
    spn = rng.choice((4, 8))
    max_nodes = rng.randint(2, 6)
    jobs = [j for j in random_log(rng, 60, overrun=0.4) if j.slots <= spn * max_nodes]
    settings = _settings(_policy("starcluster", "second", spn, max_nodes), spn, max_nodes)
    noted = NotedCounted(jobs, _policy("starcluster", "second", spn, max_nodes), settings)
    whole = WholeHint(jobs, _policy("starcluster", "second", spn, max_nodes), settings)
    assert noted.run() == whole.run()
    assert noted.planned == whole.planned
    assert noted.noted > noted.planned
