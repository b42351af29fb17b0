"""Grid Engine's own job log: the ``accounting`` file that ``qacct`` reads, as a replay workload.

An admin can ask what elb would have cost, and how long jobs would have waited, on their own last
month: ``elb simulate $SGE_ROOT/default/common/accounting``. The format is accounting(5) of Son of
Grid Engine 8.1.9: one job (or array task, or parallel task) per line, 45 fields separated by
colons, comment lines starting with ``#``. The fields read:

====  ==================  ===============================================================
 1    qname               the queue it ran in
 6    job_number
 9    submission_time     POSIX seconds (Open Cluster Scheduler 9 writes microseconds: both
 10   start_time          are accepted, told apart by size)
 11   end_time
 12   failed              not 0: the job did not run as it should (replayed as it ran, counted)
 34   granted_pe          the parallel environment, ``NONE`` without one
 35   slots
 36   task_number         an array task's index (0 for a plain job)
 40   category            the job's requests as qsub options, e.g. ``-l h_rt=3600 -pe smp 4``
 42   pe_taskid           ``NONE`` for the job itself, else one task of a tightly integrated
                          parallel job (left out: its slots are on the job's own line)
 43   maxvmem             bytes
====  ==================  ===============================================================

A job that never started (start time 0) is left out and counted. ``h_rt`` in the category, in
seconds or ``h:m:s``, is the requested run time the forecast uses. Times count from the first
submission of any line. The file does not say how big the cluster was: its ``MaxProcs`` (what
``--max-nodes Kx`` multiplies) is the most slots its jobs held at once, from their start and end
times, a lower bound of the machine's size.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from elb.schedulers.sge.parse import parse_sge_time
from elb.simulate.swf import LONGEST, SimJob, SwfError, Workload, open_lines, read_swf, window

FIELDS = 45
_H_RT = re.compile(r"(?:^|[\s,])h_rt=([^\s,]+)")
_MICROSECONDS = 1e11  # POSIX seconds stay below this until the year 5138; microseconds are above


def _seconds(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SwfError(f"{where}: {what} {text!r} is not a number") from None
    seconds = value / 1e6 if value > _MICROSECONDS else value
    if not math.isfinite(seconds) or abs(seconds) > _MICROSECONDS:  # NaN, inf, or beyond the year 5138
        raise SwfError(f"{where}: {what} {text!r} is not a time")
    return seconds


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
    """Whether ``path`` looks like an accounting file: its first line that is not blank is a
    ``#`` comment (SWF's comments start with ``;``) or a record with a colon (SWF's fields are
    numbers separated by white space). A short record is then the accounting file's error, with
    its line."""
    for line in open_lines(path):
        text = line.strip()
        if text:
            return text.startswith("#") or (not text.startswith(";") and ":" in text)
    return False


def most_slots_at_once(spans: Iterable[tuple[float, float, int]]) -> int:
    """The most slots held at once by jobs running over [start, end) with their slots."""
    deltas = sorted(d for start, end, slots in spans for d in ((start, slots), (end, -slots)))
    held = most = 0
    for _, d in deltas:  # by time, an end (negative) before a start at one instant
        held += d
        most = max(most, held)
    return most


def _from_first(wl: Workload) -> None:
    """Count ``wl``'s times from its first submission, as SWF logs count them; ``SwfError`` when a
    job comes more than a century after it (a corrupt time, not a job to wait for)."""
    known = [at for at, _ in wl.skipped_at if at is not None and at > 0]
    if wl.jobs or known:  # time from the first submission, as SWF logs count it
        first = min([*known, *(j.submit for j in wl.jobs[:1])])
        wl.jobs = [dataclasses.replace(j, submit=j.submit - first) for j in wl.jobs]
        if wl.jobs and wl.jobs[-1].submit > LONGEST:
            late = wl.jobs[-1]
            raise SwfError(
                f"{wl.source}: job {late.job_id // 100_000} was submitted {late.submit / 86400 / 365.25:.0f} years "
                "after the first: not a time a job log can hold (at most 100 years)"
            )
        wl.skipped_at = [(None if at is None or at <= 0 else at - first, why) for at, why in wl.skipped_at]
        wl.header["UnixStartTime"] = f"{first:.0f}"


def parse_accounting(lines: Iterable[str], source: str = "<accounting>") -> Workload:
    """The jobs of an accounting file, oldest submission first; malformed lines are errors."""
    wl = Workload(source, [], {"Format": "Grid Engine accounting"})
    spans: list[tuple[float, float, int]] = []  # each job's run, for the machine's size
    for lineno, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        if not text.strip() or text.startswith("#"):
            if text.startswith("# Version:"):
                wl.header["Version"] = text.split(":", 1)[1].strip()
            continue
        where = f"{source}:{lineno}"
        fields = text.split(":")
        if len(fields) < FIELDS:
            raise SwfError(f"{where}: expected {FIELDS} fields separated by ':', found {len(fields)}")
        submit = _seconds(fields[8], "submission_time", where)
        if fields[41].upper() not in ("NONE", ""):  # Sun Grid Engine 6 writes "none"
            wl.skip("a parallel task's own line (its job's line has the slots)", at=submit)
            continue
        try:
            job_number = int(fields[5])
            failed = int(fields[11]) != 0
            slots = int(fields[34])
            task = int(fields[35])
        except ValueError:
            raise SwfError(f"{where}: job number, failed, slots or task number is not an integer") from None
        start = _seconds(fields[9], "start_time", where)
        end = _seconds(fields[10], "end_time", where)
        if start <= 0:
            wl.skip("never started", at=submit)
            continue
        run = max(0.0, end - start)
        if run > LONGEST:
            raise SwfError(f"{where}: start_time to end_time is {run / 86400 / 365.25:.0f} years: not a run time")
        if run <= 0:
            wl.skip("run time <= 0", at=submit)
            continue
        if slots <= 0:
            wl.skip("slots <= 0", at=submit)
            continue
        spans.append((start, end, slots))
        # A unique id per line: array tasks share the job number.
        job_id = job_number * 100_000 + task if task else job_number * 100_000
        wl.jobs.append(SimJob(job_id, submit, run, slots, requested_runtime(fields[39]), failed=failed))
    if not wl.jobs and not wl.skipped:
        raise SwfError(f"{source}: no job line")
    wl.jobs.sort(key=lambda j: (j.submit, j.job_id))
    _from_first(wl)
    if spans:
        wl.header["MaxProcs"] = f"{most_slots_at_once(spans)} (the most slots its jobs held at once)"
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


__all__: Sequence[str] = (
    "is_accounting",
    "most_slots_at_once",
    "parse_accounting",
    "read_accounting",
    "read_log",
    "requested_runtime",
)
