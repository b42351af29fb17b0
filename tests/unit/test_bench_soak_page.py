"""The soak's results page says a run was shorter than the benchmark's hour only when it was."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_soak.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_soak", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_run_short_of_the_hour_is_said_so_and_an_hour_is_not() -> None:
    b = bench()
    assert b.short_of_the_hour(12) == ", not the hour the benchmark is meant for"
    assert b.short_of_the_hour(60) == ""
    assert b.short_of_the_hour(90) == ""
