"""The ``elb`` command line. ``python -m elb`` runs the same.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (called with the parsed arguments, returns the exit code: one of
``elb.exitcodes.Exit``, listed in the README; argparse exits 2 on a bad command line).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from elb import __version__
from elb.exitcodes import Exit

# Modules that each add subcommands. Keep one line per module.
COMMAND_MODULES: tuple[str, ...] = (
    "elb.commands",
    "elb.simulate.cli",
    "elb.testcluster.cli",
    "elb.demo",
    "elb.cloud.ec2_cli",
    "elb.service",
    "elb.init",
    "elb.slurm.programs",
    "elb.monitoring",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elb", description="Elastic load balancer for Grid Engine (SGE) clusters on EC2."
    )
    parser.add_argument("--version", action="version", version=f"elb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("elb: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
