"""The ``qsub -a`` start times of waiting jobs, read a bounded number at a time.

A job submitted with ``qsub -a`` is plain ``qw`` in ``qstat -xml``; only ``qstat -j`` shows its
start time, at about 4.5 kB of XML per job. So each pass asks about at most ``limit`` waiting
jobs it has not asked about yet (oldest first, one ``qstat -xml -j`` call) and remembers the
answers for as long as the job waits: a cluster with 40,000 waiting jobs is read once, over
passes, never 40,000 jobs in one pass. A job not asked about yet counts as demand (as before the
answer comes). A start time set later with ``qalter -a`` is not seen.

A start time can only take a job out of the demand, so a job asked about whose start time could
not be read (``qstat -j`` failed, timed out or printed what cannot be read, or its answer left
the job out) is not demand this pass: ``StartTimes.unread`` names it with the reason, and it is
asked about again at the next pass, and counted as soon as the answer comes.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Protocol

from elb.core.model import Job

log = logging.getLogger("elb")

READS_PER_PASS = 50


class StartTimeReader(Protocol):
    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]: ...


class StartTimes:
    """What is known of the waiting jobs' start times: each job number asked about, with the
    submission time it had then (``_submitted``) and its start time (``_starts``; None: none)."""

    def __init__(self, limit: int = READS_PER_PASS) -> None:
        self.limit = limit
        self._submitted: dict[int, float | None] = {}
        self._starts: dict[int, float | None] = {}
        self._times: dict[int, float] = {}  # the start times known (not None)
        self.unread: Mapping[int, str] = {}  # the last update's jobs asked about in vain, with why

    def update(self, sge: StartTimeReader, pending: Sequence[Job]) -> Mapping[int, float]:
        """Forget jobs no longer waiting, ask about up to ``limit`` new ones, and return the
        start times known (jobs without one are left out). The jobs asked about whose answer did
        not come are ``unread`` until the next update (job number -> why)."""
        # A job's entries share its submission time. (Built and compared as whole dicts and
        # their items: 50,000 waiting jobs are a few milliseconds.)
        waiting = dict(zip(map(_JOB_ID, pending), map(_SUBMITTED, pending), strict=True))
        # Forgotten: the jobs no longer waiting, or waiting with another submission time (a job
        # number used again).
        for job_id, _submitted in self._submitted.items() - waiting.items():
            del self._submitted[job_id], self._starts[job_id]
            self._times.pop(job_id, None)
        # The oldest jobs not asked about yet (no submission time first, then by job number):
        # the smallest few, without sorting them all (nor keeping a pair for each).
        new = ((s if (s := waiting[k]) is not None else 0.0, k) for k in waiting.keys() - self._submitted.keys())
        ids = [k for _s, k in heapq.nsmallest(self.limit, new)]
        unread: dict[int, str] = {}
        if ids:
            try:
                times = sge.start_times(ids)
            except Exception as err:  # asked again next pass; meanwhile they are not demand
                log.warning("cannot read the start times (qsub -a) of %d waiting job(s): %s", len(ids), err)
                why = _one_line(str(err))
                unread = dict.fromkeys(ids, why)
            else:
                for job_id in ids:
                    if job_id in times:
                        start = times[job_id]
                        self._submitted[job_id], self._starts[job_id] = waiting[job_id], start
                        if start is not None:
                            self._times[job_id] = start
                    else:
                        unread[job_id] = "qstat -j did not show its start time (qsub -a)"
                if unread:
                    log.warning("qstat -j did not show the start time (qsub -a) of %d waiting job(s)", len(unread))
        self.unread = unread
        return dict(self._times)


_JOB_ID, _SUBMITTED = attrgetter("job_id"), attrgetter("submitted")


def _one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters (a reason is shown on one line)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


__all__: Sequence[str] = ("READS_PER_PASS", "StartTimeReader", "StartTimes")
