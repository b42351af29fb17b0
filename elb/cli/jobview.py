"""The waiting jobs as ``elb jobs`` shows them: each with whether elb counts it as demand, and why not.

A waiting job is demand when SGE may schedule it (state ``qw``: not held, not in error) and a new
node elb launches could run it (``elb.schedulers.sge.servable``, the daemon's own filter: its queue list, PE and
allocation rule, hard requests against what a new node offers, ``max_nodes``); the policy's node
size is configured, else the workers' most common size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elb.core.model import Job, JobPhase, Node, Snapshot
from elb.core.policy.view import cluster_view
from elb.core.state import join


@dataclass(frozen=True, slots=True)
class JobFacts:
    job_id: int
    name: str
    owner: str
    state: str
    tasks: int
    slots: int  # per task
    pe: str | None
    requests: dict[str, str]
    waited: float | None  # seconds since submission
    demand: bool
    why_not: str | None  # None when demand


def why_not_demand(job: Job, not_demand: Mapping[int, str]) -> str | None:
    """Why the policy does not count this waiting job (None: it does). ``not_demand``: the
    verdicts of the scheduler's split by job number (Grid Engine's ``elb.schedulers.sge.servable``,
    Slurm's pending reasons), said first; a job it left out of its split is said by its phase."""
    said = not_demand.get(job.job_id)
    if said is not None:
        return said
    if job.phase is JobPhase.ERROR:
        return f"in error ({job.state}): qstat -j {job.job_id} says why, qmod -cj {job.job_id} clears it"
    if job.phase is JobPhase.HELD:
        return f"held ({job.state}): a hold or a job it waits for (qstat -j {job.job_id})"
    if job.phase is not JobPhase.WAITING:
        return f"state {job.state}: not waiting to be scheduled"
    return None


def waiting_jobs(
    snap: Snapshot, nodes: Sequence[Node], master: str, slots_per_node: int | None, not_demand: Mapping[int, str]
) -> tuple[int, list[JobFacts]]:
    """The slots per node the policy assumes, and every job not on a host, oldest first."""
    spn = cluster_view(join(nodes, (), snap), master, slots_per_node).slots_per_node
    waiting = sorted(
        (j for j in snap.jobs if j.queue is None),
        key=lambda j: (j.submitted if j.submitted is not None else snap.now, j.job_id),
    )
    out = []
    for j in waiting:
        why = why_not_demand(j, not_demand)
        out.append(
            JobFacts(
                job_id=j.job_id,
                name=j.name,
                owner=j.owner,
                state=j.state,
                tasks=j.tasks,
                slots=j.slots,
                pe=j.pe,
                requests=dict(j.hard_requests),
                waited=None if j.submitted is None else max(0.0, snap.now - j.submitted),
                demand=why is None,
                why_not=why,
            )
        )
    return spn, out
