"""``elb completion SHELL``: a completion script for bash, zsh or tcsh, made from elb's own argparse
parser by shtab (a small, kept library that reads argparse parsers; nothing here lists a verb or
an option by hand, so the script follows the command line as it is)."""

from __future__ import annotations

import argparse
from typing import Any

from elb.core.exitcodes import Exit

SHELLS = ("bash", "zsh", "tcsh")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, tcsh)",
        description="Prints a completion script for SHELL. bash: elb completion bash > "
        "/etc/bash_completion.d/elb (or source it from ~/.bashrc); zsh: elb completion zsh > "
        '"${fpath[1]}/_elb".',
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(func=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    import shtab  # noqa: PLC0415 (only when asked)

    from elb.cli.main import build_parser  # noqa: PLC0415 (the parser of every command, built as elb runs)

    print(shtab.complete(build_parser(), shell=args.shell), end="")
    return Exit.OK
