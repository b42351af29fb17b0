"""Reading SGE: the only place that runs SGE commands, and the parsers of their XML.

``SgeCommands`` (``elb.sge.commands``) runs qstat/qhost/qmod/qconf; ``elb.sge.parse`` turns their
XML into ``elb.model`` values. Every failure is an ``SgeError``.
"""

from elb.sge.commands import QHOST_ARGS, QSTAT_ARGS, SgeCommands, run_command
from elb.sge.errors import SgeError, SgeParseError, SgeTimeoutError
from elb.sge.parse import parse_qhost, parse_qstat, parse_snapshot

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
