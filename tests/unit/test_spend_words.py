"""``elb spend`` on a new Grid Engine cell: Grid Engine writes its accounting file when the first
job ends, so the file missing from a cell that is there means no job has finished yet (an empty
bill, exit 0), not a read error. A cell that is not there, or a file named with --accounting
that is not there, stays an error (exit 4)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.exitcodes import Exit

from .test_attribution import journal_of

CONFIG = """\
cloud: {provider: local}
state_dir: STATE
sge: {root: ROOT}
policy: {billing: second}
node_groups:
  - {name: small, slots: 2, max_nodes: 4, price_per_hour: 0.5}
  - {name: big, slots: 8, max_nodes: 2, price_per_hour: 2.0, warm_pool: {max_nodes: 1, volume_price_per_hour: 0.1}}
"""


def write(tmp_path: Path, cell: bool) -> Path:
    journal_of(tmp_path, time.time() - 3600.0).close()
    root = tmp_path / "sge"
    if cell:
        (root / "default" / "common").mkdir(parents=True)
    cfg = tmp_path / "elb.yml"
    cfg.write_text(CONFIG.replace("STATE", str(tmp_path)).replace("ROOT", str(root)))
    return cfg


def test_a_new_cell_has_no_job_finished_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write(tmp_path, cell=True)
    assert main(["spend", "-c", str(cfg)]) == Exit.OK
    out, err = capsys.readouterr()
    assert "no job has finished yet" in out and "cannot read" not in out + err
    assert main(["spend", "-c", str(cfg), "--json"]) == Exit.OK
    out, err = capsys.readouterr()
    assert not [p for p in json.loads(out)["parts"] if p["kind"] == "jobs"] and "no job has finished yet" in err


def test_a_cell_that_is_not_there_is_still_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write(tmp_path, cell=False)
    assert main(["spend", "-c", str(cfg)]) == Exit.UNREADABLE
    assert "cannot read Grid Engine's accounting file" in capsys.readouterr().err


def test_an_accounting_file_named_that_is_not_there_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write(tmp_path, cell=True)
    assert main(["spend", "-c", str(cfg), "--accounting", str(tmp_path / "nothere")]) == Exit.UNREADABLE
    assert "cannot read Grid Engine's accounting file" in capsys.readouterr().err
