"""Grid Engine's own job log: the ``accounting`` file that ``qacct`` reads, as a replay workload.

An admin can ask what elb would have cost, and how long jobs would have waited, on their own last
month: ``elb simulate $SGE_ROOT/default/common/accounting``. The file is read by
``elb.sge.accounting`` (accounting(5) of Son of Grid Engine 8.1.9; its docstring lists the fields).
A parallel task's own line is left out (its slots are on its job's line), and so is a job that
never started (start time 0), each counted. ``h_rt`` in the category, in seconds or ``h:m:s``, is
the requested run time the forecast uses.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from elb.sge.accounting import FIELDS, AccountingError, read_lines, version_of
from elb.sge.parse import parse_sge_time
from elb.simulate.swf import SimJob, SwfError, Workload, open_lines, read_swf, window

_H_RT = re.compile(r"(?:^|[\s,])h_rt=([^\s,]+)")


def requested_runtime(category: str) -> float | None:
    """The ``h_rt`` a category (``-l h_rt=1:00:00,mem_free=2G -pe smp 4``) requests, in seconds."""
    m = _H_RT.search(category)
    if m is None:
        return None
    try:
        return parse_sge_time(m.group(1))
    except ValueError:
        return None


def is_accounting(path: Path) -> bool:
    """Whether ``path`` looks like an accounting file (its first line)."""
    for line in open_lines(path):
        return line.startswith("# Version:") or line.count(":") >= FIELDS - 1
    return False


def parse_accounting(lines: Iterable[str], source: str = "<accounting>") -> Workload:
    """The jobs of an accounting file, oldest submission first; malformed lines are errors."""
    wl = Workload(source, [], {"Format": "Grid Engine accounting"})

    def noted(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            version = version_of(line)
            if version is not None:
                wl.header["Version"] = version
            yield line

    try:
        for rec in read_lines(noted(lines), source):
            if rec.is_pe_task:
                wl.skip("a parallel task's own line (its job's line has the slots)")
                continue
            if rec.start <= 0:
                wl.skip("never started")
                continue
            run = max(0.0, rec.end - rec.start)
            if run <= 0:
                wl.skip("run time <= 0")
                continue
            if rec.slots <= 0:
                wl.skip("slots <= 0")
                continue
            # A unique id per line: array tasks share the job number.
            job_id = rec.job_number * 100_000 + rec.task_number
            wl.jobs.append(SimJob(job_id, rec.submission, run, rec.slots, requested_runtime(rec.category)))
    except AccountingError as err:
        raise SwfError(str(err)) from None
    if not wl.jobs and not wl.skipped:
        raise SwfError(f"{source}: no job line")
    wl.jobs.sort(key=lambda j: (j.submit, j.job_id))
    if wl.jobs:  # time from the first submission, as SWF logs count it
        first = wl.jobs[0].submit
        wl.jobs = [dataclasses.replace(j, submit=j.submit - first) for j in wl.jobs]
        wl.header["UnixStartTime"] = f"{first:.0f}"
    return wl


def read_accounting(path: Path) -> Workload:
    return parse_accounting(open_lines(path), str(path))


def read_log(path: Path, start: float = 0.0, days: float | None = None) -> Workload:
    """A job log to replay: Grid Engine's accounting file or SWF (told apart by the first line),
    the jobs submitted in [start, start + days) seconds from its first submission (SWF: its own
    time origin)."""
    if is_accounting(path):
        return window(read_accounting(path), start, days)
    return read_swf(path, start, days)


__all__: Sequence[str] = ("is_accounting", "parse_accounting", "read_accounting", "read_log", "requested_runtime")
