"""The recorders' shared parts (``elbdev.testcluster.record``): what each command prints on the
master saved to its file, and the command line both ``record`` and ``record_requests`` run."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from elbdev.testcluster._run import TestClusterError
from elbdev.testcluster.cluster import TestCluster
from elbdev.testcluster.record import main, save


class Master:
    """Stands in for the test cluster's master: each command prints its own words."""

    def __init__(self) -> None:
        self.ran: list[tuple[list[str], float | None]] = []

    def master_run(self, argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        self.ran.append((argv, timeout))
        return subprocess.CompletedProcess(argv, 0, stdout=" ".join(argv) + "\n")


def test_save_writes_each_commands_output_to_its_file_in_order(tmp_path: Path) -> None:
    master = Master()
    tc: TestCluster = master  # type: ignore[assignment]
    names = save(tc, tmp_path, [("a.xml", ["qstat", "-xml"]), ("b.txt", ["qconf", "-sc"])])
    assert names == ["a.xml", "b.txt"]
    assert master.ran == [(["qstat", "-xml"], 30), (["qconf", "-sc"], 30)]
    assert (tmp_path / "a.xml").read_text() == "qstat -xml\n" and (tmp_path / "b.txt").read_text() == "qconf -sc\n"


def test_main_lists_the_files_or_says_why_not_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[Path] = []

    def recorder(out: Path) -> list[str]:
        asked.append(out)
        return ["one.xml", "two.xml"]

    monkeypatch.setattr(logging, "basicConfig", lambda **kw: None)  # leave the test run's logging be
    monkeypatch.setattr(sys, "argv", ["record", str(tmp_path)])
    main(recorder)
    assert asked == [tmp_path] and capsys.readouterr().out == "one.xml\ntwo.xml\n"

    def failing(out: Path) -> list[str]:
        raise TestClusterError("the test cluster is down")

    monkeypatch.setattr(sys, "argv", ["record"])
    with pytest.raises(SystemExit) as exit_:
        main(failing)
    assert exit_.value.code == 1
    assert capsys.readouterr().err == "record: the test cluster is down\n"
