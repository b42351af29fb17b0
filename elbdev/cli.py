"""``python -m elbdev``: the development commands, apart from the admin's ``elb``.

``testcluster`` stands up a real Grid Engine (or Slurm) cluster on this machine with podman
nodes, for the tests and the demos; ``demo`` shows elb at work on it. Both need root. Each
command's module has a ``register(subparsers)`` that adds its parser and sets ``func``
(called with the parsed arguments, returns the exit code), as ``elb``'s own do.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from elb import __version__
from elb.core.exitcodes import Exit

# Modules that each add subcommands. Keep one line per module.
COMMAND_MODULES: tuple[str, ...] = (
    "elbdev.testcluster.cli",
    "elbdev.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m elbdev",
        description="elb's development commands: the test cluster on this machine and the demos (need root).",
    )
    parser.add_argument("--version", action="version", version=f"elb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("python -m elbdev: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
