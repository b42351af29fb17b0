"""benchmarks/replay_steps.py gives a stack to the innermost step on it: a replay's policy called
by the planner's pass is the policy's, by the quiet hint the policy's too, a snapshot taken for
either is the snapshot's; and what is on no step's stack is ``other``."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.runner import build_policy
from tests.unit.loadfile import load_file
from tests.unit.test_simulate_records import random_log

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_steps.py"


@pytest.fixture(scope="module")
def steps() -> ModuleType:
    return load_file(BENCHMARK, "replay_steps")


def steps_of(
    steps: ModuleType, monkeypatch: pytest.MonkeyPatch, policy_name: str, tally_method: str, sim_method: str
) -> dict[str, set[str]]:
    """The steps the stacks of the policy's tally's ``tally_method`` and of the simulator's
    ``sim_method`` went to, by which, in a replay of a random log (each called at least once)."""
    seen: dict[str, set[str]] = {tally_method: set(), sim_method: set()}
    policy = build_policy(policy_name, billing="second", slots_per_node=8, boot_time=300, max_nodes=6)
    tally = policy.tally  # type: ignore[attr-defined]
    of_tally, of_sim = getattr(tally, tally_method), getattr(Simulator, sim_method)

    def in_tally(*args: object) -> object:
        seen[tally_method].add(steps._step(sys._getframe()))
        return of_tally(*args)

    def in_sim(*args: object) -> object:
        seen[sim_method].add(steps._step(sys._getframe()))
        return of_sim(*args)

    monkeypatch.setattr(tally, tally_method, in_tally)
    monkeypatch.setattr(Simulator, sim_method, in_sim)
    Simulator(random_log(1, 200), policy, SimSettings(slots_per_node=8, max_nodes=6, dispatch="fifo")).run()
    assert all(seen.values())
    return seen


def test_each_stack_goes_to_its_innermost_step(steps: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tally is read by the policy's decide and quiet hint alone; waiting jobs are shown by snapshots alone.
    assert steps_of(steps, monkeypatch, "parallelcluster", "update", "_shown") == {
        "update": {"policy"},
        "_shown": {"snapshot"},
    }
    assert steps._step(sys._getframe()) == "other"


def test_a_hint_on_the_changes_alone_is_the_policys_and_the_changes_the_snapshots(
    steps: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StarCluster's hint before a pass reads the changes alone (``NotedHint``): its tally's
    advance is the policy's step, the changes made for it (the nodes' values) the snapshot's."""
    assert steps_of(steps, monkeypatch, "starcluster", "advance", "_note_stale") == {
        "advance": {"policy"},
        "_note_stale": {"snapshot"},
    }


def test_shares_are_in_the_steps_order(steps: ModuleType) -> None:
    shares = steps.shares(Counter({"policy": 3, "events": 1}))
    assert list(shares) == list(steps.STEPS)
    assert shares["policy"] == 0.75 and shares["events"] == 0.25 and shares["other"] == 0.0
    assert sum(steps.shares(Counter()).values()) == 0.0
