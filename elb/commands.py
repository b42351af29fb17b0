"""The daemon's own subcommands: run, once, status, validate, plot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from elb.config import ConfigError, load_config


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", type=Path, default=None, help="config file (default /etc/elb/elb.yml)")


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="check a config file; exit 1 on errors")
    _add_config(p)
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config)
    except ConfigError as err:
        print(f"elb: config error: {err}", file=sys.stderr)
        return 1
    print(f"ok: policy {cfg.policy.name}, {cfg.policy.min_nodes}-{cfg.policy.max_nodes} nodes, "
          f"provider {cfg.cloud.provider}")
    return 0
