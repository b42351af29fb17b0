"""Which job ran on which Grid Engine node, when, holding how many slots: its accounting file
(``elb.schedulers.sge.accounting``), read for ``elb spend`` (``elb.core.attribution``).

Each job's (array task's) line is on its host, from its start to its end, with its slots, its
owner, project and queue. A parallel job's own line is its master task's host's, with all its
slots; under tight integration each of its tasks has a line of its own on the task's host: the
job's slots are spread over those hosts (``pe_uses``). Without task lines all are charged to the
master's host, and said. Jobs that never started, or ended before the window, are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from elb.core.attribution import JobUse, UsageError
from elb.core.config import Config
from elb.schedulers.sge.accounting import AccountingError, AccountingLine, read_lines
from elb.schedulers.sge.config import sge_settings


def accounting_path(config: Config) -> Path:
    """Grid Engine's accounting file: ``<sge.root>/<sge.cell>/common/accounting``."""
    sge = sge_settings(config)
    return sge.root / sge.cell / "common" / "accounting"


def unwritten(config: Config, given: Path | None) -> Path | None:
    """Grid Engine's accounting file when it is not written yet: Grid Engine makes it when the
    first job ends, so the default file missing from a cell whose ``common`` directory is there
    means no job has finished. A file named with --accounting (``given``), or a cell that is not
    there, is not this: reading it is the error it is."""
    if given is not None:
        return None
    path = accounting_path(config)
    return path if path.parent.is_dir() and not path.exists() and not path.is_symlink() else None


def sge_uses(lines: Iterable[str], since: float, until: float, source: str = "<accounting>") -> Iterator[JobUse]:
    """The job uses an accounting file records in [since, until): each job's (array task's) line
    on its host; a parallel job's slots spread over the hosts its tasks' lines name (``pe_uses``)."""
    records = _records(lines, source)
    tasks = _pe_tasks(records)
    used: set[int] = set()  # the task lines a master line took (by id)
    for rec in records:
        if rec.is_pe_task or not _ran(rec):
            continue
        theirs = [t for t in tasks.get((rec.job_number, rec.task_number), ()) if _overlap(t, rec)]
        used.update(id(t) for t in theirs)
        if _within(rec, since, until):
            yield from pe_uses(rec, theirs)
    for rec in (t for ts in tasks.values() for t in ts if id(t) not in used):  # no master line in the file
        if _within(rec, since, until):
            yield _use(rec, rec.hostname, 1.0)


def _records(lines: Iterable[str], source: str) -> list[AccountingLine]:
    try:
        return list(read_lines(lines, source))
    except AccountingError as err:
        raise UsageError(str(err)) from None


def _ran(rec: AccountingLine) -> bool:
    """Whether the line records a run (a start, and an end after it)."""
    return rec.start > 0 and rec.end > rec.start


def _within(rec: AccountingLine, since: float, until: float) -> bool:
    return rec.end > since and rec.start < until


def _pe_tasks(records: Sequence[AccountingLine]) -> dict[tuple[int, int], list[AccountingLine]]:
    """The parallel tasks' lines that record a run, by their job's number and task number."""
    tasks: dict[tuple[int, int], list[AccountingLine]] = {}
    for rec in records:
        if rec.is_pe_task and _ran(rec):
            tasks.setdefault((rec.job_number, rec.task_number), []).append(rec)
    return tasks


def _overlap(task: AccountingLine, master: AccountingLine) -> bool:
    """Whether a task's line belongs to this run of its job (a job number SGE used again runs at
    another time)."""
    return task.start < master.end and task.end > master.start


def _use(rec: AccountingLine, host: str, slots: float, *, master_only: bool = False) -> JobUse:
    job = f"{rec.job_number}.{rec.task_number}" if rec.task_number else str(rec.job_number)
    return JobUse(job, host, rec.start, rec.end, slots, rec.owner, rec.project, rec.qname, master_only=master_only)


def pe_uses(master: AccountingLine, tasks: Sequence[AccountingLine]) -> list[JobUse]:
    """A job's uses of its hosts, from its own (master) line and its parallel tasks' lines, over
    the job's run (the slots were the job's from its start to its end).

    The master line's ``slots`` are all the job's slots (``sge_granted_slots``); each task's line
    is on the host the task ran on and, as SGE writes it, repeats the job's slots. A task's line
    holds one slot on its host, or the slots it says when they are fewer than the job's (a
    per-host count); the master's host holds the rest of the job's slots, so a task's line on the
    master's own host adds nothing (the master line counts it). Without task lines (a PE with
    ``control_slaves FALSE`` or ``accounting_summary TRUE``), where the other slots ran is not
    in the file: all are charged to the master's host, marked ``master_only``."""
    total = max(1, master.slots)
    home = _short(master.hostname)
    others: dict[str, float] = {}
    for t in tasks:
        host = _short(t.hostname)
        if host != home:
            others[t.hostname] = others.get(t.hostname, 0.0) + (t.slots if 1 < t.slots < total else 1)
    if not others:
        return [_use(master, master.hostname, float(total), master_only=master.granted_pe != "" and total > 1)]
    rest = total - sum(others.values())
    out = [_use(master, host, slots) for host, slots in others.items()]
    if rest > 0:
        out.insert(0, _use(master, master.hostname, rest))
    return out


def _short(host: str) -> str:
    return host.split(".", 1)[0]


def read_sge(path: Path, since: float, until: float) -> list[JobUse]:
    """The job uses of Grid Engine's accounting file at ``path``."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return list(sge_uses(fh, since, until, str(path)))
    except OSError as err:
        raise UsageError(f"cannot read Grid Engine's accounting file {path}: {err.strerror or err}") from None
