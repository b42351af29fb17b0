"""Read Standard Workload Format (SWF) job logs, plain or gzip-compressed.

Per job: submit time, run time, slots (requested processors if known, else allocated), the
requested run time (field 9, ``h_rt``), the requested memory per processor (field 10, kilobytes)
and the queue and partition numbers (fields 15 and 16) when known (-1 in the log: unknown). Jobs
with run time <= 0 or slots <= 0 are skipped and counted. ``start``/``days`` keep a window of the
log (seconds from its start) and the skip counts of the jobs submitted in it.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import math
import random
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


class SwfError(Exception):
    """The log cannot be read; the message names the file and line."""


# A replay spans at most this from its first submission (a century): a time beyond it, or one
# that is not a finite number, is a corrupt line, not a job to wait for.
LONGEST = 100 * 365.25 * 86400.0


def check_times(submit: float, run: float, where: str) -> None:
    """``SwfError`` naming ``where`` when a job's submission or run time is not a finite number
    within ``LONGEST`` (NaN would hang a replay, inf or 1e300 print nonsense in its report)."""
    for what, value in (("submit time", submit), ("run time", run)):
        if not math.isfinite(value) or abs(value) > LONGEST:
            raise SwfError(f"{where}: {what} {value:g} is not a time a job log can hold (at most 100 years)")


@dataclass(frozen=True, slots=True)
class SimJob:
    job_id: int
    submit: float  # seconds from the log's start
    run: float  # actual run time, seconds
    slots: int
    requested: float | None = None  # requested run time (h_rt), seconds
    memory_kb: float | None = None  # requested memory per slot (SWF field 10), kilobytes
    queue: int | None = None  # SWF field 15: the queue's number in the log
    partition: int | None = None  # SWF field 16: the partition's number in the log
    failed: bool = False  # the log says it ended with a failure (accounting's ``failed``); replayed as it ran


@dataclass(slots=True)
class Workload:
    """The jobs to replay, oldest submission first, and what was left out and why: ``skipped``
    counts by reason, ``skipped_at`` each left-out job's submission time (None: not known) and
    reason, so that a window counts its own."""

    source: str
    jobs: list[SimJob]
    header: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    overrun: int = 0  # jobs made to run past their requested time (``overrun``)
    skipped_at: list[tuple[float | None, str]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """Jobs the log says ended with a failure (replayed as they ran)."""
        return sum(1 for j in self.jobs if j.failed)

    @property
    def max_procs(self) -> int | None:
        for key in ("MaxProcs", "MaxNodes"):
            value = self.header.get(key, "").split()
            if value and value[0].isdigit() and int(value[0]) > 0:
                return int(value[0])
        return None

    def skip(self, why: str, n: int = 1, *, at: float | None = None) -> None:
        """Count ``n`` jobs left out for ``why``; ``at``: their submission time, when known (one job)."""
        self.skipped[why] = self.skipped.get(why, 0) + n
        if n == 1:
            self.skipped_at.append((at, why))


def open_lines(path: Path) -> Iterable[str]:
    """The lines of a text file, gzip or plain."""
    try:
        with path.open("rb") as raw:
            magic = raw.read(2)
    except OSError as err:
        raise SwfError(f"{path}: cannot read: {err.strerror or err}") from None
    if magic == b"\x1f\x8b":
        lineno = 0
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
                for lineno, line in enumerate(fh, 1):  # noqa: B007 (the last line read, for the error)
                    yield line
        except (EOFError, OSError, zlib.error) as err:  # cut short, or not gzip after all
            raise SwfError(f"{path}: not a whole gzip file after line {lineno}: {err}") from None
    else:
        with path.open(encoding="utf-8", errors="replace") as fh:
            yield from fh


def parse_swf(lines: Iterable[str], source: str = "<swf>") -> Workload:
    """Parse SWF text. Malformed job lines are errors (with the line number), not silently dropped."""
    wl = Workload(source, [])
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(";"):
            _header_line(wl, text[1:].strip())
            continue
        job = _job_line(wl, text, f"{source}:{lineno}")
        if job is not None:
            wl.jobs.append(job)
    wl.jobs.sort(key=lambda j: (j.submit, j.job_id))
    return wl


def _header_line(wl: Workload, body: str) -> None:
    """A comment line: a ``Key: value`` of the header (the first of a key kept)."""
    if ":" in body:
        key, _, value = body.partition(":")
        if key and " " not in key.strip():
            wl.header.setdefault(key.strip(), value.strip())


def _job_line(wl: Workload, text: str, where: str) -> SimJob | None:
    """A job's line as a job; None for one left out (counted in ``wl``'s skips). ``SwfError``
    for a line too short, a field not a number, or a time or memory out of range."""
    fields = text.split()
    if len(fields) < 9:
        raise SwfError(f"{where}: expected 18 fields, found {len(fields)}")
    try:
        job_id = int(fields[0])
        submit = float(fields[1])
        run = float(fields[3])
        allocated = int(float(fields[4]))
        requested_procs = int(float(fields[7]))
        requested_time = float(fields[8])
        memory = float(fields[9]) if len(fields) > 9 else -1.0
        queue = int(float(fields[14])) if len(fields) > 14 else -1
        partition = int(float(fields[15])) if len(fields) > 15 else -1
    except (ValueError, OverflowError):  # OverflowError: int(inf)
        raise SwfError(f"{where}: not a number in {text[:60]!r}") from None
    check_times(submit, run, where)
    if not (math.isfinite(requested_time) and requested_time <= LONGEST and math.isfinite(memory)):
        raise SwfError(f"{where}: requested time or memory is not a finite number (time: 100 years at most)")
    slots = requested_procs if requested_procs > 0 else allocated
    why = _left_out(submit, run, slots)
    if why is not None:
        wl.skip(why, at=submit if submit >= 0 else None)  # an unknown submission is in no window
        return None
    return SimJob(
        job_id,
        submit,
        run,
        slots,
        requested_time if requested_time > 0 else None,
        memory_kb=memory if memory > 0 else None,
        queue=queue if queue >= 0 else None,
        partition=partition if partition >= 0 else None,
    )


def _left_out(submit: float, run: float, slots: int) -> str | None:
    """Why a job is not replayed: its submission unknown, no run time, or no slots; None to replay it."""
    if submit < 0:
        return "unknown submit time"
    if run <= 0:
        return "run time <= 0"
    if slots <= 0:
        return "slots <= 0"
    return None


def read_swf(path: Path, start: float = 0.0, days: float | None = None) -> Workload:
    """Read an SWF file (gzip or plain) and keep the jobs submitted in [start, start + days)."""
    wl = parse_swf(open_lines(path), str(path))
    return window(wl, start, days)


def window(wl: Workload, start: float = 0.0, days: float | None = None) -> Workload:
    """The jobs submitted in [start, start + days) (seconds from the log's origin), with the
    skip counts of the jobs left out that were submitted in it (one whose submission is not
    known is in no window), and the jobs outside it counted."""
    if start <= 0 and days is None:
        return wl
    end = start + days * 86400.0 if days is not None else float("inf")
    kept = [j for j in wl.jobs if start <= j.submit < end]
    out = Workload(wl.source, kept, dict(wl.header))
    for at, why in wl.skipped_at:
        if at is not None and start <= at < end:
            out.skip(why, at=at)
    if len(kept) < len(wl.jobs):
        out.skip("outside --start/--days window", len(wl.jobs) - len(kept))
    return out


def overrun(wl: Workload, share: float, max_hours: float = 4.0, seed: int = 0) -> Workload:
    """The workload with ``share`` of its jobs that request a run time made to run past it, each
    by a uniform 1 minute to ``max_hours`` hours (seeded: the same jobs and amounts every time).

    Logs record run times that SGE would have cut at ``h_rt``; live clusters see overruns where
    the limit is absent, raised or not enforced. This replays that, to test a forecast that
    counts on requested run times."""
    if not 0.0 <= share <= 1.0 or max_hours <= 0:
        raise SwfError("overrun share must be within 0..1 and its hours positive")
    if share == 0.0:
        return wl
    rng = random.Random(seed)  # noqa: S311 (a seeded perturbation of a log, not security)
    jobs: list[SimJob] = []
    changed = 0
    for j in wl.jobs:
        if j.requested is not None and rng.random() < share:
            extra = rng.uniform(60.0, max_hours * 3600.0)
            jobs.append(dataclasses.replace(j, run=max(j.run, j.requested + extra)))
            changed += 1
        else:
            jobs.append(j)
    out = Workload(wl.source, jobs, dict(wl.header), dict(wl.skipped), skipped_at=list(wl.skipped_at))
    out.overrun = changed
    return out


def parse_text(text: str, source: str = "<swf>") -> Workload:
    return parse_swf(io.StringIO(text), source)
