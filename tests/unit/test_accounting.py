"""Grid Engine's accounting file as a replay workload (``elb.simulate.accounting``).

The lines below follow accounting(5) of SGE 8.1.9 field for field; the first is copied from an
accounting file the test cluster's SGE wrote during a CI run. ``test_recorded_file`` reads a whole
file recorded from the test cluster (tests/fixtures/sge/recorded/accounting, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.simulate.accounting import is_accounting, parse_accounting, read_log, requested_runtime
from elb.simulate.swf import SwfError

REAL = (
    "all.q:node007:sgeuser:sgeuser:waits0:8:sge:0:1795526721:1795526722:1795526723:0:0:1:0.005373:"
    "0.000000:4496.000000:0:0:0:0:347:1:0:16.000000:16:0:0:0:19:0:NONE:defaultdepartment:NONE:1:0:"
    "0.005373:0.000000:0.000000:NONE:0.000000:NONE:3620864.000000:0:0"
)


def line(job: int, submit: int, start: int, end: int, *, slots: int = 1, pe: str = "NONE", task: int = 0,
         category: str = "NONE", pe_task: str = "NONE") -> str:  # fmt: skip
    f = REAL.split(":")
    f[5], f[8], f[9], f[10] = str(job), str(submit), str(start), str(end)
    f[33], f[34], f[35], f[39], f[41] = pe, str(slots), str(task), category, pe_task
    return ":".join(f)


def test_a_real_line() -> None:
    wl = parse_accounting(["# Version: 8.1.9\n", "# \n", REAL + "\n"])
    (job,) = wl.jobs
    assert (job.submit, job.run, job.slots, job.requested) == (0.0, 1.0, 1, None)
    assert wl.header["Version"] == "8.1.9"


def test_pe_jobs_array_tasks_h_rt_and_what_is_left_out() -> None:
    lines = [
        line(10, 1000, 1010, 1610, slots=4, pe="smp", category="-l h_rt=3600 -pe smp 4"),
        line(11, 1005, 1010, 1070, task=1, category="-l h_rt=120"),
        line(11, 1005, 1012, 1080, task=2, category="-l h_rt=120"),
        line(12, 1006, 1020, 1100, slots=3, pe="mpi"),
        line(12, 1006, 1020, 1090, slots=1, pe="mpi", pe_task="1.node002"),  # a slave task's line
        line(13, 1007, 0, 0),  # never started (deleted while waiting)
    ]
    wl = parse_accounting(lines)
    assert [(j.submit, j.run, j.slots, j.requested) for j in wl.jobs] == [
        (0.0, 600.0, 4, 3600.0),
        (5.0, 60.0, 1, 120.0),
        (5.0, 68.0, 1, 120.0),
        (6.0, 80.0, 3, None),
    ]
    assert len({j.job_id for j in wl.jobs}) == 4  # array tasks get ids of their own
    assert wl.skipped == {"a parallel task's own line (its job's line has the slots)": 1, "never started": 1}


def test_microsecond_timestamps_of_open_cluster_scheduler() -> None:
    (job,) = parse_accounting([line(1, 1_795_526_721_000_000, 1_795_526_722_500_000, 1_795_526_782_500_000)]).jobs
    assert job.run == 60.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("all.q:node1:too:few", "expected 45 fields"),
        (line(1, 1, 2, 3).replace(":1:0:0.005373", ":x:0:0.005373"), "integer"),
    ],
)
def test_malformed_lines_are_errors_with_their_place(text: str, words: str) -> None:
    with pytest.raises(SwfError, match=words):
        parse_accounting([text], "acct")


def test_h_rt_forms() -> None:
    assert requested_runtime("-l h_rt=3600,h_vmem=2G") == 3600.0
    assert requested_runtime("-q all.q -l mem_free=1G,h_rt=1:30:00") == 5400.0
    assert requested_runtime("NONE") is None


def test_the_format_is_told_from_the_first_line(tmp_path: Path) -> None:
    acct = tmp_path / "accounting"
    acct.write_text("# Version: 8.1.9\n" + REAL + "\n")
    swf = tmp_path / "log.swf"
    swf.write_text("; Version: 2.2\n1 0 0 60 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1\n")
    assert is_accounting(acct) and not is_accounting(swf)
    assert len(read_log(acct).jobs) == 1 and len(read_log(swf).jobs) == 1


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded" / "accounting"


def test_recorded_file() -> None:
    """Written by the test cluster's SGE (2 nodes of 2 slots): serial (h_rt=120), hrt_hms (h_rt=0:2:0,
    which SGE writes as 120), mpi3 (-pe mpi 3, over both nodes), array3 (3 tasks, a line each);
    smp2 (-pe smp 2) and a held job were deleted before they ran, so SGE wrote no line for them."""
    wl = read_log(RECORDED)
    assert wl.header["Version"] == "8.1.9"
    assert len(wl.jobs) == 6
    assert sorted(j.slots for j in wl.jobs) == [1, 1, 1, 1, 1, 3]
    assert sorted(j.requested for j in wl.jobs if j.requested is not None) == [120.0, 120.0]
    assert all(j.run > 0 for j in wl.jobs) and wl.jobs[0].submit == 0.0
    assert len({j.job_id for j in wl.jobs}) == 6  # the array's tasks apart
