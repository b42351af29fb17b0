"""``elb simulate`` on bad input: a one-line error and exit 2, never a traceback, a hang, or
``nan``/``inf`` in a report; the saturation warning blames the cap only when the replay
reached it; and a sweep's replays come back without their raw outcomes unless a report reads them."""

from __future__ import annotations

import dataclasses
import gzip
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elb.cli.main import main
from elb.simulate import sweep
from elb.simulate.engine import SimOutcome
from elb.simulate.runner import SimError, prepare
from elb.simulate.swf import SimJob, Workload
from tests.unit.test_attribution import accounting
from tests.unit.test_simulate import swf_line

REPO = Path(__file__).resolve().parents[2]


def good_log(tmp_path: Path, n: int = 20) -> Path:
    log = tmp_path / "good.swf"
    log.write_text("; MaxProcs: 16\n" + "\n".join(swf_line(i, i * 600, 3600, 8) for i in range(1, n + 1)) + "\n")
    return log


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args, "--policies", "elb"])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str) -> None:
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("elb simulate: ")
    assert "Traceback" not in err


def test_a_truncated_gzip_log_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "\n".join(swf_line(i, i * 60, 600 + i % 7, 1 + i % 8) for i in range(1, 20_000)) + "\n"
    whole = gzip.compress(text.encode())
    log = tmp_path / "cut.swf.gz"
    log.write_bytes(whole[: len(whole) // 2])
    code, _, err = simulate(capsys, str(log))
    one_line_error(code, err)
    assert "cut.swf.gz" in err and "gzip" in err


@pytest.mark.parametrize(
    ("submit", "run"),
    [("nan", "3600"), ("inf", "3600"), ("1e300", "3600"), ("600", "nan"), ("600", "inf"), ("600", "1e300")],
)
def test_a_time_that_is_not_a_finite_time_is_an_error_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], submit: str, run: str
) -> None:
    log = good_log(tmp_path)
    lines = log.read_text().splitlines()
    lines[2] = f"2 {submit} -1 {run} 8 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1"
    log.write_text("\n".join(lines) + "\n")
    # A NaN submission time hung the replay for ever: run it in a process of its own, with a
    # time-out as a safety net only (the assertion is on what it printed and returned).
    proc = subprocess.run(
        [sys.executable, "-m", "elb", "simulate", str(log), "--policies", "elb"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    one_line_error(proc.returncode, proc.stderr)
    assert "good.swf:3" in proc.stderr
    assert "nan" not in proc.stdout and "inf" not in proc.stdout


def test_the_replay_refuses_a_job_whose_times_are_not_finite_rather_than_hang() -> None:
    for bad in (SimJob(2, math.nan, 60.0, 1), SimJob(2, 60.0, math.inf, 1), SimJob(2, 1e300, 60.0, 1)):
        with pytest.raises(SimError, match="job 2"):
            prepare(Workload("t", [SimJob(1, 0.0, 60.0, 1), bad]), 8, 2)


def test_an_accounting_time_that_is_not_finite_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = accounting(1_700_000_000.0)
    fields = lines[1].split(":")
    fields[10] = "nan"  # end_time
    acct = tmp_path / "accounting"
    acct.write_text("\n".join([lines[0], ":".join(fields), *lines[2:]]) + "\n")
    code, _, err = simulate(capsys, str(acct))
    one_line_error(code, err)
    assert "accounting:2" in err and "end_time" in err


def test_a_set_no_listed_policy_has_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = simulate(capsys, str(good_log(tmp_path)), "--set", "idle_facter=0.25")
    one_line_error(code, err)
    assert "idle_facter" in err and out == ""


@pytest.mark.parametrize("cap", ["0x", "0.01x", "-1x", "nanx", "infx", "x"])
def test_a_cap_of_no_node_is_refused_not_made_one(tmp_path: Path, capsys: pytest.CaptureFixture[str], cap: str) -> None:
    code, out, err = simulate(capsys, str(good_log(tmp_path)), f"--max-nodes={cap}")
    one_line_error(code, err)
    assert "--max-nodes" in err and out == ""


@pytest.mark.parametrize("cap", ["1e9x", "1e308x", "20000", "10001"])
def test_a_cap_above_the_most_nodes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], cap: str) -> None:
    code, out, err = simulate(capsys, str(good_log(tmp_path)), f"--max-nodes={cap}")
    one_line_error(code, err)
    assert "--max-nodes" in err and "10000" in err and out == ""


@pytest.mark.parametrize("procs", [100_000, 10**20])
def test_a_default_cap_above_the_most_nodes_asks_for_max_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], procs: int
) -> None:
    log = good_log(tmp_path)
    log.write_text(log.read_text() + swf_line(99, 600, 3600, 8, procs) + "\n")
    code, out, err = simulate(capsys, str(log))
    one_line_error(code, err)
    assert "zero-wait peak" in err and "--max-nodes" in err and out == ""
    code, out, err = simulate(capsys, str(log), "--max-nodes", "10")  # the wide job left out, counted
    assert code == 0 and "unservable: 1 jobs" in err + out


def test_a_bad_budget_sweep_is_refused_before_any_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import elb.simulate.cli as cli

    def no_replay(*_: object, **__: object) -> None:
        raise AssertionError("a replay ran before the options were checked")

    monkeypatch.setattr(cli, "replay_all", no_replay)
    code, out, err = simulate(capsys, str(good_log(tmp_path)), "--budget-sweep", "0")
    one_line_error(code, err)
    assert "--budget-sweep" in err and out == ""


def test_the_saturation_warning_blames_the_cap_only_when_the_replay_reached_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # static keeps one node of a cap of two: the 9-slot job never starts though two nodes could run it
    log = tmp_path / "wide.swf"
    log.write_text(swf_line(1, 0, 100, 1) + "\n" + swf_line(2, 500, 100, 9) + "\n")
    code = main(["simulate", str(log), "--policies", "static", "--max-nodes", "2", "--set", "nodes=1"])
    err = capsys.readouterr().err
    assert code == 0 and "never drains" in err
    assert "saturates at 2 nodes" not in err
    assert "the policy left them waiting" in err and "at most 1 up at once" in err
    # one node and whole-node jobs faster than it runs them: the cap is to blame
    busy = tmp_path / "busy.swf"
    busy.write_text("\n".join(swf_line(i, i * 100, 1000, 8) for i in range(1, 40)) + "\n")
    assert main(["simulate", str(busy), "--policies", "static", "--max-nodes", "1"]) == 0
    assert "the cluster saturates at 1 nodes" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--poll", "--boot-time", "--start", "--days", "--price", "--overrun-hours"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_number_option_that_is_not_finite_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "elb", "simulate", str(good_log(tmp_path)), "--policies", "elb", flag, value],
        capture_output=True,
        text=True,
        timeout=120,  # a safety net: --poll nan would hang the replay
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    one_line_error(proc.returncode, proc.stderr)
    assert flag in proc.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--boot-time", "1e300"), ("--poll", "1e300"), ("--boot-jitter", "1e300"), ("--overrun-hours", "1e300")],
)
def test_a_duration_beyond_a_year_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    code, out, err = simulate(capsys, str(good_log(tmp_path)), option, value, "--overrun", "0.5")
    one_line_error(code, err)
    assert option in err and out == ""


@pytest.mark.parametrize(
    ("policy", "setting"),
    [
        ("elb", "idle_factor=-1"),
        ("elb", "idle_factor=nan"),
        ("elb", "launch_delay=1e300"),
        ("slurm", "suspend_time=nan"),
        ("slurm", "suspend_time=inf"),
        ("starcluster", "wait_time=nan"),
    ],
)
def test_a_policy_parameter_out_of_range_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, setting: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "elb", "simulate", str(good_log(tmp_path)), "--policies", policy, "--set", setting],
        capture_output=True,
        text=True,
        timeout=120,  # a safety net: a NaN time in a peer's parameters may never come
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    one_line_error(proc.returncode, proc.stderr)
    assert setting.split("=", maxsplit=1)[0] in proc.stderr


def test_jobs_that_never_started_are_not_blamed_on_a_cap_the_replay_reached_once() -> None:
    # A job that never starts with no job running and the cap's nodes to run it (the replay gave
    # up: nothing could change) waited on the policy, even if a burst had reached the cap before
    from elb.simulate.cli import _saturation
    from elb.simulate.engine import SimOutcome
    from elb.simulate.report import Floors, metrics

    out = SimOutcome([0.0], [60.0], 60.0, [], 0.0, 60.0, launches=874, never_started=1, longest_backlog=9e4)
    m = dataclasses.replace(
        metrics("starcluster", "starcluster", out, Floors(1.0, 1.0, 1), billing="second", price=1.0, slots_per_node=8),
        peak_nodes=20,
    )
    assert m.saturated
    said = _saturation(m, 20)
    assert "saturates at 20 nodes" not in said
    assert "1 jobs never started" in said and "the policy" in said
    assert "saturates at 20 nodes" in _saturation(dataclasses.replace(m, never_started=0), 20)


def _held_by_the_parent(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every replay result handed back to the command (in this process or from its workers)."""
    held: list[object] = []
    real = sweep._map

    def kept(*args: Any) -> list[Any]:
        results = real(*args)
        held.extend(results)
        return results

    monkeypatch.setattr(sweep, "_map", kept)
    return held


def _outcomes(held: list[object]) -> list[SimOutcome]:
    return [o for r in held for o in (r if isinstance(r, tuple) else (r,)) if isinstance(o, SimOutcome)]


def test_a_sweep_keeps_no_replays_raw_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _held_by_the_parent(monkeypatch)
    code, out, _ = simulate(capsys, str(good_log(tmp_path)), "--sweep", "idle_factor=0.5,1,2", "--workers", "1")
    assert code == 0 and "idle_factor=2" in out
    assert len(held) == 3 and _outcomes(held) == []


def test_a_budgeted_sweep_keeps_the_outcomes_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _held_by_the_parent(monkeypatch)
    code, out, _ = simulate(
        capsys, str(good_log(tmp_path)), "--sweep", "idle_factor=0.5,1", "--budget", "40/day", "--workers", "1"
    )
    assert code == 0 and "against the budget" in out
    assert len(_outcomes(held)) == 2
