"""Grid Engine's job log, the ``accounting`` file ``qacct`` reads: one finished job (or array
task, or a parallel job's task) a line, its fields as accounting(5) of Son of Grid Engine 8.1.9
describes them: 45 separated by colons, comment lines starting with ``#``. The fields read:

====  ==================  ===============================================================
 1    qname               the queue it ran in
 2    hostname            the host it ran on (a parallel job's: its master task's)
 4    owner               the user
 6    job_number
 9    submission_time     POSIX seconds (Open Cluster Scheduler 9 writes microseconds: both
 10   start_time          are accepted, told apart by size)
 11   end_time
 12   failed              not 0: the job did not run as it should
 32   project             ``NONE`` without one
 34   granted_pe          the parallel environment, ``NONE`` without one
 35   slots               the job's granted slots (on its tasks' lines too)
 36   task_number         an array task's index (0 for a plain job)
 40   category            the job's requests as qsub options, e.g. ``-l h_rt=3600 -pe smp 4``
 42   pe_taskid           ``NONE`` for the job itself, else one task of a tightly integrated
                          parallel job (on its own host); Sun Grid Engine 6 writes ``none``
====  ==================  ===============================================================

Read by ``elb simulate`` (a workload to replay: ``elb.simulate.accounting``) and ``elb spend``
(which job ran on which node: each driver's ``usage``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

FIELDS = 45
_MICROSECONDS = 1e11  # POSIX seconds stay below this until the year 5138; microseconds are above


class AccountingError(ValueError):
    """A line of the accounting file cannot be read: the message names the file and the line."""


@dataclass(frozen=True, slots=True)
class AccountingLine:
    """One line of the accounting file, the fields elb reads."""

    qname: str
    hostname: str
    owner: str
    job_number: int
    submission: float
    start: float  # 0: the job never started
    end: float
    failed: str
    project: str  # "" without one
    granted_pe: str  # "" without one
    slots: int
    task_number: int  # 0: a plain job
    category: str
    pe_taskid: str  # "" for the job's own line

    @property
    def is_pe_task(self) -> bool:
        """A task of a tightly integrated parallel job (its slots are on the job's own line)."""
        return bool(self.pe_taskid)


def _seconds(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AccountingError(f"{where}: {what} {text!r} is not a number") from None
    seconds = value / 1e6 if value > _MICROSECONDS else value
    if not math.isfinite(seconds) or abs(seconds) > _MICROSECONDS:  # NaN, inf, or beyond the year 5138
        raise AccountingError(f"{where}: {what} {text!r} is not a time")
    return seconds


def _none(text: str) -> str:
    """The field, or "" for none: ``NONE`` (8.1.9) or ``none`` (Sun Grid Engine 6 writes it so)."""
    return "" if text.upper() in ("NONE", "") else text


def version_of(line: str) -> str | None:
    """The version a ``# Version:`` comment line gives, or None."""
    return line.split(":", 1)[1].strip() if line.startswith("# Version:") else None


def read_lines(lines: Iterable[str], source: str = "<accounting>") -> Iterator[AccountingLine]:
    """The job lines of an accounting file, in its order; comments and blank lines are left out,
    a malformed line is an ``AccountingError``."""
    for lineno, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        if not text.strip() or text.startswith("#"):
            continue
        where = f"{source}:{lineno}"
        f = text.split(":")
        if len(f) < FIELDS:
            raise AccountingError(f"{where}: expected {FIELDS} fields separated by ':', found {len(f)}")
        try:
            job_number, slots, task = int(f[5]), int(f[34]), int(f[35])
        except ValueError:
            raise AccountingError(f"{where}: job number, slots or task number is not an integer") from None
        yield AccountingLine(
            qname=f[0],
            hostname=f[1],
            owner=f[3],
            job_number=job_number,
            submission=_seconds(f[8], "submission_time", where),
            start=_seconds(f[9], "start_time", where),
            end=_seconds(f[10], "end_time", where),
            failed=f[11],
            project=_none(f[31]),
            granted_pe=_none(f[33]),
            slots=slots,
            task_number=task,
            category=f[39],
            pe_taskid=_none(f[41]),
        )


__all__: Sequence[str] = ("FIELDS", "AccountingError", "AccountingLine", "read_lines", "version_of")
