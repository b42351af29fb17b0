"""The stats file round-trips, rotates, reads a window, and `elb plot` draws a PNG from it."""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.durations import argument as duration
from elb.core.exitcodes import Exit
from elb.service.stats import StatsRow, append_row, read_all, read_rows, resample, rotated, time_span, window_start


def row(t: float, **kw: object) -> StatsRow:
    base: dict[str, object] = {
        "time": t,
        "ok": True,
        "pending_jobs": 0,
        "pending_slots": 0,
        "oldest_wait": 0.0,
        "running_jobs": 0,
        "nodes_booting": 0,
        "nodes_ready": 0,
        "nodes_draining": 0,
        "added": 0,
        "removed": 0,
        "action": "nothing to do",
    }
    base.update(kw)
    return StatsRow(**base)  # type: ignore[arg-type]


def test_rows_round_trip_with_one_header(tmp_path: Path) -> None:
    f = tmp_path / "s" / "stats.csv"
    rows = [row(1.0, pending_jobs=3, action='add 1 (node001): 3 jobs, waiting, "quoted"'), row(61.0, added=1)]
    for r in rows:
        append_row(f, r)
    assert list(read_rows(f)) == rows
    assert f.read_text().count("pending_jobs") == 1


def test_bad_row_is_named(tmp_path: Path) -> None:
    f = tmp_path / "stats.csv"
    append_row(f, row(1.0))
    with f.open("a") as fh:
        fh.write("x,True,1,1,0,0,0,0,0,0,0,oops\n")
    with pytest.raises(ValueError, match=r"stats.csv:3: bad stats row"):
        list(read_rows(f))


def test_plot_command_draws_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "stats.csv"
    for i in range(30):
        append_row(
            f,
            row(
                1_800_000_000.0 + 60 * i,
                ok=i != 7,
                pending_jobs=max(0, 10 - i),
                running_jobs=min(i, 8),
                nodes_ready=1 if 3 <= i < 25 else 0,
                nodes_booting=1 if i < 3 else 0,
                added=1 if i == 3 else 0,
                removed=1 if i == 25 else 0,
            ),
        )
    out = tmp_path / "elb.png"
    missing = str(tmp_path / "none.yml")
    assert main(["plot", "--stats", str(f), "--output", str(out), "--config", missing]) == Exit.CONFIG
    cfg = tmp_path / "elb.yml"
    cfg.write_text(f"state_dir: {tmp_path}\n")
    assert main(["plot", "--stats", str(f), "--output", str(out), "--config", str(cfg)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
    assert "30 points" in capsys.readouterr().out


def test_plot_of_missing_stats_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(f"state_dir: {tmp_path}\n")
    assert main(["plot", "--config", str(cfg), "--output", str(tmp_path / "x.png")]) == 1
    assert "cannot plot" in capsys.readouterr().err


def test_the_file_rotates_by_size_and_keeps_a_bounded_number(tmp_path: Path) -> None:
    f = tmp_path / "stats.csv"
    for i in range(400):
        append_row(f, row(float(i)), max_bytes=2_000, keep=3)
    files = rotated(f, keep=3)
    assert [p.name for p in files] == ["stats.csv.3", "stats.csv.2", "stats.csv.1", "stats.csv"]
    assert not (tmp_path / "stats.csv.4").exists()
    assert all(p.stat().st_size < 2_000 + 200 for p in files)
    times = [r.time for r in read_all(f, keep=3)]
    assert times == sorted(times)
    assert times[-1] == 399.0
    assert len(times) < 400  # the oldest rows went with the oldest file
    assert all(p.read_text().startswith("time,") for p in files)


def test_a_window_is_read_without_the_rows_before_it(tmp_path: Path) -> None:
    f = tmp_path / "stats.csv"
    append_row(f, row(0.0))
    with f.open("a") as fh:  # a bad row before the window is never parsed past its time
        fh.write("0.5,True,x,x,x,x,x,x,x,x,x,broken\n")
    for i in range(1, 100):
        append_row(f, row(float(i)))
    with pytest.raises(ValueError, match=r"stats\.csv:3"):
        list(read_rows(f))
    assert [r.time for r in read_rows(f, since=95)] == [95.0, 96.0, 97.0, 98.0, 99.0]
    assert [r.time for r in read_rows(f, since=10, until=12)] == [10.0, 11.0, 12.0]
    assert time_span(f, since=10, until=12) == (10.0, 12.0)
    assert time_span(f, since=1000) is None


def test_files_without_the_newer_columns_still_read(tmp_path: Path) -> None:
    f = tmp_path / "stats.csv"
    old = ["time", "ok", "pending_jobs", "pending_slots", "oldest_wait", "running_jobs", "nodes_booting"]
    old += ["nodes_ready", "nodes_draining", "added", "removed", "action"]
    with f.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(old)
        w.writerow([5.0, True, 2, 2, 0.0, 1, 0, 1, 0, 0, 0, "nothing to do"])
    (r,) = read_rows(f)
    assert (r.held_jobs, r.error_jobs, r.finished, r.done_at) == (0, 0, None, 5.0)


def test_resample_bounds_points_and_keeps_events(tmp_path: Path) -> None:
    rows = [row(float(i), pending_jobs=50 if i == 501 else 0, added=1 if i % 100 == 0 else 0) for i in range(10_000)]
    rows[7777] = row(7777.0, ok=False)
    out = resample(iter(rows), 100, 0.0, 9999.0)
    assert len(out) == 100
    assert sum(r.added for r in out) == 100
    assert max(r.pending_jobs for r in out) == 50  # a one-pass burst survives
    assert sum(1 for r in out if not r.ok) == 1
    with pytest.raises(ValueError):
        resample(iter(rows), 0, 0.0, 1.0)


def test_durations_and_times_for_the_window() -> None:
    assert duration("90m") == 5400
    assert duration("7d") == 7 * 86400
    assert duration("30") == 30
    for bad in ("", "-1h", "7 days", "0"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration(bad)
    assert window_start("2026-11-01T08:00:00+00:00") == 1793520000.0
    with pytest.raises(argparse.ArgumentTypeError):
        window_start("yesterday")


def test_plot_last_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "stats.csv"
    now = time.time()
    for i in range(50):
        append_row(f, row(now - 3600 * 5 + 60 * i))  # five hours ago
    for i in range(10):
        append_row(f, row(now - 600 + 60 * i, nodes_ready=1, finished=now - 600 + 60 * i + 5))
    cfg = tmp_path / "elb.yml"
    cfg.write_text(f"state_dir: {tmp_path}\n")
    out = tmp_path / "last.png"
    assert main(["plot", "--stats", str(f), "-o", str(out), "--config", str(cfg), "--last", "1h"]) == 0
    assert "10 points" in capsys.readouterr().out
    assert main(["plot", "--stats", str(f), "-o", str(out), "--config", str(cfg), "--since", "2000-01-01"]) == 0
    assert "60 points" in capsys.readouterr().out
