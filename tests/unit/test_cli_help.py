"""Every subcommand's ``-h`` says what the command does, not only its options."""

from __future__ import annotations

import argparse

import pytest

from elb.cli.main import build_parser


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_every_subcommand_has_a_description(name: str) -> None:
    sub = _subparsers()[name]
    assert sub.description, f"elb {name} -h prints no description"
    assert " ".join(sub.description.split()) in " ".join(sub.format_help().split())


def test_status_help_says_what_status_shows_and_its_exit_code() -> None:
    text = " ".join(_subparsers()["status"].format_help().split())
    assert "Exit 4" in text
