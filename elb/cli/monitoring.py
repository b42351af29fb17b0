"""``elb monitoring``: where the Prometheus alert rules and the Grafana dashboard shipped with
elb are (``elb.core.assets``), or a copy of them in a directory of the admin's.

Installed from the wheel they are in ``site-packages/elb/_data/monitoring``; in a checkout,
the repository's ``monitoring/``. A copy never replaces a file that differs (the admin's edited
rules) unless ``--force`` is given, and checks every file before it writes any.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from elb.core.assets import MONITORING, locate
from elb.core.exitcodes import Exit


def register(sub: Any) -> None:
    p = sub.add_parser(
        "monitoring",
        help="print where the alert rules and the dashboard shipped with elb are, or copy them",
        description="Print the paths of the Prometheus alert rules and the Grafana dashboard shipped with elb, "
        "one a line (--path: their directory), or copy them into a directory with --copy. "
        "Exit 1 when the files are missing or cannot be copied.",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--path", action="store_true", help="print the directory holding them")
    what.add_argument("--copy", type=Path, metavar="DIR", help="copy them into DIR (made if missing)")
    p.add_argument("--force", action="store_true", help="with --copy: replace files in DIR that differ")
    p.set_defaults(func=cmd_monitoring)


def copy_plan(source: Path, target: Path, force: bool) -> tuple[list[str], list[str]]:
    """(names to write, names in ``target`` that differ and are kept) for a copy of ``MONITORING``."""
    write: list[str] = []
    kept: list[str] = []
    for name in MONITORING:
        there = target / name
        if not there.exists() or force:
            write.append(name)
        elif there.read_bytes() != (source / name).read_bytes():
            kept.append(name)
    return write, kept


def _copy(source: Path, target: Path, force: bool) -> int:
    try:
        target.mkdir(parents=True, exist_ok=True)
        write, kept = copy_plan(source, target, force)
        if kept:
            for name in kept:
                print(
                    f"elb: monitoring: {target / name}: differs from the shipped file, kept (--force replaces it)",
                    file=sys.stderr,
                )
            return Exit.FAILED
        for name in write:
            tmp = target / f".{name}.tmp"
            tmp.write_bytes((source / name).read_bytes())
            os.replace(tmp, target / name)
    except OSError as err:
        print(f"elb: monitoring: cannot copy into {target}: {err}", file=sys.stderr)
        return Exit.FAILED
    for name in MONITORING:
        print(target / name)
    return Exit.OK


def cmd_monitoring(args: argparse.Namespace) -> int:
    source = locate().monitoring
    missing = [name for name in MONITORING if not (source / name).is_file()]
    if missing:
        print(f"elb: monitoring: {source} has no {' and no '.join(missing)} (reinstall elb)", file=sys.stderr)
        return Exit.FAILED
    if args.copy is not None:
        return _copy(source, args.copy, args.force)
    if args.path:
        print(source)
        return Exit.OK
    for name in MONITORING:
        print(source / name)
    return Exit.OK
