"""``python -m elbdev demo``'s options say what they do: --plot draws the Grid Engine demo's
passes, and the Slurm demo, which draws none, refuses it in one line before doing anything."""

from __future__ import annotations

import argparse

import pytest

from elb.core.exitcodes import Exit
from elbdev import cli


def demo_help() -> str:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return "".join(sub.choices["demo"].format_help().split())  # argparse wraps where it likes


def test_the_help_says_the_plot_is_the_grid_engine_demos() -> None:
    want = "--plot PLOT PNG of the Grid Engine demo's passes (default elb-demo.png); the Slurm demo draws none"
    assert "".join(want.split()) in demo_help()


def test_the_slurm_demo_refuses_a_plot_before_doing_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def nothing(*_a: object, **_k: object) -> None:
        raise AssertionError("the demo started")

    monkeypatch.setattr("elbdev.testcluster.cluster.TestCluster", nothing)
    assert cli.main(["demo", "--scheduler", "slurm", "--plot", "x.png"]) == Exit.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m elbdev demo: --plot: the Slurm demo draws no plot (the Grid Engine demo does)"]
