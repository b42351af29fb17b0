"""benchmarks/bound_gap.py splits a replay's node-time by part, and keeps the nodes that ran
nothing (launched for jobs other nodes took first) apart: their boots and idle tails."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from elb.simulate.engine import NodeLife
from elb.simulate.swf import SimJob
from tests.unit.loadfile import load_file

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bound_gap.py"


@pytest.fixture(scope="module")
def gap() -> ModuleType:
    return load_file(BENCHMARK, "bound_gap")


def test_the_nodes_that_ran_nothing_are_split_apart(gap: ModuleType) -> None:
    lives = [
        NodeLife("node001", 0.0, 300.0, 1000.0, 400.0),  # ran a job 400-800
        NodeLife("node002", 0.0, 300.0, 480.0, 0.0),  # its job started elsewhere first
    ]
    parts = gap.split(lives, {"node001": [(400.0, 800.0)]})
    assert parts["boot"] == 600.0
    assert parts["jobs"] == 400.0
    assert parts["idle between"] == 100.0
    assert parts["idle tail"] == 380.0
    assert parts["ran nothing"] == 1
    assert parts["ran nothing s"] == 480.0
    assert parts["ran nothing boot"] == 300.0
    assert parts["ran nothing tail"] == 180.0


def test_known_run_times_are_requested_as_a_multiple_of_the_run(gap: ModuleType) -> None:
    jobs = [SimJob(1, 0.0, 90.0, 8), SimJob(2, 5.0, 40.0, 32, requested=600.0)]
    known = gap.known_runtimes(jobs, 2.0)
    assert [j.requested for j in known] == [180.0, 80.0]
    assert [(j.job_id, j.submit, j.run, j.slots) for j in known] == [(1, 0.0, 90.0, 8), (2, 5.0, 40.0, 32)]
