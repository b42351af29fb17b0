"""``elb service``: the systemd unit of this installation, shown or installed.

The shipped unit (``systemd/elb.service``) names ``/opt/elb/venv/bin/elb``; the unit written
here runs the elb the command itself was started from, with the config file given.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from elb.core.assets import systemd_unit

UNIT_NAME = "elb.service"
DEFAULT_UNIT_DIR = Path("/etc/systemd/system")
DEFAULT_CONFIG = Path("/etc/elb/elb.yml")


def elb_command(executable: str = sys.executable) -> list[str]:
    """How to start this installation's elb: its ``elb`` script beside the interpreter, else
    ``<python> -m elb``."""
    script = Path(executable).parent / "elb"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [executable, "-m", "elb"]


def render_unit(template: str, command: list[str], config: Path) -> str:
    """The unit text with ``ExecStart=`` set to ``command run --config config``.

    systemd splits ExecStart= like a shell does (quotes, backslashes), so each word is quoted
    for it; a path with a newline cannot be written in a unit and is refused.
    """
    words = [*command, "run", "--config", str(config)]
    if any("\n" in w or "\r" in w for w in words):
        raise ValueError("a path in ExecStart= contains a line break")
    exec_start = "ExecStart=" + " ".join(shlex.quote(w) for w in words)
    lines = template.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("ExecStart=")]
    if len(starts) != 1:
        raise ValueError(f"the shipped unit has {len(starts)} ExecStart= lines, expected 1")
    lines[starts[0]] = exec_start
    return "\n".join(lines) + "\n"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "service",
        help="print or install the systemd unit that runs this elb",
        description="Print the systemd unit for this installation of elb (ExecStart= set to this elb), "
        "or install it with --install.",
    )
    p.add_argument("--config", "-c", type=Path, default=DEFAULT_CONFIG, help="config file the service reads")
    p.add_argument("--install", action="store_true", help=f"write the unit to --unit-dir/{UNIT_NAME}")
    p.add_argument("--unit-dir", type=Path, default=DEFAULT_UNIT_DIR, help="where --install writes the unit")
    p.set_defaults(func=cmd_service)


def cmd_service(args: argparse.Namespace) -> int:
    try:
        text = render_unit(systemd_unit().read_text(encoding="utf-8"), elb_command(), args.config.absolute())
    except (OSError, ValueError) as err:
        print(f"elb: service: {err}", file=sys.stderr)
        return 1
    if not args.install:
        sys.stdout.write(text)
        return 0
    target = args.unit_dir / UNIT_NAME
    try:
        args.unit_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{UNIT_NAME}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(target)
    except OSError as err:
        print(f"elb: service: cannot write {target}: {err}", file=sys.stderr)
        return 1
    print(f"wrote {target}; now: systemctl daemon-reload && systemctl enable --now elb")
    return 0
