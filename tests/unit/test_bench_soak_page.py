"""The soak's results page says a run was shorter than the benchmark's hour only when it was."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.unit.loadfile import load_file

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_soak.py"


def bench() -> ModuleType:
    return load_file(BENCHMARK, "bench_soak")


def test_a_run_short_of_the_hour_is_said_so_and_an_hour_is_not() -> None:
    b = bench()
    assert b.short_of_the_hour(12) == ", not the hour the benchmark is meant for"
    assert b.short_of_the_hour(60) == ""
    assert b.short_of_the_hour(90) == ""
