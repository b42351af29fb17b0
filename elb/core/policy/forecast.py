"""Where the waiting jobs will run within a horizon: the demand no existing slot meets in time.

Pure functions over a ``ClusterView``. The capacity that can serve a waiting job within the horizon
(normally one boot time: what a node launched now would take) is:

- the free slots of ready workers now;
- every node still booting (it is ready within a boot time of its launch, so before the horizon);
- the slots of running jobs whose requested run time (``h_rt``) ends before the horizon; one
  already past its requested end by more than ``OVERDUE_GRACE`` is assumed to run on: SGE ends a
  job at its ``h_rt`` within a load report (40 s by default), so one still running later has a
  limit nothing enforces (a log replay, ``s_rt`` only, a suspended job, a limit raised by
  ``qalter``) and its slots are not about to free;
- the slots of running jobs without ``h_rt`` that have run no longer than the horizon is ahead
  (``ages_by``): such a job is expected to run as long again as it has run (batch jobs' run times
  are heavy-tailed: the longer one has run, the longer it is likely to run on; half of those aged
  ``a`` run ``a`` more or less), so one that started within the last boot time is expected to
  end before a node launched now is ready. One that has run longer is assumed to run on.

Waiting jobs are placed oldest first, like SGE's FIFO, by ``elb.core.policy.placement`` (the rule the
simulated dispatcher uses too): a job of at most a node's slots on the first bin in host order it
fits (first fit), a wider job on whole empty bins (a PE job with a fixed allocation rule). What does
not fit is the demand for new nodes, counted in whole nodes, up to just past the room under
``max_nodes``. The work of a pass depends on the number of job entries and nodes, never on how many
tasks or slots a job asks for.

The capacity is ``_capacity``'s walk over a view's workers, or a ``Capacity`` that a tally kept
between calls hands (``elb.core.policy.tally.CapacityTally``: the ready workers in an index it keeps,
and only the workers that differ by the horizon as bins): ``place_waiting`` places the same jobs
on either the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from elb.core.frozen import quick_init
from elb.core.model import Job
from elb.core.policy.placement import Bin, FreeIndex, Key, Packing, host_order, width
from elb.core.policy.view import ClusterView
from elb.core.state import worker_slots


@quick_init
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


@quick_init
@dataclass(frozen=True, slots=True)
class Capacity:
    """What is there by a horizon, as ``Packing`` takes it: workers' (free, total) by host order
    (``ready``, read and never changed: a tally's ready and booting workers; None: none kept), the
    named bins over and beside them (``over``: ready workers with slots that running jobs free, and
    the booting ones not in ``ready``), then ``bins`` (whole nodes ending wide jobs free); and the
    counts a forecast reports."""

    bins: list[Bin]
    ready_count: int
    booting: int
    freed: int
    ready: FreeIndex[Key] | None = None
    over: list[Bin] = field(default_factory=list)


class Waiting(Protocol):
    """What a forecast reads of the waiting jobs (a ``ClusterView`` has it)."""

    @property
    def pending(self) -> tuple[Job, ...]: ...
    @property
    def pending_slots(self) -> int: ...
    @property
    def pending_plain(self) -> bool: ...
    @property
    def slots_per_node(self) -> int: ...


class Tallied(Waiting, Protocol):
    """A view kept between calls that works out its own capacity (``elb.core.policy.tally.TallyView``)."""

    def capacity(self, horizon: float) -> Capacity: ...


# Seconds a running job may be past its requested end and still count as ending (see above).
OVERDUE_GRACE = 120.0


def ages_by(now: float, horizon: float) -> float:
    """The earliest start of a running job without ``h_rt`` expected to end by ``horizon``: it is
    expected to end at ``now`` plus its age, so by the horizon when its age is at most
    ``horizon - now``."""
    return now - (horizon - now)


Window = tuple[float, float, float]  # ``ending_window``'s (earliest end, latest end, earliest start)


def ending_window(now: float, horizon: float) -> Window:
    """Which running jobs count as ending by ``horizon`` (``ends_by``): one with a requested run
    time whose requested end is between the first two (not past it by more than
    ``OVERDUE_GRACE``, and by the horizon); one without that started at the third or later
    (``ages_by``). A tally finds them by these bounds in its indexes."""
    return now - OVERDUE_GRACE, horizon, ages_by(now, horizon)


def ends_by(job: Job, window: Window) -> bool:
    """Whether a running job counts as ending within the ``ending_window``."""
    if job.started is None:
        return False
    earliest, latest, young = window
    if job.hard_runtime is None:
        return job.started >= young
    return earliest <= job.started + job.hard_runtime <= latest


def freed_by(job: Job, spn: int, size: int) -> tuple[int, int]:
    """What a running job that ends frees, (whole nodes, slots): a wide job (more slots than a
    node of ``spn``) whole nodes, never more than the ``size`` of the cluster (the others are other
    hosts); a narrow one its slots on its own host."""
    if job.slots > spn:
        return min(width(job.slots, spn), size), 0
    return 0, job.total_slots


def overdue_at(job: Job, span: float) -> float:
    """The instant from which a running job is taken as running on by a forecast ``span`` ahead:
    its requested end plus ``OVERDUE_GRACE``, or without a requested run time its start plus
    ``span`` (it has then run longer than the horizon is ahead). The job has started."""
    assert job.started is not None
    if job.hard_runtime is None:
        return job.started + span
    return job.started + job.hard_runtime + OVERDUE_GRACE


def _capacity(view: ClusterView, horizon: float) -> tuple[list[Bin], int, int, int]:
    """Bins of the slots available by ``horizon``: ready workers (with the slots their running jobs
    free by h_rt, or by their age without one) and booting nodes in host order, then whole nodes
    that ending wide jobs free."""
    spn = view.slots_per_node
    named: list[Bin] = []
    freed_nodes: list[Bin] = []
    ready = booting = freed = 0
    window = ending_window(view.now, horizon)
    size = len(view.workers)
    for w in view.workers:
        if w.booting and w.node is not None:
            s = worker_slots(w.node, otherwise=spn)
            named.append(Bin(w.name, s, s))
            booting += 1
            continue
        facts = w.facts
        if not (w.ready and facts is not None):
            continue
        ready += 1
        total, free = facts.total, facts.free
        for j in w.jobs:
            if not ends_by(j, window):
                continue
            k, slots = freed_by(j, spn, size)
            if k:
                freed_nodes.extend(Bin(None, spn, spn) for _ in range(k))
                freed += k * spn
            else:
                gain = min(slots, total - free)
                free += gain
                freed += gain
        named.append(Bin(w.name, free, total))
    named.sort(key=lambda b: host_order(b.name or ""))
    return named + freed_nodes, ready, booting, freed


def view_capacity(view: ClusterView, horizon: float) -> Capacity:
    """``_capacity`` of the view as a ``Capacity``."""
    bins, ready, booting, freed = _capacity(view, horizon)
    return Capacity(bins, ready, booting, freed)


def forecast(
    view: ClusterView | Tallied, horizon: float, counted: tuple[Job, ...] | None = None, *, limit: int
) -> Forecast:
    """Place ``counted`` waiting jobs (default, or the very tuple: all of ``view.pending``) on what is
    there by ``horizon``.

    New nodes stop being counted once past ``limit`` (the room left under ``max_nodes``); the
    jobs after that are still placed on the existing workers, so ``assigned`` is whole.
    """
    capacity = view_capacity(view, horizon) if isinstance(view, ClusterView) else view.capacity(horizon)
    return place_waiting(capacity, view, counted, limit=limit)


def place_waiting(capacity: Capacity, view: Waiting, counted: tuple[Job, ...] | None = None, *, limit: int) -> Forecast:
    """``forecast`` on a capacity worked out already (``view_capacity``, or a tally's)."""
    ready, booting, freed = capacity.ready_count, capacity.booting, capacity.freed
    packing = Packing(capacity.bins, view.slots_per_node, max(0, limit), capacity.ready, capacity.over)
    short_jobs = short_slots = 0
    place = packing.place
    jobs = view.pending if counted is None else counted
    done = 0  # the slots of the jobs placed so far
    for i, job in enumerate(jobs):
        slots, tasks = job.slots, job.tasks
        done += slots * tasks
        short = place(slots, tasks).short
        if short:
            short_jobs += 1
            short_slots += short * slots
            if short == tasks and packing.saturated:
                # Every job after this one is short of all its tasks: counted without placing; the
                # whole of the view's waiting jobs by its totals, less the jobs placed.
                if (counted is None or counted is view.pending) and view.pending_plain:
                    short_jobs += len(jobs) - i - 1
                    short_slots += view.pending_slots - done
                    break
                # A job of no slot or no task is placed nowhere and is short of nothing.
                sizes = [(j.slots, j.tasks) for j in jobs[i + 1 :] if j.slots > 0 and j.tasks > 0]
                short_jobs += len(sizes)
                short_slots += sum(s * t for s, t in sizes)
                break
    return Forecast(
        packing.new_nodes,
        short_jobs,
        short_slots,
        frozenset(packing.assigned),
        ready,
        booting,
        freed,
        packing.complete,
    )
