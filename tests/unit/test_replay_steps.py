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


def test_each_stack_goes_to_its_innermost_step(steps: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: Counter[tuple[str, str]] = Counter()
    policy = build_policy("parallelcluster", billing="second", slots_per_node=8, boot_time=300, max_nodes=6)
    tally = policy.tally  # type: ignore[attr-defined]
    update, pending = tally.update, Simulator._shown

    def tally_update(*args: object) -> bool:
        seen["tally update", steps._step(sys._getframe())] += 1
        return update(*args)  # type: ignore[no-any-return]

    def shown(sim: Simulator) -> None:
        seen["shown", steps._step(sys._getframe())] += 1
        pending(sim)

    monkeypatch.setattr(tally, "update", tally_update)
    monkeypatch.setattr(Simulator, "_shown", shown)
    Simulator(random_log(1, 200), policy, SimSettings(slots_per_node=8, max_nodes=6, dispatch="fifo")).run()
    # The tally is read by the policy's decide and quiet hint alone; waiting jobs are shown by snapshots alone.
    assert {step for what, step in seen if what == "tally update"} == {"policy"}
    assert {step for what, step in seen if what == "shown"} == {"snapshot"}
    assert steps._step(sys._getframe()) == "other"


def test_shares_are_in_the_steps_order(steps: ModuleType) -> None:
    shares = steps.shares(Counter({"policy": 3, "events": 1}))
    assert list(shares) == list(steps.STEPS)
    assert shares["policy"] == 0.75 and shares["events"] == 0.25 and shares["other"] == 0.0
    assert sum(steps.shares(Counter()).values()) == 0.0
