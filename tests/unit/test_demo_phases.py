"""The demos print one line per phase with the time since the demo began, as scripts/test does
(``== NAME (at XmYs)``), and a status line only when it differs from the one before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from elb.service.stats import StatsRow
from elbdev import demo_steps
from elbdev.demo import pass_lines
from elbdev.demo_steps import Changes, phase_line


@pytest.mark.parametrize(("elapsed", "at"), [(0.0, "0m0s"), (59.9, "0m59s"), (61.0, "1m1s"), (3725.0, "62m5s")])
def test_a_phase_line_is_scripts_tests(elapsed: float, at: str) -> None:
    assert phase_line("starting elb", elapsed) == f"== starting elb (at {at})"


def test_a_phase_counts_from_the_start_scripts_demo_gives(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ELB_DEMO_T0", "1000")
    monkeypatch.setattr("elbdev.demo_steps.time.time", lambda: 1125.0)
    demo_steps.phase("watching elb work")
    assert capsys.readouterr().out == "== watching elb work (at 2m5s)\n"
    monkeypatch.setenv("ELB_DEMO_T0", "not a time")  # then from the demo's own start
    demo_steps.phase("summary")
    assert capsys.readouterr().out.startswith("== summary (at ")


def test_a_status_line_like_the_one_before_is_not_printed_again() -> None:
    changes = Changes()
    lines = ["waiting 4 nodes 0", "waiting 4 nodes 0", "waiting 4 nodes 2", "waiting 4 nodes 2", "waiting 4 nodes 0"]
    assert [line for line in lines if changes.new(line)] == [
        "waiting 4 nodes 0",
        "waiting 4 nodes 2",
        "waiting 4 nodes 0",
    ]


def test_output_sent_to_a_log_is_not_on_the_terminal(
    tmp_path: pytest.TempPathFactory, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "setup.log"  # type: ignore[operator]
    with demo_steps.output_to(log):
        subprocess.run(["sh", "-c", "echo 'Unpacking gridengine-master'; echo 'dpkg: progress' >&2"], check=True)
        print("from python")
    print("after")
    out, err = capfd.readouterr()
    assert out == "after\n" and err == ""
    assert log.read_text().splitlines() == ["Unpacking gridengine-master", "dpkg: progress", "from python"]


def row(at: float, waiting: int, running: int, ready: int, action: str = "", added: int = 0) -> StatsRow:
    return StatsRow(at, True, waiting, waiting, 0.0, running, 0, ready, 0, added, 0, action)


def test_a_pass_that_repeats_the_counts_of_the_line_before_is_not_printed() -> None:
    """The pass after one that did something shows the same counts: no line for it (the demo
    printed it, a status line like the one before but for the action)."""
    added = "4 jobs can't start, at max_nodes (4/4); added node001, node002, node003, node004"
    rows = [
        row(1.0, 4, 8, 4, added, added=4),
        row(3.0, 4, 8, 4, "nothing to do"),  # the same counts, nothing done
        row(5.0, 4, 4, 4, "nothing to do"),
        row(7.0, 4, 4, 4, "remove node003: idle 35 s"),  # the same counts, an action: printed
        row(9.0, 4, 4, 4, "remove node003: idle 35 s"),  # the line before again: not printed
    ]
    lines = pass_lines(rows, Changes())
    assert [line.split("  |")[0].split()[:4] for line in lines] == [
        ["waiting", "4", "running", "8"],
        ["waiting", "4", "running", "4"],
        ["waiting", "4", "running", "4"],
    ]
    assert lines[0].endswith("| " + added) and lines[2].endswith("| remove node003: idle 35 s")


def test_the_set_up_says_what_it_is_about_to_do_after_scripts_demos_installs() -> None:
    """scripts/demo installs the packages and the node image before it starts the demo, which
    then said 'a first run installs packages and builds an image', after those installs."""
    script = (Path(__file__).resolve().parents[2] / "scripts" / "demo").read_text()
    (start,) = [line for line in script.splitlines() if line.startswith("exec ")]
    assert f"{demo_steps.INSTALLED}=1" in start and "-m elbdev demo" in start
    after = demo_steps.setup_note({demo_steps.INSTALLED: "1"})
    assert "install" not in after.replace("installed above", "") and "first run" not in after
    alone = demo_steps.setup_note({})
    assert alone.startswith("installs what is missing first") and str(demo_steps.SETUP_LOG) in alone
