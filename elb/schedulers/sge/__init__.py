"""Reading SGE: the only place that runs SGE commands, and the parsers of their XML.

``SgeCommands`` (``elb.schedulers.sge.commands``) runs qstat/qhost/qmod/qconf; ``elb.schedulers.sge.parse`` turns their
XML into ``elb.core.model`` values. Every failure is an ``SgeError``.

Imports ``elb.core`` and what the drivers share (``elb.schedulers.process``, ``timestamps``,
``waiting``); never Slurm's driver.
"""

from elb.schedulers.sge.commands import QHOST_ARGS, QSTAT_ARGS, SgeCommands, run_command
from elb.schedulers.sge.errors import SgeError, SgeParseError, SgeTimeoutError
from elb.schedulers.sge.parse import parse_qhost, parse_qstat, parse_snapshot

__all__ = [
    "QHOST_ARGS",
    "QSTAT_ARGS",
    "SgeCommands",
    "SgeError",
    "SgeParseError",
    "SgeTimeoutError",
    "parse_qhost",
    "parse_qstat",
    "parse_snapshot",
    "run_command",
]
