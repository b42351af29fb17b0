"""The demo's reading of SGE's plain output: job states, error reasons, the pass line."""

from __future__ import annotations

from elb.service.stats import StatsRow

# ruff: noqa: E501 (SGE prints these lines as they are)
from elbdev.demo import NODES_LEGEND, _row_line, error_reasons, job_states

QSTAT = """job-ID  prior   name       user         state submit/start at     queue                          slots ja-task-ID
-----------------------------------------------------------------------------------------------------------------
     12 0.55500 demo       sgeuser      Eqw   11/23/2026 21:40:00                                    1
     13 0.55500 demo       sgeuser      r     11/23/2026 21:40:05 all.q@node001                      1
     14 0.55500 demo       sgeuser      hqw   11/23/2026 21:40:06                                    1
     15 0.55500 arr        sgeuser      r     11/23/2026 21:40:07 all.q@node002                      1 1
     15 0.55500 arr        sgeuser      qw    11/23/2026 21:40:07                                    1 2-4:1
"""

QSTAT_J = """==============================================================
job_number:                 12
owner:                      sgeuser
error reason    1:          11/23/2026 21:40:01 [1000:4242]: error: can't stat() "/home/sgeuser/elb-demo" as stdout_path: Input/output error KRB5CCNAME=none uid=1000 gid=1000 1000
scheduling info:            (Collecting of scheduler job information is turned off)
"""


def test_job_states_from_plain_qstat() -> None:
    assert job_states(QSTAT) == {"12": "Eqw", "13": "r", "14": "hqw", "15": "r"}
    assert job_states("") == {}


def test_error_reasons_from_qstat_j() -> None:
    (reason,) = error_reasons(QSTAT_J)
    assert reason.startswith("11/23/2026 21:40:01 [1000:4242]: error: can't stat()")
    assert "stdout_path: Input/output error" in reason
    assert error_reasons("job_number: 13\n") == []


def test_pass_line_counts_held_and_error_jobs() -> None:
    row = StatsRow(1.0, True, 3, 3, 0.0, 2, 0, 1, 0, 0, 0, "nothing to do", held_jobs=1, error_jobs=2)
    assert "held 1  in error 2" in _row_line(row)
    quiet = StatsRow(1.0, True, 3, 3, 0.0, 2, 0, 1, 0, 0, 0, "nothing to do")
    assert "held" not in _row_line(quiet)


def test_nodes_jobs_may_run_on_are_joining_not_booting_and_the_legend_says_why() -> None:
    """Grid Engine runs jobs on a node whose execd registered while elb is still checking it: the
    line calls such nodes joining (not booting, which read as not up yet), and the legend says
    the scheduler may already run jobs on them."""
    line = _row_line(StatsRow(1.0, True, 8, 8, 0.0, 4, 4, 0, 0, 0, 0, "nothing to do"))
    assert "running   4" in line and "4 joining" in line and "booting" not in line
    assert "joining (launched, being set up: the scheduler may already run jobs" in NODES_LEGEND
    # the planner's reasons on the same lines say "booting" for these nodes: the legend ties the words
    assert "reasons count them as booting" in NODES_LEGEND
