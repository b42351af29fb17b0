"""The arithmetic of benchmarks/bench_fresh_install.py: what runs side by side counts once."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.loadfile import load_file

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fresh_install.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_file(BENCHMARK, "bench_fresh_install")


def _run(bench: ModuleType, wall: float) -> object:
    return bench.FreshRun(
        serial=(bench.Step("venv", 10.0), bench.Step("image tools", 20.0)),
        side_by_side=(bench.Step("packages", 100.0), bench.Step("pip", 60.0), bench.Step("image", 150.0)),
        side_by_side_wall=wall,
    )


def test_side_by_side_jobs_count_by_their_wall_clock_not_their_sum(bench: ModuleType) -> None:
    v = bench.verdict(_run(bench, wall=160.0), demo=281.0, demo_installs=48.0)
    assert v.installs == 10 + 20 + 160
    assert v.estimate == 281 - 48 + 190
    assert v.upper_bound == 281 + 190
    assert v.met and v.word == "met"


def test_verdict_tells_the_estimate_from_the_upper_bound(bench: ModuleType) -> None:
    run = _run(bench, wall=300.0)  # installs 330 s
    assert (
        bench.verdict(run, demo=281.0, demo_installs=48.0).word == "met on the estimate only (the upper bound is over)"
    )
    assert bench.verdict(run, demo=281.0, demo_installs=0.0).word == "not met"


def test_demo_installs_must_lie_within_the_demo(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match="within the demo"):
        bench.verdict(_run(bench, wall=1.0), demo=40.0, demo_installs=48.0)


def test_report_prints_the_sum_beside_the_target(bench: ModuleType) -> None:
    run = _run(bench, wall=160.0)
    v = bench.verdict(run, demo=281.0, demo_installs=48.0)
    lines = bench.report(run, v, 281.0, 48.0, [])
    assert "fresh installs = serial (10 + 20) + side-by-side wall clock (160) = 190 s" in lines[-5]
    assert lines[-2].startswith("upper bound = 281 + 190 = 471 s (7 min 51 s)")
    assert lines[-1] == "target 600 s (10 min 00 s): met"
