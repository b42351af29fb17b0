"""The ``qsub -a`` start times of waiting jobs, read in bounded batches.

A job submitted with ``qsub -a`` is plain ``qw`` in ``qstat -xml``; only ``qstat -j`` shows its
start time, at about 4.5 kB of XML per job. So each pass asks about the waiting jobs it has not
asked about yet, oldest first, ``batch`` jobs to a ``qstat -xml -j ID,...`` call and at most
``per_pass`` jobs in all, and remembers the answers for as long as the job waits: a burst of
1,000 new jobs is read in one pass (20 calls), a cluster with 40,000 waiting jobs over 40 passes,
never 40,000 jobs in one pass. A start time set later with ``qalter -a`` is not seen.

A start time can only take a job out of the demand, so a job whose start time is not known is
not demand this pass: one not asked about yet (past the pass's bound, or after a call that
failed), and one asked about whose answer did not come (``qstat -j`` failed, timed out or
printed what cannot be read, or its answer left the job out). ``StartTimes.unread`` names each
with the reason; it is asked about at the next pass, and counted as soon as the answer comes.
The first call that fails ends the pass's asking: a master that does not answer costs one
time-out, not one per batch.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from operator import ne
from typing import Protocol

from elb.core.model import Job

log = logging.getLogger("elb")

BATCH = 50  # jobs per qstat -xml -j call (about 225 kB of XML)
READS_PER_PASS = 1000  # jobs asked about per pass at most (20 calls)
NOT_ASKED = "qstat -j not asked about it yet (at most {n} new waiting jobs a pass, oldest first)"


class StartTimeReader(Protocol):
    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]: ...


class StartTimes:
    """What is known of the waiting jobs' start times: each job number asked about, with the
    submission time it had then (``_submitted``), and the start times known (``_times``: the jobs
    asked about that have one)."""

    def __init__(self, batch: int = BATCH, per_pass: int = READS_PER_PASS) -> None:
        self.batch = batch
        self.per_pass = per_pass
        self._submitted: dict[int, float | None] = {}
        self._times: dict[int, float] = {}
        self.unread: Mapping[int, str] = {}  # the last update's jobs not known, with why

    def update(self, sge: StartTimeReader, pending: Sequence[Job]) -> Mapping[int, float]:
        """Forget jobs no longer waiting, ask about the new ones (``batch`` a call, at most
        ``per_pass``), and return the start times known (jobs without one are left out). The
        new jobs whose answer did not come, asked about or not, are ``unread`` until the next
        update (job number -> why)."""
        # A job's entries share its submission time. (One comprehension, reading each job's
        # fields directly: cheaper than a dict of two ``attrgetter`` maps zipped.)
        waiting = {job.job_id: job.submitted for job in pending}
        # Forgotten: the jobs no longer waiting, or waiting with another submission time (a job
        # number used again). One lookup a job asked about, made in C (the difference of the two
        # dicts' items would make and hash a pair for each, at twice the cost).
        asked = self._submitted
        now_submitted = map(waiting.get, asked.keys(), repeat(_GONE))
        gone = list(compress(asked.keys(), map(ne, now_submitted, asked.values())))
        for job_id in gone:
            del asked[job_id]
            self._times.pop(job_id, None)
        new_ids = waiting.keys() - asked.keys()
        # The oldest jobs not asked about yet (no submission time first, then by job number):
        # the smallest few, without sorting them all (nor keeping a pair for each).
        new = ((s if (s := waiting[k]) is not None else 0.0, k) for k in new_ids)
        ids = [k for _s, k in heapq.nsmallest(self.per_pass, new)]
        unread = dict.fromkeys(new_ids, NOT_ASKED.format(n=self.per_pass))
        for at in range(0, len(ids), self.batch):
            if not self._ask(sge, ids[at : at + self.batch], unread):
                break
        if len(unread) > len(new_ids) - len(ids):
            log.warning("the start time (qsub -a) of %d waiting job(s) could not be read", len(unread))
        self.unread = unread
        # The jobs asked about are now the waiting ones but those not answered: ``waiting`` itself
        # without them, so that the next update looks up this pass's very job numbers and
        # submission times (a job the reader hands back again holds the same objects), read just
        # now, rather than those of the pass that first asked about each, long out of the caches.
        for job_id in unread:
            del waiting[job_id]
        self._submitted = waiting
        return dict(self._times)

    def _ask(self, sge: StartTimeReader, ids: Sequence[int], unread: dict[int, str]) -> bool:
        """One ``qstat -j`` call for ``ids``: the start times kept, each job answered taken out of
        ``unread``, each job left out of the answer given why. False if the call failed."""
        try:
            times = sge.start_times(ids)
        except Exception as err:  # asked again next pass; meanwhile they are not demand
            log.warning("cannot read the start times (qsub -a) of %d waiting job(s): %s", len(ids), err)
            unread.update(dict.fromkeys(ids, _one_line(str(err))))
            return False
        for job_id in ids:
            if job_id in times:
                start = times[job_id]
                if start is not None:
                    self._times[job_id] = start
                del unread[job_id]
            else:
                unread[job_id] = "qstat -j did not show its start time (qsub -a)"
        return True


_GONE = object()  # no job's submission time


def _one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters (a reason is shown on one line)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


__all__: Sequence[str] = ("BATCH", "NOT_ASKED", "READS_PER_PASS", "StartTimeReader", "StartTimes")
