"""Jobs that spot interruptions keep sending back: which must next run on an on-demand node. Pure.

A spot interruption requeues a node's rerunnable jobs (``elb.core.scheduler.Scheduler.requeue``);
the journal counts, per job, how many times that happened. A job requeued more often than
``policy.spot_interruptions_allowed`` is bound to on-demand nodes, once. This module decides
*which* jobs; the scheduler's driver decides *how* (``elb.core.scheduler.BindsOnDemand``, its
optional capability, which says what each shipped driver does). Without that capability the job
is left as it is, said once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_TASK = re.compile(r"^(\d+)(?:\.(\d+))?$")


def job_number(pushed: str) -> int:
    """The job number of a requeued entry as ``elb.core.scheduler.Requeued.pushed`` names it:
    ``123`` or ``123.4`` (an array task). ``ValueError`` for anything else."""
    m = _TASK.fullmatch(pushed)
    if m is None:
        raise ValueError(f"{pushed!r} is not a job number or job.task")
    return int(m.group(1))


@dataclass(frozen=True, slots=True)
class Move:
    """One job spot interruptions sent back too often, to bind to on-demand nodes: its hard
    requests as the scheduler's read listed them (``elb.core.model.Job.hard_requests``: what a
    driver that binds by a request keeps), and why, for the log."""

    job: int
    times: int  # interruptions so far, this one included
    hard_requests: Mapping[str, str] = field(default_factory=dict, hash=False)
    reason: str = ""


def moves(
    counts: Sequence[tuple[int, int, bool]],
    allowed: int,
    hard_requests: Mapping[int, Mapping[str, str]],
) -> list[Move]:
    """For each ``(job, times interrupted, already moved)``: the jobs interrupted more than
    ``allowed`` times and not moved yet, each with its hard requests (``hard_requests[job]``)."""
    return [
        Move(job, times, hard_requests.get(job, {}), f"requeued by {times} spot interruptions (more than {allowed})")
        for job, times, moved in counts
        if not moved and times > allowed
    ]
