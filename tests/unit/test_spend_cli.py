"""``elb spend`` without a journal says so (exit 3, not a bill of zeros), and prints its labels
whole."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.exitcodes import Exit
from tests.unit.test_attribution import CONFIG, accounting, journal_of


def spend(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(CONFIG.replace("STATE", str(tmp_path)))
    code = main(["spend", "-c", str(cfg), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_elb_spend_without_a_journal_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    acct = tmp_path / "accounting"
    acct.write_text("\n".join(accounting(1_700_000_000.0)) + "\n")
    code, out, err = spend(tmp_path, capsys, "--accounting", str(acct))
    assert code == Exit.CONFIG and out == ""
    assert "no journal" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "journal.sqlite").exists()


def test_elb_spend_by_group_prints_its_labels_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.time() - 86400.0
    journal_of(tmp_path, t0).close()
    acct = tmp_path / "accounting"
    acct.write_text("\n".join(accounting(t0)) + "\n")
    code, out, _ = spend(tmp_path, capsys, "--by", "group", "--accounting", str(acct))
    assert code == 0
    assert "booting (launch to ready, restarts) [small]" in out
    assert "idle (ready, slots no job held) [big]" in out
    header = next(line for line in out.splitlines() if line.startswith("group"))
    rows = [line for line in out.splitlines() if line.rstrip().endswith("%")]
    assert {len(r) for r in rows} == {len(header)}  # the columns stay aligned
