"""Slurm's jobs and nodes as elb's scheduler-neutral snapshot (``elb.core.model``), for the policy.

The policy reads hosts with slots and jobs with states; for Slurm a host is a node that is up
(not powered down nor powering down or up), with one queue instance per partition whose slots
are the node's CPUs (disabled while it drains, unreachable while it is not up); a job holding
nodes runs on each of them; a pending job that is demand (``SlurmJob.demand``) waits, any other
pending job is held. Each job keeps Slurm's own state word (``PENDING``, ``RUNNING``). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import chain, compress, count, repeat
from operator import attrgetter, is_
from types import MappingProxyType
from typing import cast

from elb.core.frozen import maker
from elb.core.gcpause import paused
from elb.core.model import NO_FLAGS, Host, Job, JobPhase, QueueFlags, QueueInstance, Snapshot
from elb.schedulers.slurm.parse import SlurmJob, SlurmNode, SqueueFields, not_demand_reason

MAX_TASKS = 1_000_000  # an array counts at most this many pending tasks (the policy caps far below)


def node_up(node: SlurmNode) -> bool:
    """Powered up, answering and usable in Slurm's eyes."""
    if node.powered_down or node.powering_up or node.powering_down:
        return False
    return node.state not in ("down", "unknown", "future") and "not_responding" not in node.flags


def host_of(node: SlurmNode) -> Host:
    flags = NO_FLAGS
    if node.drain:
        flags |= QueueFlags.DISABLED
    if not node_up(node):
        flags |= QueueFlags.UNREACHABLE
    # A node powering up runs nothing yet: the CPUs Slurm allocated there are a job's that waits for it.
    used = 0 if node.powering_up else node.cpus_allocated
    queues = tuple(
        QueueInstance(p, node.name, node.cpus if i == 0 else 0, used if i == 0 else 0, 0, flags)
        for i, p in enumerate(node.partitions or ("",))
    )
    return Host(node.name, queues, num_proc=node.cpus)


def array_tasks(job_id: str) -> int:
    """Tasks an squeue entry stands for: ``8_[6-100%5]`` (pending tasks of an array: the job's
    decimal digits, ``_[``, then parts ``N``, ``N-M`` or ``N-M:S`` of decimal digits joined by
    ``,``, and a limit after ``%``) or 1 (anything else); ``array_id``'s."""
    return array_id(job_id)[1]


def job_number(job_id: str) -> int:
    """The job's number in squeue's id (``8``, ``8_3``, ``8_[6-100%5]``: 8; 0 for an id that does
    not start with one): the decimal digits before the first ``_``, or the whole id."""
    head = job_id.partition("_")[0]
    return int(head) if head.isdecimal() else 0  # (isdecimal: the digits \d matches)


def array_id(job_id: str) -> tuple[int, int]:
    """``job_number`` and ``array_tasks`` of an squeue id, from one split of it at its first
    ``_`` (a read works both out for each new line of an array's pending tasks). Each part of
    the expression is read in the loop, without a call (an array's expression has several)."""
    head, _, tail = job_id.partition("_")
    if not head.isdecimal():  # (no job's number: no array's tasks either)
        return 0, 1
    number = int(head)
    if not tail.startswith("["):
        return number, 1
    total = 0
    for part in tail.strip("[]").partition("%")[0].split(","):
        span, colon, step_text = part.partition(":")
        first, dash, last = span.partition("-")
        if not first.isdecimal() or (dash and not last.isdecimal()) or (colon and not step_text.isdecimal()):
            return number, 1
        if dash:  # N-M or N-M:S: (M - N) // S + 1, none when M < N (a step of 0 counts as 1)
            step = int(step_text) if colon else 1
            tasks = (int(last) - int(first)) // (step or 1) + 1
            if tasks > 0:
                total += tasks
        else:  # N (or N:S): one task
            total += 1
        if total >= MAX_TASKS:
            return number, MAX_TASKS
    return number, total or 1


# A Slurm job asks for no resource by name: each neutral job shares these empty read-only mappings.
_NO_REQUESTS: Mapping[str, str] = MappingProxyType({})
_job = maker(Job)  # a Job by keyword, without a call of the class (``elb.core.frozen.maker``)
_WAITING, _HELD = JobPhase.WAITING, JobPhase.HELD
_FIELDS = attrgetter(*(f.name for f in dataclasses.fields(SlurmJob)))  # a job's fields (``SqueueFields``)


def pending_job(job: SlurmJob) -> Job:
    """The neutral job of a pending ``job`` (``jobs_of``'s one: ``pending_of`` its fields)."""
    return pending_of(_FIELDS(job))


def pending_of(fields: SqueueFields) -> Job:
    """The neutral job of a pending squeue entry of these ``fields`` (``SlurmJob``'s): waiting
    when it is demand (pending for no reason of ``not_demand_reason``), else held. Made through
    ``Job``'s maker (``elb.core.frozen.maker``: a read makes one for each new line)."""
    job_id, _, state, reason, _, cpus, _, submitted, _, time_limit, user, name = fields
    if job_id.isdecimal():  # (most ids: the number alone, one task)
        number, tasks = int(job_id), 1
    else:
        number, tasks = array_id(job_id)
    return _job(
        job_id=number,
        name=name,
        owner=user,
        state=state,
        phase=_WAITING if not_demand_reason(reason) is None else _HELD,
        slots=cpus,
        submitted=submitted,
        tasks=tasks,
        hard_requests=_NO_REQUESTS,
        hard_runtime=time_limit,
        master_requests=_NO_REQUESTS,
        slave_requests=_NO_REQUESTS,
    )


def jobs_of(job: SlurmJob) -> list[Job]:
    if job.pending:
        return [pending_job(job)]
    number = job_number(job.job_id)
    per_node = max(1, job.cpus // max(job.nodes, 1))
    # CONFIGURING: Slurm gave the job nodes that are still powering up; it runs on none of them
    phase = JobPhase.STARTING if job.configuring else JobPhase.RUNNING
    return [
        _job(
            job_id=number,
            name=job.name,
            owner=job.user,
            state=job.state,
            phase=phase,
            slots=per_node,
            submitted=job.submitted,
            started=job.started,
            hard_requests=_NO_REQUESTS,
            queue=f"{job.partition}@{n}",
            hard_runtime=job.time_limit,
            master_requests=_NO_REQUESTS,
            slave_requests=_NO_REQUESTS,
        )
        for n in job.nodelist
    ]


Made = Job | tuple[Job, ...]  # the jobs of one squeue line (``made_of``)


def made_of(job: SlurmJob) -> Made:
    """``jobs_of(job)`` as a line's jobs are kept (``elb.schedulers.slurm.parse.SqueueMemo``):
    the one job (every pending line), or the tuple of them: no container a line."""
    made = jobs_of(job)
    return made[0] if len(made) == 1 else tuple(made)


def flat(made: Sequence[Made], several: Sequence[int] | None = None) -> tuple[Job, ...]:
    """The jobs of ``made`` (each a job or a tuple of them) in their order: the stretches of
    single jobs taken whole, the few tuples (running jobs over several nodes, or none) spliced
    in; ``several``: their indices, when known (else found by the type of each)."""
    if several is None:
        several = list(compress(count(), map(is_, map(type, made), repeat(tuple))))
    if not several:
        return tuple(cast("list[Job]", made))
    pieces: list[Sequence[Job]] = []
    start = 0
    for i in several:
        pieces += (cast("list[Job]", made[start:i]), cast("tuple[Job, ...]", made[i]))
        start = i + 1
    pieces.append(cast("list[Job]", made[start:]))
    return tuple(chain.from_iterable(pieces))


class HostsMemo:
    """The host each node of the last snapshot made (``host_of``, None: not up), by the node's
    identity: a node whose sinfo lines are the very ones of the read before is the same object
    (``elb.schedulers.slurm.parse.SinfoMemo``), and its host is reused. The nodes are kept with
    their hosts, so an identity stays its own while it is kept; only the last snapshot's are kept."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[SlurmNode, Host | None]] = {}


def _host_or_none(node: SlurmNode) -> Host | None:
    return host_of(node) if node_up(node) else None


def _hosts(nodes: Sequence[SlurmNode], memo: HostsMemo | None) -> tuple[Host, ...]:
    """The hosts of the ``nodes`` that are up, in their order; ``memo``: the last snapshot's (updated)."""
    if memo is None:
        return tuple(host_of(n) for n in nodes if node_up(n))
    last = memo.made
    made: dict[int, tuple[SlurmNode, Host | None]] = {}
    up: list[Host] = []
    for node in nodes:
        entry = last.get(id(node)) or made.get(id(node)) or (node, _host_or_none(node))
        made[id(node)] = entry
        if entry[1] is not None:
            up.append(entry[1])
    memo.made = made
    return tuple(up)


def snapshot(
    jobs: Sequence[SlurmJob],
    nodes: Sequence[SlurmNode],
    now: float,
    *,
    made: Sequence[Made] | None = None,
    several: Sequence[int] | None = None,
    neutral: tuple[Job, ...] | None = None,
    hosts: HostsMemo | None = None,
) -> Snapshot:
    """The neutral snapshot of one read of Slurm; ``made``: each job's ``made_of``, when the read
    kept them (its squeue lines' memo), else worked out; ``several``: the indices of ``made``'s
    tuples, when known; ``neutral``: the neutral jobs one after the other, when the read carried
    them (``elb.schedulers.slurm.held.Columns``: ``jobs`` and ``made`` not read); ``hosts``: the
    hosts of the snapshot before (updated); the cycle collector waits meanwhile
    (``elb.core.gcpause``)."""
    with paused(keep=True):
        if neutral is None:
            neutral = flat(list(map(made_of, jobs)), None) if made is None else flat(made, several)
        up = _hosts(nodes, hosts)
    return Snapshot(now=now, jobs=neutral, hosts=up)


__all__: Sequence[str] = (
    "HostsMemo",
    "Made",
    "array_id",
    "array_tasks",
    "flat",
    "host_of",
    "made_of",
    "node_up",
    "pending_job",
    "pending_of",
    "snapshot",
)
