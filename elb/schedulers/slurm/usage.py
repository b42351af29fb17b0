"""Which job ran on which Slurm node, when, holding how many CPUs: ``sacct`` (run as an argument
list, never a shell, with the scheduler's time-out: ``elb.schedulers.slurm.commands``), read for
``elb spend`` (``elb.core.attribution``): one line per job allocation (``--allocations``) with a
fixed ``--format`` and ``--parsable2``; its CPUs are shared evenly among the nodes of its node
list; the user, the account (the project) and the partition (the queue). A job still running
ends at the window's end; jobs that never started, or ended before the window, are left out.
"""

from __future__ import annotations

import math
from datetime import datetime

from elb.core.attribution import JobUse, UsageError
from elb.core.config import Config
from elb.schedulers.slurm.commands import SlurmCommands, SlurmError
from elb.schedulers.slurm.config import slurm_settings
from elb.schedulers.slurm.parse import expand

SACCT_FORMAT = "JobID,User,Account,Partition,NodeList,AllocCPUS,Start,End"


def sacct_argv(since: float, until: float) -> list[str]:
    """``sacct``'s arguments: every user's job allocations that ran in [since, until), fields
    fixed and separated by ``|``, no header. Times in the local time sacct reads."""
    return [
        "sacct",
        "--allusers",
        "--allocations",
        "--noheader",
        "--parsable2",
        f"--format={SACCT_FORMAT}",
        f"--starttime={_local(since)}",
        f"--endtime={_local(until)}",
    ]


def _local(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


def _time(text: str) -> float | None:
    """A time sacct printed (local, ISO 8601), or None (``Unknown``, ``None``: not started or ended)."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def parse_sacct(text: str, since: float, until: float) -> list[JobUse]:
    """``sacct``'s lines (``SACCT_FORMAT``) as job uses in [since, until)."""
    out: list[JobUse] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != len(SACCT_FORMAT.split(",")):
            raise UsageError(f"sacct line {lineno}: expected {len(SACCT_FORMAT.split(','))} fields, got {len(fields)}")
        job, user, account, partition, nodelist, cpus, start_text, end_text = fields
        start = _time(start_text)
        if start is None or start >= until:
            continue
        end = _time(end_text)
        end = until if end is None else end
        if end <= since or end <= start:
            continue
        try:
            hosts = expand(nodelist)
            alloc = int(cpus)
        except ValueError as err:
            raise UsageError(f"sacct line {lineno}: {err}") from None
        if not hosts or nodelist in ("None assigned",):
            continue
        each = max(1, alloc) / len(hosts)
        out += [
            JobUse(job, host, start, end, each if math.isfinite(each) else 1.0, user, account, partition)
            for host in hosts
        ]
    return out


def read_slurm(config: Config, since: float, until: float) -> list[JobUse]:
    """The job uses ``sacct`` reports."""
    try:
        result = SlurmCommands(slurm_settings(config)).run(sacct_argv(since, until))
        text = result.stdout.decode("utf-8", errors="replace")
    except SlurmError as err:
        raise UsageError(f"cannot read Slurm's accounting: {err}") from None
    return parse_sacct(text, since, until)
