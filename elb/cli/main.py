"""The ``elb`` command line. ``python -m elb`` runs the same.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (called with the parsed arguments, returns the exit code: one of
``elb.core.exitcodes.Exit``, listed in docs/operations.md; argparse exits 2 on a bad command line).

Two options go before the command as well: ``-c``/``--config FILE`` (``elb -c FILE run`` is
``elb run -c FILE``, for the commands that read a config), and ``-v``/``--verbose`` (debug lines).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from elb import __version__
from elb.core.exitcodes import Exit
from elb.service import logs

# Modules that each add subcommands. Keep one line per module.
COMMAND_MODULES: tuple[str, ...] = (
    "elb.cli.commands",
    "elb.cli.spend",
    "elb.simulate.cli",
    "elb.clouds.ec2.cli",
    "elb.cli.systemd",
    "elb.cli.init",
    "elb.schedulers.slurm.programs",
    "elb.cli.monitoring",
    "elb.cli.completion",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elb", description="Elastic load balancer for Grid Engine and Slurm clusters on EC2."
    )
    parser.add_argument("--version", action="version", version=f"elb {__version__}")
    parser.add_argument(
        "--config", "-c", dest="config_before", type=Path, default=None, metavar="FILE", help="as COMMAND's --config"
    )
    parser.add_argument("--verbose", "-v", dest="verbose_before", action="store_true", help="log debug lines too")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for verb in sub.choices.values():  # what each command's --config is when not given
        verb.set_defaults(config_default=verb.get_default("config"))
    return parser


def _config_before_the_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``elb -c FILE COMMAND``: FILE is the command's ``--config`` (an error for a command that
    reads no config, or when given after the command too with another file)."""
    given = args.config_before
    if given is None:
        return
    if not hasattr(args, "config"):
        parser.error(f"-c/--config: {args.command} reads no config file")
    if args.config not in (args.config_default, given):
        parser.error(f"-c/--config given twice, before and after {args.command}, with different files")
    args.config = given


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _config_before_the_command(parser, args)
    logs.set_verbose(args.verbose_before)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("elb: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
