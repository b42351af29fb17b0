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


def test_a_faulted_run_set_beside_a_kept_fault_free_run_says_where_that_one_came_from() -> None:
    b = bench()
    kept = {
        "fault_free": {"wait_p95": 48.7},
        "elb_log_fault_free": "/tmp/x/elb.log",
        "date": "2026-12-05 14:54 UTC",
        "command": "python benchmarks/bench_soak.py --scheduler slurm --minutes 60 --seed 7",
    }
    taken = b.reuse(kept)
    assert taken["fault_free"] == {"wait_p95": 48.7}
    assert taken["fault_free_from"] == (
        "the run of 2026-12-05 14:54 UTC: `python benchmarks/bench_soak.py --scheduler slurm --minutes 60 --seed 7`"
    )
    # reused again, it keeps naming the run that measured it
    assert (
        b.reuse({**kept, **taken, "date": "later", "command": "other"})["fault_free_from"] == taken["fault_free_from"]
    )
