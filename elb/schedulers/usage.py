"""Which job ran on which node, when, holding how many slots: the scheduler's accounting, read
for ``elb spend`` (``elb.core.attribution``).

- Grid Engine: its accounting file (``elb.schedulers.sge.accounting``): each job's (array task's) line on
  its host, from its start to its end, with its slots, its owner, project and queue. A parallel
  job's line is its master task's host's, with all its slots: it is counted there alone (its
  tasks' own lines, under tight integration, carry no slots of their own and are left out).
- Slurm: ``sacct`` (run as an argument list, never a shell, with the scheduler's time-out:
  ``elb.schedulers.slurm.commands``), one line per job allocation (``--allocations``) with a fixed
  ``--format`` and ``--parsable2``; its CPUs are shared evenly among the nodes of its node list;
  the user, the account (the project) and the partition (the queue). A job still running ends at
  the window's end.

Jobs that never started, or ended before the window, are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

from elb.core.attribution import JobUse
from elb.core.config import Config
from elb.schedulers.sge.accounting import AccountingError, read_lines
from elb.schedulers.slurm.commands import SlurmCommands, SlurmError
from elb.schedulers.slurm.parse import expand


class UsageError(Exception):
    """The scheduler's accounting cannot be read: one line saying why."""


def accounting_path(config: Config) -> Path:
    """Grid Engine's accounting file: ``<sge.root>/<sge.cell>/common/accounting``."""
    return config.sge.root / config.sge.cell / "common" / "accounting"


def sge_uses(lines: Iterable[str], since: float, until: float, source: str = "<accounting>") -> Iterator[JobUse]:
    """The job uses an accounting file records in [since, until)."""
    try:
        for rec in read_lines(lines, source):
            if rec.is_pe_task or rec.start <= 0 or rec.end <= since or rec.start >= until or rec.end <= rec.start:
                continue
            job = f"{rec.job_number}.{rec.task_number}" if rec.task_number else str(rec.job_number)
            yield JobUse(
                job=job,
                host=rec.hostname,
                start=rec.start,
                end=rec.end,
                slots=float(max(1, rec.slots)),
                user=rec.owner,
                project=rec.project,
                queue=rec.qname,
            )
    except AccountingError as err:
        raise UsageError(str(err)) from None


def read_sge(path: Path, since: float, until: float) -> list[JobUse]:
    """The job uses of Grid Engine's accounting file at ``path``."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return list(sge_uses(fh, since, until, str(path)))
    except OSError as err:
        raise UsageError(f"cannot read Grid Engine's accounting file {path}: {err.strerror or err}") from None


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
        result = SlurmCommands(config.slurm).run(sacct_argv(since, until))
        text = result.stdout.decode("utf-8", errors="replace")
    except SlurmError as err:
        raise UsageError(f"cannot read Slurm's accounting: {err}") from None
    return parse_sacct(text, since, until)


__all__: Sequence[str] = (
    "SACCT_FORMAT",
    "UsageError",
    "accounting_path",
    "parse_sacct",
    "read_sge",
    "read_slurm",
    "sacct_argv",
    "sge_uses",
)
