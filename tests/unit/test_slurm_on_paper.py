"""benchmarks/slurm_on_paper.py: Slurm's burst of 100 and 1,000 nodes on paper from the measured
points, and the table of docs/results/testcluster-add.md that it prints."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.loadfile import load_file

REPO = Path(__file__).resolve().parents[2]
BENCHMARK = REPO / "benchmarks" / "slurm_on_paper.py"
RESULTS = REPO / "docs" / "results" / "testcluster-add.md"


@pytest.fixture(scope="module")
def paper() -> ModuleType:
    return load_file(BENCHMARK, "slurm_on_paper")


def test_one_node_waits_what_one_node_was_measured_to(paper: ModuleType) -> None:
    assert paper.burst(60.0, 0.5, 7.0, 1, 2) == paper.Estimate(1, 60.0, 60.0)


def test_the_masters_serial_work_is_on_one_core_and_the_spread_work_over_1_to_all_cores(paper: ModuleType) -> None:
    # 11 nodes: 10 more; 1 s a node serial, 4 s a node spread over 2 cores (20 s) or one (40 s)
    assert paper.burst(60.0, 1.0, 4.0, 11, 2) == paper.Estimate(11, 60.0 + 10.0 + 20.0, 60.0 + 10.0 + 40.0)
    assert paper.burst(60.0, 1.0, 4.0, 11, 1) == paper.Estimate(11, 110.0, 110.0)


def test_a_burst_of_no_nodes_or_no_cores_is_refused(paper: ModuleType) -> None:
    with pytest.raises(ValueError, match="0 nodes"):
        paper.burst(60.0, 1.0, 4.0, 0, 2)
    with pytest.raises(ValueError, match="0 cores"):
        paper.burst(60.0, 1.0, 4.0, 10, 0)


def test_the_slope_is_the_least_squares_lines(paper: ModuleType) -> None:
    assert paper.slope([(1, 10.0), (3, 14.0), (5, 18.0)]) == pytest.approx(2.0)
    assert paper.slope([(1, 10.0), (2, 14.0), (3, 12.0)]) == pytest.approx(1.0)


def test_the_pushed_burst_costs_the_masters_cpu_a_node_and_the_boot_the_admit_play_and_the_key(
    paper: ModuleType,
) -> None:
    push = paper.pushed(1000)
    per_node = paper.slope(paper.PUSH_CPU)
    assert push.low == pytest.approx(paper.ONE_NODE["push"] + per_node * 999 / paper.CORES)
    assert push.high == pytest.approx(paper.ONE_NODE["push"] + per_node * 999)
    boot = paper.at_boot(1000)
    admit = paper.slope(paper.ADMIT_WALL) * 999
    key = paper.KEY_RUNS * paper.RUN_CPU * 999
    assert boot.low == pytest.approx(paper.ONE_NODE["boot"] + admit + key / paper.CORES)
    assert boot.high == pytest.approx(paper.ONE_NODE["boot"] + admit + key)
    assert boot.high < push.low


def test_the_results_page_holds_the_table_the_script_prints(paper: ModuleType) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["slurm_on_paper.py"])
        paper.main()
    rows = [line for line in out.getvalue().splitlines() if line.startswith("|")]
    assert len(rows) == 2 + len(paper.PAPER_SIZES)
    page = RESULTS.read_text().splitlines()
    for row in rows:
        assert row in page, row
