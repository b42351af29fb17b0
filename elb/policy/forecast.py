"""Where the waiting jobs will run within a horizon: the demand no existing slot meets in time.

Pure functions over a ``ClusterView``. The capacity that can serve a waiting job within the horizon
(normally one boot time: what a node launched now would take) is:

- the free slots of ready workers now;
- every node still booting (it is ready within a boot time of its launch, so before the horizon);
- the slots of running jobs whose requested run time (``h_rt``) ends before the horizon; a job
  without ``h_rt`` is assumed to run on.

Waiting jobs are placed oldest first, like SGE's FIFO: a job of at most a node's slots on the
fullest bin it fits (best fit), a wider job on whole empty bins (a PE job with a fixed allocation
rule). What does not fit is the demand for new nodes, counted in whole nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elb.model import Job
from elb.policy.view import ClusterView


@dataclass(frozen=True, slots=True)
class Forecast:
    """The outcome of placing the waiting jobs on the capacity of the horizon."""

    new_nodes: int  # whole nodes to launch for the jobs that fit nowhere
    short_jobs: int  # waiting jobs (array tasks counted once per entry) that fit nowhere
    short_slots: int  # their slots
    assigned: frozenset[str]  # existing workers a waiting job is placed on (never remove these)
    ready: int  # ready workers counted
    booting: int  # booting workers counted
    freed_slots: int  # slots credited from running jobs ending within the horizon
    complete: bool = True  # False: counting stopped past ``limit`` (new_nodes is a lower bound)


@dataclass(slots=True)
class _Bin:
    name: str | None  # None: not an existing worker (a new node, or nodes an ending wide job frees)
    free: int
    total: int
    new: bool = False  # a node to launch


def _ends_by(job: Job, horizon: float) -> bool:
    if job.hard_runtime is None or job.started is None:
        return False
    return job.started + job.hard_runtime <= horizon


def _capacity(view: ClusterView, horizon: float) -> tuple[list[_Bin], int, int, int]:
    """Bins of the slots available by ``horizon``: ready workers (with the slots their running jobs
    free by h_rt), booting nodes, and whole nodes that ending wide jobs free."""
    spn = view.slots_per_node
    bins: list[_Bin] = []
    ready = booting = freed = 0
    for w in view.workers:
        if w.booting and w.node is not None:
            s = w.node.slots or spn
            bins.append(_Bin(w.name, s, s))
            booting += 1
            continue
        if not (w.ready and w.host is not None):
            continue
        ready += 1
        total = w.host.slots_total
        free = w.host.free_slots
        for j in w.jobs:
            if not _ends_by(j, horizon):
                continue
            if j.slots > spn:
                k = math.ceil(j.slots / spn)  # a wide job frees whole nodes (the others are other hosts)
                bins.extend(_Bin(None, spn, spn) for _ in range(k))
                freed += k * spn
            else:
                gain = min(j.total_slots, total - free)
                free += gain
                freed += gain
        bins.append(_Bin(w.name, free, total))
    return bins, ready, booting, freed


def _place_wide(job: Job, bins: list[_Bin], spn: int, assigned: set[str]) -> tuple[int, int]:
    """Whole empty bins for each task; returns (new nodes, tasks short)."""
    k = math.ceil(job.slots / spn)
    new = short = 0
    for _ in range(job.tasks):
        empty = [b for b in bins if b.free == b.total and b.total >= spn][:k]
        for b in empty:
            b.free = 0
            if b.name is not None:
                assigned.add(b.name)
        missing = k - len(empty)
        if missing:
            bins.extend(_Bin(None, 0, spn, new=True) for _ in range(missing))
            new += missing
            short += 1
    return new, short


def _place_narrow(job: Job, bins: list[_Bin], spn: int, assigned: set[str]) -> tuple[int, int]:
    """Best fit for each task, packing new nodes; returns (new nodes, tasks short)."""
    left = job.tasks
    short = 0
    while left > 0:
        best: _Bin | None = None
        for b in bins:
            if b.free >= job.slots and (best is None or b.free < best.free):
                best = b
        if best is None:
            per = max(1, spn // job.slots)
            add = math.ceil(left / per)
            for i in range(add):
                take = min(per, left - i * per)
                bins.append(_Bin(None, spn - take * job.slots, spn, new=True))
            return add, short + left
        take = min(left, best.free // job.slots)
        best.free -= take * job.slots
        left -= take
        if best.name is not None:
            assigned.add(best.name)
        if best.new:
            short += take  # packed on a node launched for earlier jobs: it waits for that boot too
    return 0, short


def forecast(
    view: ClusterView, horizon: float, counted: tuple[Job, ...] | None = None, limit: int | None = None
) -> Forecast:
    """Place ``counted`` waiting jobs (default: all of ``view.pending``) on what is there by ``horizon``.

    ``limit`` stops counting new nodes once past that many (the room left under ``max_nodes``).
    """
    spn = view.slots_per_node
    bins, ready, booting, freed = _capacity(view, horizon)
    assigned: set[str] = set()
    new = short_jobs = short_slots = 0
    complete = True
    for job in view.pending if counted is None else counted:
        if limit is not None and new > limit:
            complete = False
            break
        if job.slots <= 0:
            continue
        place = _place_wide if job.slots > spn else _place_narrow
        more, short = place(job, bins, spn, assigned)
        new += more
        if short:
            short_jobs += 1
            short_slots += short * job.slots
    return Forecast(new, short_jobs, short_slots, frozenset(assigned), ready, booting, freed, complete)
