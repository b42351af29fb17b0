"""The stats file round-trips, a bad row is named, and `elb plot` draws a PNG from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.cli import main
from elb.exitcodes import Exit
from elb.stats import StatsRow, append_row, read_rows


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
    assert "30 passes" in capsys.readouterr().out


def test_plot_of_missing_stats_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(f"state_dir: {tmp_path}\n")
    assert main(["plot", "--config", str(cfg), "--output", str(tmp_path / "x.png")]) == 1
    assert "cannot plot" in capsys.readouterr().err
