"""Grid Engine accounting files in ``elb simulate``: failed jobs counted, the format told from the
first record (not the first line), ``--max-nodes Kx`` from the file's own jobs, and skip counts of
the ``--start``/``--days`` window only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.simulate.accounting import is_accounting, parse_accounting, read_log
from elb.simulate.swf import SwfError, parse_text, window
from tests.unit.test_accounting import REAL, line


def failed_line(job: int, submit: int, start: int, end: int, failed: int, **kw: object) -> str:
    f = line(job, submit, start, end, **kw).split(":")  # type: ignore[arg-type]
    f[11] = str(failed)
    return ":".join(f)


def test_failed_jobs_are_replayed_as_they_ran_and_counted() -> None:
    wl = parse_accounting(
        [
            line(1, 1000, 1010, 1070),
            failed_line(2, 1001, 1010, 1020, 100),  # failed in its epilog: it ran 10 s
            failed_line(3, 1002, 1011, 1013, 1),  # failed before it ran: 2 s on the node
        ]
    )
    assert [j.run for j in wl.jobs] == [60.0, 10.0, 2.0]
    assert wl.failed == 2
    assert window(wl, 0.0, 1.5 / 86400).failed == 1  # the window's own


def test_a_file_starting_with_a_comment_of_its_own_is_accounting(tmp_path: Path) -> None:
    acct = tmp_path / "accounting"
    acct.write_text("# written by a site script\n#\n" + REAL + "\n")
    assert is_accounting(acct)
    assert len(read_log(acct).jobs) == 1


def test_a_file_starting_with_a_short_record_is_accounting_and_its_error_says_so(tmp_path: Path) -> None:
    acct = tmp_path / "accounting"
    acct.write_text("\nall.q:node1:too:few\n" + REAL + "\n")
    assert is_accounting(acct)
    with pytest.raises(SwfError, match=r"accounting:2: expected 45 fields separated by ':', found 4"):
        read_log(acct)


def test_swf_is_still_swf(tmp_path: Path) -> None:
    swf = tmp_path / "log.swf"
    swf.write_text("\n; Version: 2.2\n;\n1 0 0 60 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1\n")
    assert not is_accounting(swf)
    bare = tmp_path / "bare.swf"
    bare.write_text("1 0 0 60 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1\n")
    assert not is_accounting(bare)


def test_the_machine_of_an_accounting_file_is_the_most_slots_its_jobs_held_at_once() -> None:
    wl = parse_accounting(
        [
            line(1, 1000, 1000, 1100, slots=4, pe="smp"),
            line(2, 1000, 1050, 1150, slots=4, pe="smp"),  # with job 1: 8 slots at once
            line(3, 1000, 1150, 1200, slots=6, pe="smp"),  # after job 2 ended: 6
            line(4, 1000, 0, 0, slots=64, pe="mpi"),  # never ran: not the machine's
        ]
    )
    assert wl.max_procs == 8


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    code = main(["simulate", *args, "--json", "--policies", "slurm"])
    out = capsys.readouterr()
    assert code == 0, out.err
    data: dict[str, object] = json.loads(out.out)
    return data


def test_max_nodes_kx_on_an_accounting_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    acct = tmp_path / "accounting"
    acct.write_text(
        "\n".join(
            [
                line(1, 1000, 1000, 1100, slots=4, pe="smp"),
                line(2, 1000, 1050, 1150, slots=4, pe="smp"),
                line(3, 1000, 1150, 1200, slots=2),
            ]
        )
        + "\n"
    )
    data = run_json(capsys, str(acct), "--max-nodes", "2x", "--slots-per-node", "4")
    settings = data["settings"]
    assert isinstance(settings, dict)
    assert settings["max_nodes"] == 4  # 2 x (8 slots at once / 4 a node)


def test_skip_counts_are_the_windows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    day = 86400
    acct = tmp_path / "accounting"
    acct.write_text(
        "\n".join(
            [
                line(1, 1000, 1010, 1070),
                line(2, 1100, 0, 0),  # never started, day 0
                line(3, 1000 + 2 * day, 0, 0),  # never started, day 2
                line(4, 1000 + 2 * day, 1000 + 2 * day, 1000 + 2 * day),  # ran 0 s, day 2
                line(5, 1000 + 3 * day, 1010 + 3 * day, 1070 + 3 * day),
            ]
        )
        + "\n"
    )
    data = run_json(capsys, str(acct), "--days", "1")
    assert data["skipped"] == {"never started": 1, "outside --start/--days window": 1}
    data = run_json(capsys, str(acct), "--start", "2", "--days", "2")
    assert data["skipped"] == {"never started": 1, "run time <= 0": 1, "outside --start/--days window": 1}
    data = run_json(capsys, str(acct))
    assert data["skipped"] == {"never started": 2, "run time <= 0": 1}


def test_swf_skip_counts_are_the_windows_too() -> None:
    text = "\n".join(
        [
            "1 0 0 60 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1",
            "2 10 0 0 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1",  # run time 0, day 0
            "3 200000 0 0 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1",  # run time 0, day 2
            "4 200000 0 60 1 -1 -1 1 120 -1 1 1 1 1 1 1 -1 -1",
        ]
    )
    wl = parse_text(text)
    assert wl.skipped == {"run time <= 0": 2}
    assert window(wl, 0.0, 1.0).skipped == {"run time <= 0": 1, "outside --start/--days window": 1}


def test_failed_jobs_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    acct = tmp_path / "accounting"
    acct.write_text(line(1, 1000, 1010, 1070) + "\n" + failed_line(2, 1001, 1010, 1020, 100) + "\n")
    data = run_json(capsys, str(acct))
    assert data["failed"] == 1
    assert main(["simulate", str(acct), "--policies", "slurm"]) == 0
    assert "failed: 1 job ended with a failure code (replayed as it ran)" in capsys.readouterr().out
