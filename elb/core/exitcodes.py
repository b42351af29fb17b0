"""The exit codes of the ``elb`` command (docs/operations.md lists them)."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1  # the command's own check found a problem (ec2-check), or its output can't be made (plot)
    USAGE = 2  # bad command line (argparse's own code)
    CONFIG = 3  # no config file, or one that is not valid (or names an unusable path)
    UNREADABLE = 4  # the scheduler or the cloud cannot be read (or the cloud adapter cannot be built)
    PASS_FAILED = 5  # ``once``: the pass ran, but a node operation or repair in it failed
    INTERRUPTED = 130  # SIGINT (Ctrl-C) outside the daemon's own handling
