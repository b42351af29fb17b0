"""Which node group a waiting job needs, if any: the demand model.

For one waiting job ``place`` answers:

- ``Servable(group, nodes, slots_per_node, tasks, takes, considered)``: the cheapest group whose new nodes SGE
  could start the job on (price per hour of the nodes it needs, then fewer nodes, then the order
  of the groups), with how many nodes of it the job can use at once;
- ``Unservable(reason)``: no group can ever run it (one line saying why); it is never demand;
- ``NotYet(start_time, reason)``: a group can run it, but ``qsub -a`` holds it until later.

The checks, in order; each narrows the groups still in the running, and the first that leaves
none gives the reason:

1. every hard request names a complex of the site (by name or shortcut), requestable, with a
   value of its type; a ``hostname`` request is met only by the name the next new node gets;
2. the hard queue list (``-q``: ``big.q``, ``all.q@*``, ``*@node*``, ``all.q@@allhosts``): the
   group joins a matching cluster queue, on a matching host or host group;
3. the parallel environment (wildcards allowed): defined, and served by the group (``pes``);
4. each request against what the group's hosts offer (below), then the group's FORCED complexes
   (a host offering one runs only jobs that request it);
5. the slots: how the PE's allocation rule spreads them over the group's nodes, within the
   group's ``max_nodes`` and the PE's own ``slots``.

How a request is met on a group's host (``request relop value``, see ``elb.schedulers.sge.complexes``):

- the group ``offers`` the complex: a consumable ``YES`` needs request x slots on that host
  within the value (so it limits the slots a node gives the job), ``JOB`` the request once, an
  ``EXCL`` one the whole host; any other is compared with the complex's relop;
- the global host offers it (``Site.global_values``): compared there, a ``YES`` consumable for
  all the job's slots;
- ``qname``: a queue the group joins;
- ``mem_total``/``mem_free`` against the group's ``memory``, ``num_proc`` against its ``slots``,
  when the group does not offer them;
- other load values every exec host reports (``arch``, ``load_avg``, ``swap_free``, ...) and the
  queue's own attributes and limits (``h_rt``, ``h_vmem``, ``tmpdir``, ...): taken as met. A new
  node reports its load values only once it runs, and queue limits are INFINITY unless the site
  sets them; declare a value in ``offers`` to have it checked;
- anything else (a site complex such as ``gpu`` that the group does not offer): not met, as SGE
  says "job requests unknown resource" on such a host.

An array job's ``tasks`` identical tasks are counted with arithmetic (never one by one): a node
takes as many tasks as its slots allow, and the nodes asked for are capped at the group's
``max_nodes``. Nothing here does I/O; ``now`` is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from itertools import compress, repeat
from operator import attrgetter, is_, itemgetter, not_
from typing import cast

from elb.core.frozen import maker, quick_init
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Job
from elb.schedulers.sge.complexes import (
    Complex,
    ComplexTable,
    ComplexType,
    Consumable,
    Relop,
    Requestable,
    check_value,
    match_expression,
    parse_bool,
    parse_number,
    satisfies,
)
from elb.schedulers.sge.groupoptions import sge_options
from elb.schedulers.sge.pe import ParallelEnvironment, Spread
from elb.schedulers.sge.site import Site

# SGE's upper end of an open range ("4-"): qstat prints it as 9999999.
RANGE_INFINITY = 9_999_999

# Load values every execution host reports (sge_execd and its default load sensors).
HOST_LOAD_VALUES = frozenset(
    {
        "arch",
        "cpu",
        "display_win_gui",
        "load_avg",
        "load_long",
        "load_medium",
        "load_short",
        "m_core",
        "m_socket",
        "m_thread",
        "m_topology",
        "m_topology_inuse",
        "mem_free",
        "mem_total",
        "mem_used",
        "np_load_avg",
        "np_load_long",
        "np_load_medium",
        "np_load_short",
        "num_proc",
        "swap_free",
        "swap_rate",
        "swap_rsvd",
        "swap_total",
        "swap_used",
        "virtual_free",
        "virtual_total",
        "virtual_used",
    }
)
# Attributes of every queue instance (queue_conf(5)): fixed values and resource limits.
QUEUE_VALUES = frozenset(
    {
        "calendar",
        "min_cpu_interval",
        "rerun",
        "seq_no",
        "tmpdir",
        *(f"{p}_{r}" for p in "hs" for r in ("rt", "cpu", "fsize", "data", "stack", "core", "rss", "vmem")),
    }
)


# -- inputs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobBinding:
    """What binds a waiting job beyond ``elb.core.model.Job``.

    ``hard_queues``: the hard queue list (``qsub -q``), as ``qstat -xml -r`` prints it in
    ``<hard_req_queue>`` elements; ``start_time``: the ``qsub -a`` time (POSIX seconds), which
    only ``qstat -j`` shows (``execution_time``).
    """

    hard_queues: tuple[str, ...] = ()
    start_time: float | None = None


# -- results ------------------------------------------------------------------------------------


@quick_init
@dataclass(frozen=True, slots=True)
class Servable:
    """The group the job goes to; ``nodes``: how many new nodes of it the job can use at once
    (capped by the group's ``max_nodes``); ``slots_per_node``: the most slots it takes on one.

    ``reason`` is made from the parts when read: ``tasks``, the job's task count; ``takes``, what
    each task takes ("4 slots in PE smp (4 per host)"); ``considered``, how many groups could run
    it. A pass places tens of thousands of servable jobs and reads the reason of none of them
    (only a ``qsub -a`` hold's ``NotYet`` and the simulator's assignments read it), so the answer
    keeps the parts, and two answers are equal when their parts are, as their reasons are."""

    group: NodeGroup
    nodes: int
    slots_per_node: int
    tasks: int
    takes: str
    considered: int

    @property
    def reason(self) -> str:
        what = f"{self.tasks} tasks of {self.takes}" if self.tasks > 1 else self.takes
        return _placed(what, self.nodes, self.group, self.slots_per_node, self.considered)


@quick_init
@dataclass(frozen=True, slots=True)
class Unservable:
    reason: str


@quick_init
@dataclass(frozen=True, slots=True)
class NotYet:
    """A group can run the job, but not before ``start_time`` (``qsub -a``)."""

    start_time: float
    reason: str


Placement = Servable | Unservable | NotYet


class DemandError(ValueError):
    """A job or a group that the demand model cannot take (names what and where)."""


# -- the checks ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Request:
    given: str  # the name as the job gave it
    value: str
    complex: Complex
    scope: str = ""  # "": every task; "master"/"slave": Open Cluster Scheduler's qsub -scope

    @property
    def text(self) -> str:
        return _request_text(self.given, self.value, self.scope)


def _request_text(name: str, value: str, scope: str) -> str:
    scoped = f" for the {'master task' if scope == 'master' else 'other tasks'}" if scope else ""
    return f"{name}={value}{scoped}"


@quick_init
@dataclass(frozen=True, slots=True)
class _Fit:
    group: NodeGroup
    index: int
    nodes: int  # nodes the job can use at once, within max_nodes
    wanted: int  # nodes to run all its tasks at once, without the cap
    slots_per_node: int
    tasks: int
    takes: str  # what each task takes (``_Way.what``)


@dataclass(frozen=True, slots=True)
class _Short:
    kind: str  # "host", "max_nodes", "pe_slots", "multiple"
    head: str  # "4 slots in PE smp ($pe_slots: one host)"
    limit: int
    group: str
    max_nodes: int
    narrowed: str  # why a node gives the job fewer slots than it has ("" when it does not)


@dataclass(frozen=True, slots=True)
class _Node:
    """What a new node of one group gives one job."""

    group: NodeGroup
    index: int  # the group's place in the list (breaks ties)
    max_nodes: int
    cap: int  # slots for this job on one node
    task_cap: int  # tasks of it on one node (RANGE_INFINITY: only slots limit them)
    narrowed: str  # why cap is below the node's slots ("" when it is not)


@dataclass(frozen=True, slots=True)
class _Way:
    """How each task of a job takes new nodes of one group, whatever the job's task count:
    ``on_node`` slots on each of ``nodes_per_task`` nodes, at most ``most`` tasks at once (None:
    as many as the job has); ``what``: the slots a task takes, said."""

    node: _Node
    on_node: int
    nodes_per_task: int
    most: int | None
    what: str


# A node's ways for a job's tasks (one for each PE that fits), or why none fits.
_Ways = tuple[_Way, ...] | _Short


class _Stop(Exception):
    """An early exit of the checks, carrying the reason the job is unservable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def place(
    job: Job,
    groups: NodeGroups,
    site: Site,
    now: float,
    *,
    binding: JobBinding | None = None,
    new_node_name: str | None = None,
) -> Placement:
    """Where the waiting ``job`` can run: the cheapest group, never, or not yet.

    ``new_node_name``: the name the next new node gets (``hostname`` requests and host parts of
    ``-q`` are matched against it; without it only ``*`` matches a host).
    """
    if job.queue is not None:
        raise DemandError(f"job {job.job_id} runs in {job.queue}: only waiting jobs are demand")
    return _place(job, groups, site, now, binding=binding or JobBinding(), new_node_name=new_node_name)


def _place(
    job: Job,
    groups: NodeGroups,
    site: Site,
    now: float,
    *,
    binding: JobBinding,
    new_node_name: str | None,
) -> Placement:
    """``place``, for a job known to wait."""
    try:
        candidates = _candidates(job, groups, site, binding, new_node_name)
        fit, considered = _cheapest(job, candidates)
    except _Stop as stop:
        return Unservable(stop.reason)
    servable = _servable(fit, considered)
    return _not_before(servable, binding.start_time, now)


def _servable(fit: _Fit, considered: int) -> Servable:
    """The answer for the cheapest fit of ``considered`` groups that can run the job."""
    return _SERVABLE(fit.group, fit.nodes, fit.slots_per_node, fit.tasks, fit.takes, considered)


def _placed(what: str, nodes: int, group: NodeGroup, slots_per_node: int, considered: int) -> str:
    """A servable job's reason: ``what`` it takes on the nodes of the cheapest of ``considered``
    groups that can run it."""
    reason = f"{what} on {_plural(nodes, 'node')} of group {group.name} ({_plural(slots_per_node, 'slot')} on each)"
    if considered > 1:
        reason += f", the cheapest of {considered} groups that can run it"
    return reason


def _not_before(servable: Servable, start_time: float | None, now: float) -> Servable | NotYet:
    """``servable``, or not yet when ``qsub -a`` holds the job until after ``now``."""
    if start_time is not None and start_time > now:
        return NotYet(start_time, f"qsub -a: not before {_when(start_time, now)}; then {servable.reason}")
    return servable


def place_all(
    jobs: Sequence[Job],
    groups: NodeGroups,
    site: Site,
    now: float,
    *,
    bindings: Sequence[JobBinding | None] | None = None,
    new_node_name: str | None = None,
) -> list[Placement]:
    """``place`` for each job (``bindings[i]`` goes with ``jobs[i]``), in order.

    Jobs of the same shape (slots, tasks, PE and range, hard requests, binding) get the same
    answer, so each shape is placed once: 50,000 waiting entries are typically a few hundred
    shapes (an array job's task count makes one), and the checks that do not depend on the task
    count (requests, queues, PE, what a node offers) run once per shape of request, put together
    from parts that shapes share (each request, queue list, PE and range, what a node gives),
    each worked out once. What decides of a job's request mappings is worked out once for each
    mapping object where jobs share them (most jobs share the very same ones, as the quick reader
    of qstat makes them), one object for equal answers; a job's shape is then told by the identities of those
    answers and of its binding, and only once per such identity by its contents.
    """
    placements, _ = place_shapes(jobs, groups, site, now, bindings=bindings, new_node_name=new_node_name)
    return placements


class Placements:
    """What the last ``place_shapes`` worked out, for the next: a pass's waiting jobs are mostly
    the last pass's. An answer is a pure function of the shape (slots, tasks, PE and range,
    requests, binding), the groups, the site and the new node's name, but for a ``qsub -a`` time,
    which is weighed against ``now``: the answers are reused only while the groups, the site and
    the name are equal, and never for a binding with a start time. Kept from the last call:

    - by job, each answer with what told it (a ``_Known``): the very job and binding objects of
      the last call (the quick reader's memo hands back the jobs of text read before;
      ``servable`` hands back the same binding for the same queues): found with no look at the
      job at all. The jobs and bindings are kept, so their identities stay theirs;
    - by shape (the mappings' contents): a job of a shape placed before, whatever its objects.

    And the bindings of queue lists (``binding``), for ``servable`` to hand back the same ones."""

    def __init__(self) -> None:
        self.context: tuple[NodeGroups, Site, str | None] | None = None
        self.by_job: dict[int, _Known] = {}
        self.by_shape: dict[tuple[object, ...], Placement] = {}
        self.held: tuple[Sequence[Job], Sequence[JobBinding | None]] = ((), ())
        self.bindings: dict[tuple[str, ...], JobBinding] = {}

    def same(self, groups: NodeGroups, site: Site, new_node_name: str | None) -> bool:
        """Whether the answers kept were given for these groups, site and name."""
        if self.context is None:
            return False
        kept_groups, kept_site, kept_name = self.context
        return (kept_site is site or kept_site == site) and kept_name == new_node_name and kept_groups == groups

    def binding(self, hard_queues: tuple[str, ...]) -> JobBinding:
        """The binding of these queues and no start time: the one handed out before, if any."""
        found = self.bindings.get(hard_queues)
        return found if found is not None else JobBinding(hard_queues)

    def keep_bindings(self, bindings: Iterable[JobBinding]) -> None:
        """Keeps these bindings (those of the last call) to hand out again."""
        self.bindings = {b.hard_queues: b for b in bindings}

    def update(
        self,
        context: tuple[NodeGroups, Site, str | None],
        jobs: Sequence[Job],
        bound: Sequence[JobBinding | None],
        records: Sequence[_Known],
        made: Collection[_Known],
        *,
        shapes: Mapping[tuple[object, ...], Placement] | None = None,
    ) -> None:
        """Keeps this call's answers without a start time (``records[i]`` for ``jobs[i]``,
        bound by ``bound[i]``; ``made``: those not found by job, each once; ``shapes``: their
        answers by shape, when none has a start time, else None). The answers by shape of the
        calls before stay, those of this call added, until they are more than twice this call's
        jobs: then only this call's are kept."""
        if self.context is not context and not self.same(*context):
            self.by_shape = {}
        self.context, self.held = context, (jobs, bound)
        if shapes is not None:  # no record has a start time (those found by job never have)
            self.by_job = dict(zip(map(id, jobs), records, strict=True))
        else:
            self.by_job = dict(compress(zip(map(id, jobs), records, strict=True), map(_TIMELESS, records)))
        if len(self.by_shape) > 2 * len(self.by_job) + _SLACK:
            self.by_shape = {}
            made = dict(zip(map(id, records), records, strict=True)).values()  # jobs of a shape share one
            shapes = None  # those of the jobs found by job are not among them
        if shapes is not None:  # a dict's items, added with the hashes it keeps
            self.by_shape.update(shapes)
        else:  # each shape, a tuple of tuples, hashed again
            fresh = list(compress(made, map(_TIMELESS, made)))
            self.by_shape.update(zip(map(_SHAPE_OF, fresh), map(_PLACEMENT, fresh), strict=True))


# Answers kept by shape beyond twice the last call's jobs, before those of the calls before are dropped.
_SLACK = 1_000


# What told an answer: the shape, the answer, whether it holds at any time (no start time) and
# the binding of the jobs it was given to (the same object for all of them).
_Known = tuple[tuple[object, ...], Placement, bool, JobBinding | object | None]
_SHAPE_OF, _PLACEMENT, _TIMELESS, _BOUND = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)
# A job not found by identity: its binding is no job's.
_MISS: _Known = ((), Unservable(""), False, object())


def place_shapes(
    jobs: Sequence[Job],
    groups: NodeGroups,
    site: Site,
    now: float,
    *,
    bindings: Sequence[JobBinding | None] | None,
    new_node_name: str | None,
    keep: Placements | None = None,
) -> tuple[list[Placement], list[Placement]]:
    """``place_all``, and its distinct answers: the jobs of one shape share one object, so a caller
    can look at a few hundred answers instead of 50,000. ``keep``: what the call before worked
    out (``Placements``), updated with this call's. The jobs and bindings of the call before are
    found by identity, built in C (map, zip); only the others are looked at."""
    _check_waiting(jobs, bindings)
    bound: Sequence[JobBinding | None] = bindings if bindings is not None else [None] * len(jobs)
    context = (groups, site, new_node_name)
    kept = keep if keep is not None and keep.same(*context) else None
    # A job and binding of the call before: its record, its binding the very same object.
    by_job = kept.by_job if kept is not None else {}
    todo: Sequence[int]
    if by_job:
        records = list(map(by_job.get, map(id, jobs), repeat(_MISS)))
        same = map(is_, map(_BOUND, records), bound)
        todo = list(compress(range(len(records)), map(not_, same)))
    else:  # nothing kept (a first call): no job is found, each is looked at
        records, todo = [_MISS] * len(jobs), range(len(jobs))
    shapes = _Shapes(groups, site, now, new_node_name, kept)
    made = shapes.fill(records, todo, jobs, bound, bound=bindings is not None) if todo else []
    placements = list(map(_PLACEMENT, records))
    if keep is not None:
        keep.update(context, tuple(jobs), tuple(bound), records, made, shapes=None if shapes.timed else shapes.by_shape)
    return placements, list(dict(zip(map(id, placements), placements, strict=True)).values())


class _Shapes:
    """The answers of the jobs ``place_shapes`` did not find by identity: each distinct shape
    placed once, or found among the answers kept by its contents."""

    def __init__(
        self, groups: NodeGroups, site: Site, now: float, new_node_name: str | None, kept: Placements | None
    ) -> None:
        self.groups, self.site, self.now, self.new_node_name = groups, site, now, new_node_name
        self.before = kept.by_shape if kept is not None else {}
        self.by_shape: dict[tuple[object, ...], Placement] = {}  # the answers of the records made
        self.timed = False  # whether any of them is of a job with a start time
        self.narrowed = _Memo(groups, site, new_node_name)

    def fill(
        self,
        records: list[_Known],
        todo: Sequence[int],
        jobs: Sequence[Job],
        bindings: Sequence[JobBinding | None],
        *,
        bound: bool,
    ) -> list[_Known]:
        """Sets ``records[n]`` for each ``n`` of ``todo``: jobs of one shape by identity (what
        decides of their request mappings, their binding) share one record, made for the first of
        them. Returns the records made. ``bound``: whether any job may have a binding (else each
        is None)."""
        every = len(todo) == len(records)  # none found by job (the first call, or every job read anew)
        sub_jobs = jobs if every else list(map(jobs.__getitem__, todo))
        sub_bound = bindings if every else list(map(bindings.__getitem__, todo))
        # What decides of each job's request mappings, a scope at a time (once for each mapping
        # object where jobs share them; one object for equal answers).
        decided = self.narrowed.decided
        hard = decided([j.hard_requests for j in sub_jobs], 0)
        master = decided([j.master_requests for j in sub_jobs], 1)
        slave = decided([j.slave_requests for j in sub_jobs], 2)
        # Each job's shape by identity, flat (one tuple a job): its slots, PE and range, the
        # identities of what decides of its mappings (of the master and other tasks' only when
        # some job's differ: mostly none has any) and of its binding if any may have one, and its
        # task count last. (A comprehension reads a job's fields directly: cheaper than one
        # ``attrgetter`` map a field, zipped.)
        scoped = master.count(master[0]) != len(master) or slave.count(slave[0]) != len(slave)
        keys: list[tuple[object, ...]]
        if scoped and bound:
            keys = [
                (j.slots, j.pe, j.pe_range, id(h), id(m), id(s), id(b), j.tasks)
                for j, h, m, s, b in zip(sub_jobs, hard, master, slave, sub_bound, strict=True)
            ]
        elif scoped:
            keys = [
                (j.slots, j.pe, j.pe_range, id(h), id(m), id(s), j.tasks)
                for j, h, m, s in zip(sub_jobs, hard, master, slave, strict=True)
            ]
        elif bound:
            keys = [
                (j.slots, j.pe, j.pe_range, id(h), id(b), j.tasks)
                for j, h, b in zip(sub_jobs, hard, sub_bound, strict=True)
            ]
        else:
            keys = [(j.slots, j.pe, j.pe_range, id(h), j.tasks) for j, h in zip(sub_jobs, hard, strict=True)]
        # Each job's first of its shape by identity, by position (each key hashed once); those
        # firsts by their shape but for the task count (an array job's tasks: thousands of
        # counts of a few shapes).
        first: dict[tuple[object, ...], int] = {}
        at = list(map(first.setdefault, keys, range(len(keys))))
        counted: dict[tuple[object, ...], list[int]] = {}
        for n in first.values():
            counted.setdefault(keys[n][:-1], []).append(n)
        made: dict[int, _Known] = {}
        for ns in counted.values():
            n = ns[0]
            counts = [sub_jobs[i].tasks for i in ns]
            made.update(
                zip(ns, self.records(sub_jobs[n], sub_bound[n], (hard[n], master[n], slave[n]), counts), strict=True)
            )
        if every:
            records[:] = map(made.__getitem__, at)
        else:
            for n, i in zip(todo, at, strict=True):
                records[n] = made[i]
        return list(made.values())

    def records(
        self, job: Job, binding: JobBinding | None, requested: _Requested, counts: Sequence[int]
    ) -> list[_Known]:
        """The answers for ``job`` bound by ``binding``, whose request mappings decide
        ``requested``, with each of ``counts`` (distinct) as its task count, each with what told
        it. A shape not met before in this call is answered as the call before answered it, else
        placed (with what earlier jobs of this call worked out)."""
        timeless = binding is None or binding.start_time is None
        slots, pe, pe_range = job.slots, job.pe, job.pe_range
        bound = (None, None) if binding is None else (binding.hard_queues, binding.start_time)
        shapes = [(slots, tasks, pe, pe_range, *requested, *bound) for tasks in counts]
        by_shape = self.by_shape
        placed = list(map(by_shape.get, shapes))
        missing = [i for i, answer in enumerate(placed) if answer is None]
        if missing:
            if timeless and self.before:
                for i in missing:
                    placed[i] = self.before.get(shapes[i])
                unplaced = [i for i in missing if placed[i] is None]
            else:
                unplaced = missing
            if unplaced:
                answers = self.narrowed.place(
                    job, binding or _UNBOUND, requested, [counts[i] for i in unplaced], self.now
                )
                for i, answer in zip(unplaced, answers, strict=True):
                    placed[i] = answer
                if not timeless:
                    self.timed = True
            by_shape.update((shapes[i], cast(Placement, placed[i])) for i in missing)
        return list(zip(shapes, cast(list[Placement], placed), repeat(timeless), repeat(binding)))


def _check_waiting(jobs: Sequence[Job], bindings: Sequence[JobBinding | None] | None) -> None:
    """``DemandError`` unless every job waits and ``bindings`` (when given) has one for each."""
    if bindings is not None and len(bindings) != len(jobs):
        raise DemandError(f"{len(bindings)} bindings for {len(jobs)} jobs")
    running = next((job for job in jobs if job.queue is not None), None)
    if running is not None:
        raise DemandError(f"job {running.job_id} runs in {running.queue}: only waiting jobs are demand")


_UNBOUND = JobBinding()


_Items = tuple[tuple[str, str], ...]


class _Alike:
    """By complex name, whether every group's node meets any request of the complex, and no
    group reads one: no group offers it, nor does the global host, nor does a group imply it
    (memory, slots): ``_value`` says ``met`` for every group (never for ``qname``, which names a
    queue). Such a request leaves every group in check 4 (``_short_of``), whatever the slots;
    ``_per_node`` reads only offered ones and the FORCED check only offered names."""

    __slots__ = ("by_place", "found", "site")

    def __init__(self, by_place: Sequence[NodeGroup], site: Site) -> None:
        self.by_place, self.site = by_place, site
        self.found: dict[str, bool] = {}

    def of(self, c: Complex) -> bool:
        """Whether requests of ``c`` are met alike (worked out once for each complex)."""
        found = self.found.get(c.name)
        if found is None:
            found = self.found[c.name] = all(_value(g, c, self.site)[1] == "met" for g in self.by_place)
        return found


class _Verdicts(dict[tuple[str, str], _Request | str | None]):
    """The requests of one scope by their name and value, each with its verdict, worked out
    when first looked up (``verdict``), so that a mapping's requests are looked up in one pass
    in C, new ones among them or not. (It holds no memo: the memo holds it.)"""

    __slots__ = ("alike", "met_alike", "new_node_name", "scope", "site")

    def __init__(self, scope: str, site: Site, new_node_name: str | None, alike: _Alike) -> None:
        super().__init__()
        self.scope, self.site, self.new_node_name, self.alike = scope, site, new_node_name, alike
        # By a request's name, its complex once a request of it was found met alike: what
        # decides of such a request but its value (the complex, whether it is requestable, met
        # alike) is known, so a new value of it needs only its type check (``check_value``).
        self.met_alike: dict[str, Complex] = {}

    def __missing__(self, item: tuple[str, str]) -> _Request | str | None:
        found = self[item] = self.verdict(item)
        return found

    def verdict(self, item: tuple[str, str]) -> _Request | str | None:
        """One request resolved (``_request``): the reason it stops the job, None when it drops
        out or every node meets it alike (``_Alike``), else the ``_Request`` (made only then).
        A request of a complex found met alike before is None once its value checks; a value
        that does not is resolved in full, for its reason."""
        c = self.met_alike.get(item[0])
        if c is not None:
            try:
                check_value(c, item[1])
            except ValueError:
                pass
            else:
                return None
        try:
            c = _requested_complex(self.scope, *item, self.site.complexes, self.new_node_name)
        except _Stop as stop:
            return stop.reason
        if c is None:
            return None
        if self.alike.of(c):
            self.met_alike[item[0]] = c
            return None
        return _Request(*item, c, self.scope)


# What decides of one request mapping (``_Memo.decided``): its deciding items, or the reason the
# first request that stops the job gives.
_Decided = _Items | str
_Requested = tuple[_Decided, _Decided, _Decided]  # of a job's hard, master and slave requests


class _ByKept(dict[_Items, _Decided]):
    """What decides of a request mapping of one scope by the requests it keeps (``_Memo.decided``),
    in its order, worked out when first looked up: the reason the first of them by name that
    stops the job gives, else them sorted by name (one object for equal ones: ``same_items``).
    (It holds no memo: the memo holds it.)"""

    __slots__ = ("same_items", "verdicts")

    def __init__(self, verdicts: _Verdicts, same_items: dict[_Items, _Items]) -> None:
        super().__init__({(): ()})
        self.verdicts, self.same_items = verdicts, same_items

    def __missing__(self, kept: _Items) -> _Decided:
        ordered = sorted(kept)
        found: _Decided | None = None
        for item in ordered:
            verdict = self.verdicts[item]
            if isinstance(verdict, str):  # the first that stops the job
                found = verdict
                break
        if found is None:
            deciding = tuple(ordered)
            found = self.same_items.setdefault(deciding, deciding)
        self[kept] = found
        return found


# The mappings ``_Memo.decided`` looks at first, to tell whether jobs share mapping objects.
_SAMPLE = 1_000
_Left = tuple[int, ...]  # groups, by their places in the list
_Ranges = tuple[tuple[int, int], ...]
_SCOPES = ("", "master", "slave")
# What checks 2 and 3 leave: the groups, the PEs, the slot ranges and the fewest slots of them.
_Bound = tuple[_Left, tuple[ParallelEnvironment, ...], _Ranges, int]


@dataclass(frozen=True, slots=True)
class _Candidates:
    """The groups a job's requests, queues and PE leave, each as what its new node gives the job."""

    nodes: tuple[_Node, ...]
    pes: tuple[ParallelEnvironment, ...]
    ranges: _Ranges
    left: tuple[tuple[int, NodeGroup], ...]  # the same groups, with their places in the list
    everyone: tuple[tuple[int, NodeGroup], ...]  # the groups that may have a node


class _Memo:
    """What one placement of many jobs (one site, one set of groups, one new node's name) works
    out, for the jobs after. A job's answer is put together from parts that jobs of other shapes
    share, each worked out once by the functions of the plain checks and kept. ``place`` looks
    them up in the order ``_candidates`` runs the checks, so the first check that leaves no group
    gives the reason, as there; each part is the pure function's answer for the same arguments,
    so a job placed with the memo is placed as without. The parts:

    - ``by_kept``: by the requests a request mapping keeps, in its order, which many mappings
      share, what decides of it (``decided``, once for each shared mapping object): the requests that
      stop the job or that some group's node may not meet or reads (``verdicts``), not the many
      that every node meets alike (a run time, a queue limit, a load value no group declares);
    - ``candidates``: what checks 2 to 4 leave for a shape of request (slots, PE and range, the
      deciding requests, queues; not the task count): a ``_Candidates``, or the reason none is
      left;
    - ``verdicts``: each request, by its scope, name and value, resolved against the complexes
      (``_request``): the reason it stops the job, None when it drops out or every node meets
      it alike (``_Alike``), else its ``_Request``;
    - ``bound``: what a queue list, a PE and a range leave (checks 2 and 3; the slot ranges and
      the fewest slots of them), or the reason;
    - ``shorts``: a request against a group (``_short_of``); ``failing``: by the fewest slots, the
      groups whose node cannot meet a request (None when a group's value cannot be read: the
      requests are then checked as ``_meeting_requests`` does); ``met``: by the fewest slots, the
      requests every group's node meets; ``unmet_reasons``: why none of the groups left meets a
      request; ``unforced``: the FORCED complexes' check on the groups left;
    - ``per_node``: what a group's node gives the requests of complexes it offers (``_per_node``),
      and ``nodes``: one ``_Node`` object for equal ones; ``interned``: one ``_Candidates`` object
      for the same parts (PEs, ranges, nodes), so that ``ways`` (each node's ways for the job's
      tasks, ``_node_ways``) is worked out once for each with the job's slots and range, and
      ``answers`` (``_cheapest``'s answer as a placement without a start time) once with its task
      count too.

    A key that holds an object's identity holds that of an object the memo keeps."""

    def __init__(self, groups: NodeGroups, site: Site, new_node_name: str | None) -> None:
        self.groups, self.site, self.new_node_name = groups, site, new_node_name
        self.by_place = list(groups.groups)
        self.everyone: _Placed = [(i, g) for i, g in enumerate(self.by_place) if groups.max_nodes_of(g) > 0]
        # With no group offering a FORCED complex (the usual site), the second half of check 4
        # leaves every group.
        self.forced = any(_forced_missing(g, site.complexes, set()) for _, g in self.everyone)
        # The complexes each group offers: what its node gives a job depends on those requests.
        self.offers = [sge_options(g).offers for g in self.by_place]
        self.offering = any(self.offers)
        # By scope ("", "master", "slave"), each request by its name and value.
        alike = _Alike(self.by_place, site)
        self.verdicts = tuple(_Verdicts(scope, site, new_node_name, alike) for scope in _SCOPES)
        # One object for equal deciding items, so that ``candidates`` is keyed by identity.
        self.same_items: dict[_Items, _Items] = {(): ()}
        # By scope, what decides of the mappings that keep these requests, in their order
        # (``decided``).
        self.by_kept = tuple(_ByKept(verdicts, self.same_items) for verdicts in self.verdicts)
        self.candidates: dict[tuple[object, ...], _Candidates | str] = {}
        self.bound: dict[tuple[object, ...], _Bound | str] = {}
        self.shorts: dict[tuple[int, str, str, int], tuple[str, str] | None] = {}
        self.failing: dict[int, dict[int, frozenset[int] | None]] = {}
        self.met: dict[int, set[int]] = {}
        self.unmet_reasons: dict[tuple[int, int, _Left], str] = {}
        self.unforced: dict[tuple[_Left, frozenset[str]], _Left | str] = {}
        self.per_node: dict[tuple[object, ...], tuple[int, int, str]] = {}
        self.nodes: dict[tuple[int, int, int, str], _Node] = {}
        self.interned: dict[tuple[object, ...], _Candidates] = {}
        self.ways: dict[tuple[int, int, str | None], tuple[_Ways, ...]] = {}
        self.answers: dict[tuple[int, int, int, str | None], Servable | Unservable] = {}
        self.unservable: dict[str, Unservable] = {}

    def decided(self, mappings: list[Mapping[str, str]], scope: int) -> list[_Decided]:
        """What decides of each of ``mappings`` (of the scope at ``scope`` in ``_SCOPES``), once
        for each mapping object where jobs share them: the reason its first request (by name)
        that stops the job gives, if one does (check 1); else its requests that the other checks
        read, sorted by name. A request that drops out (``slots``, a met ``hostname``) or that every group's node
        meets whatever the job (``_Alike``) changes no answer: left out, the jobs that differ
        only in such requests (a run time, a queue limit) are one shape to checks 2 to 5. Equal
        answers are one object."""
        # The requests a mapping keeps (those whose verdict is not None), in one pass in C (a
        # request not met before resolved on the way: ``_Verdicts``); mappings that keep the same
        # items (in their order) decide the same: most differ only in requests that are not kept.
        keeps, by_kept = self.verdicts[scope].__getitem__, self.by_kept[scope]

        def each(ms: Iterable[Mapping[str, str]]) -> list[_Decided]:
            return list(map(by_kept.__getitem__, [tuple(filter(keeps, m.items())) for m in ms]))

        if not mappings:
            return []
        # All equal (as most jobs' scoped requests: none)? The first and the last compared first:
        # comparing each with the first costs about 0.1 us a mapping.
        one = mappings[0]
        if one == mappings[-1] and mappings.count(one) == len(mappings):
            return [by_kept[tuple(filter(keeps, one.items()))]] * len(mappings)
        # Mostly a mapping object to each job (a queue of many combinations of requests, as the
        # first ones tell): each looked at as it comes; telling them apart by identity would cost
        # more than the few looked at twice.
        sample = mappings[:_SAMPLE]
        if len(set(map(id, sample))) * 3 > len(sample) * 2:
            return each(mappings)
        # Else each mapping object once (the quick reader hands the same one to the entries of
        # the same text; the jobs placed hold them while the memo lives, so an identity stays
        # theirs).
        distinct = dict(zip(map(id, mappings), mappings, strict=True))
        decided = each(distinct.values())
        if len(distinct) == len(mappings):
            return decided
        by_id = dict(zip(distinct, decided, strict=True))
        return list(map(by_id.__getitem__, map(id, mappings)))

    def place(
        self, job: Job, binding: JobBinding, requested: _Requested, counts: Sequence[int], now: float
    ) -> list[Placement]:
        """``_place`` for ``job`` with each of ``counts`` as its task count (the shapes of an array
        job's tasks but for their count), whose requests decide ``requested`` (by ``decided``):
        checks 1 to 4 and each node's ways for the tasks (``_node_ways``, for the job's slots and
        range) looked up once, check 5 weighed for each count."""
        # Check 1: the first request that stops the job, in the order of the scopes.
        hard, master, slave = requested
        if isinstance(hard, str):
            return [self._unservable(hard)] * len(counts)
        if isinstance(master, str):
            return [self._unservable(master)] * len(counts)
        if isinstance(slave, str):
            return [self._unservable(slave)] * len(counts)
        key = (job.slots, job.pe, job.pe_range, id(hard), id(master), id(slave), binding.hard_queues)
        candidates = self.candidates.get(key)
        if candidates is None:
            candidates = self.candidates[key] = self._candidates(job, (hard, master, slave), binding.hard_queues)
        if isinstance(candidates, str):
            return [self._unservable(candidates)] * len(counts)
        ways_key = (id(candidates), job.slots, job.pe_range)
        node_ways = self.ways.get(ways_key)
        if node_ways is None:
            node_ways = self.ways[ways_key] = _node_ways(job, candidates)
        # One node with one way: the only fit, each count answered straight from it.
        only = node_ways[0] if len(node_ways) == 1 else None
        way = only[0] if isinstance(only, tuple) and len(only) == 1 else None
        answers, slots, pe_range = self.answers, job.slots, job.pe_range
        out: list[Placement] = []
        for tasks in counts:
            answer_key = (id(candidates), slots, tasks, pe_range)
            answer = answers.get(answer_key)
            if answer is None:
                if way is not None:
                    answer = answers[answer_key] = _servable_alone(way, tasks)
                else:
                    answer = answers[answer_key] = self._weighed(node_ways, tasks, candidates)
            out.append(answer)
        start = binding.start_time
        if start is None:
            return out
        return [a if a.__class__ is Unservable else _not_before(cast(Servable, a), start, now) for a in out]

    def _weighed(self, node_ways: tuple[_Ways, ...], tasks: int, candidates: _Candidates) -> Servable | Unservable:
        """Check 5 (``_cheapest``) for ``tasks`` tasks, from each candidate node's ways."""
        try:
            fit, considered = _cheapest_of(node_ways, tasks, candidates)
        except _Stop as stop:
            return self._unservable(stop.reason)
        return _servable(fit, considered)

    def _unservable(self, reason: str) -> Unservable:
        found = self.unservable.get(reason)
        if found is None:
            found = self.unservable[reason] = Unservable(reason)
        return found

    def _candidates(
        self, job: Job, deciding: tuple[_Items, _Items, _Items], queues: tuple[str, ...]
    ) -> _Candidates | str:
        """``_candidates`` from the parts kept, for the deciding requests of each scope (none of
        which stops the job): the groups left, or why none is."""
        requests = [
            cast(_Request, verdicts[item])
            for verdicts, items in zip(self.verdicts, deciding, strict=True)
            for item in items
        ]
        if not self.everyone:
            return _NO_NODES
        bound_key = (queues, job.pe, job.pe_range, job.slots)
        bound = self.bound.get(bound_key)
        if bound is None:
            bound = self.bound[bound_key] = self._bound(job, queues)
        if isinstance(bound, str):
            return bound
        left, pes, ranges, least = bound
        met = self.met.get(least)
        if met is None or not met.issuperset(map(id, requests)):
            meeting = self._meeting(requests, least, left)
            if isinstance(meeting, str):
                return meeting
            left = meeting
        if self.forced:
            unforced = self._unforced(left, requests)
            if isinstance(unforced, str):
                return unforced
            left = unforced
        # When no group offers a complex, a group's node gives any requests the same: the groups
        # left tell the nodes.
        nodes = tuple(self._node(i, requests) for i in left) if self.offering else None
        interned_key = (id(pes), id(ranges), left if nodes is None else tuple(map(id, nodes)))
        found = self.interned.get(interned_key)
        if found is None:
            if nodes is None:
                nodes = tuple(self._node(i, requests) for i in left)
            placed = tuple(self._placed(left))
            found = self.interned[interned_key] = _Candidates(nodes, pes, ranges, placed, tuple(self.everyone))
        return found

    def _placed(self, left: _Left) -> _Placed:
        return [(i, self.by_place[i]) for i in left]

    def _bound(self, job: Job, queues: tuple[str, ...]) -> _Bound | str:
        """Checks 2 and 3 and the slot ranges (``_candidates``): the groups left, the PEs, the
        ranges and the fewest slots of them, or the reason."""
        try:
            left = _joining_queues(self.everyone, queues, self.new_node_name)
            pes = _pes(job, self.site)
            left = _serving_pes(left, self.everyone, job, pes)
            ranges = _ranges(job)
        except _Stop as stop:
            return stop.reason
        return tuple(i for i, _ in left), tuple(pes), tuple(ranges), min(lo for lo, _ in ranges)

    def _meeting(self, requests: Sequence[_Request], least: int, start: _Left) -> _Left | str:
        """Check 4 (``_meeting_requests``) on the groups ``start``: those left, or the reason."""
        met = self.met.setdefault(least, set())
        failing_at = self.failing.setdefault(least, {})
        left = start
        for request in requests:
            if id(request) in met:
                continue
            if id(request) not in failing_at:
                failing_at[id(request)] = self._failing(request, least)
            failing = failing_at[id(request)]
            if failing is None:
                try:
                    placed = _meeting_requests(self._placed(start), self.everyone, requests, self.site, least=least)
                except _Stop as stop:
                    return stop.reason
                return tuple(i for i, _ in placed)
            if not failing:
                met.add(id(request))
                continue
            kept = tuple(i for i in left if i not in failing)
            if not kept:
                return self._unmet_reason(request, least, left)
            left = kept
        return left

    def _short(self, index: int, request: _Request, least: int) -> tuple[str, str] | None:
        """``_short_of``, once for each group (by its place), complex, value and least slots."""
        key = (index, request.complex.name, request.value, least)
        if key in self.shorts:
            return self.shorts[key]
        found = self.shorts[key] = _short_of(self.by_place[index], request, self.site, least)
        return found

    def _failing(self, request: _Request, least: int) -> frozenset[int] | None:
        """The groups (of those that may have a node) whose node cannot meet ``request``; None
        when a group's value cannot be read, which ``_meeting_requests`` raises, or not, as the
        groups a job leaves have it or not."""
        try:
            return frozenset(i for i, _ in self.everyone if self._short(i, request, least) is not None)
        except ValueError:  # DemandError, or a value the complex's type does not take
            return None

    def _unmet_reason(self, request: _Request, least: int, left: _Left) -> str:
        """Why none of the groups ``left`` meets ``request`` (``_meeting_requests``)."""
        key = (id(request), least, left)
        found = self.unmet_reasons.get(key)
        if found is None:
            before = self._placed(left)
            shorts = [(g, m) for i, g in before if (m := self._short(i, request, least)) is not None]
            found = self.unmet_reasons[key] = _request_reason(request, shorts, before, self.everyone)
        return found

    def _unforced(self, left: _Left, requests: Sequence[_Request]) -> _Left | str:
        """The FORCED complexes' check (``_unforced``) on the groups ``left``."""
        key = (left, frozenset(r.complex.name for r in requests))
        found = self.unforced.get(key)
        if found is None:
            try:
                placed = _unforced(self._placed(left), self.everyone, requests, self.site)
            except _Stop as stop:
                found = self.unforced[key] = stop.reason
            else:
                found = self.unforced[key] = tuple(i for i, _ in placed)
        return found

    def _node(self, index: int, requests: Sequence[_Request]) -> _Node:
        """What a node of the group at ``index`` gives these requests (``_per_node``): worked out
        once for the requests of complexes it offers (the only ones it reads, as given, with
        their scope), one object for equal answers."""
        offers = self.offers[index]
        if offers:
            key = (index, *((r.given, r.value, r.scope, r.complex.name) for r in requests if r.complex.name in offers))
        else:
            key = (index,)
        found = self.per_node.get(key)
        if found is None:
            found = self.per_node[key] = _per_node(self.by_place[index], requests, self.site)
        node_key = (index, *found)
        node = self.nodes.get(node_key)
        if node is None:
            group = self.by_place[index]
            node = self.nodes[node_key] = _Node(group, index, self.groups.max_nodes_of(group), *found)
        return node


_NO_NODES = "no node group may have a node (max_nodes 0)"


def _candidates(
    job: Job,
    groups: NodeGroups,
    site: Site,
    binding: JobBinding,
    new_node_name: str | None,
) -> _Candidates:
    """Checks 1 to 4 (see the module's docstring): the groups left, each with what its new node
    gives the job (``_per_node``). Depends on the job's slots, PE, range and requests, and on the
    binding's queues; never on its task count."""
    requests = _requests(job, site.complexes, new_node_name)
    everyone = [(i, g) for i, g in enumerate(groups.groups) if groups.max_nodes_of(g) > 0]
    if not everyone:
        raise _Stop(_NO_NODES)
    left = _joining_queues(everyone, binding.hard_queues, new_node_name)
    pes = _pes(job, site)
    left = _serving_pes(left, everyone, job, pes)
    ranges = _ranges(job)
    left = _meeting_requests(left, everyone, requests, site, least=min(lo for lo, _ in ranges))
    left = _unforced(left, everyone, requests, site)
    nodes = []
    for i, g in left:
        cap, task_cap, narrowed = _per_node(g, requests, site)
        nodes.append(_Node(g, i, groups.max_nodes_of(g), cap, task_cap, narrowed))
    return _Candidates(tuple(nodes), tuple(pes), tuple(ranges), tuple(left), tuple(everyone))


_Placed = list[tuple[int, NodeGroup]]  # groups with their places in the list


def _joining_queues(left: _Placed, queues: Sequence[str], new_node_name: str | None) -> _Placed:
    """Check 2: with queues the job is bound to, the groups whose node joins one of them."""
    if not queues:
        return left
    left = [(i, g) for i, g in left if any(_joins(g, q, new_node_name) for q in queues)]
    if not left:
        raise _Stop(f"bound to queue {','.join(queues)}: no node group joins it")
    return left


def _serving_pes(left: _Placed, everyone: _Placed, job: Job, pes: Sequence[ParallelEnvironment]) -> _Placed:
    """Check 3: for a parallel job, the groups that serve one of its PEs."""
    if not pes:
        return left
    before = left
    left = [(i, g) for i, g in left if any(_serves(g, pe.name) for pe in pes)]
    if not left:
        raise _Stop(f"parallel environment {job.pe}: no node group serves it{_among(before, everyone)}")
    return left


def _meeting_requests(
    left: _Placed, everyone: _Placed, requests: Sequence[_Request], site: Site, *, least: int
) -> _Placed:
    """Check 4: the groups whose node meets each request (``least``: the fewest slots the job may
    have on it)."""
    for request in requests:
        before = left
        outcomes = [(i, g, _short_of(g, request, site, least)) for i, g in before]
        left = [(i, g) for i, g, missing in outcomes if missing is None]
        if not left:
            raise _Stop(_request_reason(request, [(g, m) for _, g, m in outcomes if m is not None], before, everyone))
    return left


def _unforced(left: _Placed, everyone: _Placed, requests: Sequence[_Request], site: Site) -> _Placed:
    """Check 4, FORCED complexes: the groups that offer none the job does not request."""
    requested = {r.complex.name for r in requests}
    before = left
    left = [(i, g) for i, g in left if not _forced_missing(g, site.complexes, requested)]
    if not left:
        missing = sorted({n for _, g in before for n in _forced_missing(g, site.complexes, requested)})
        raise _Stop(
            f"does not request {', '.join(missing)}, which every node group left offers as FORCED"
            f"{_among(before, everyone)}"
        )
    return left


def _cheapest(job: Job, candidates: _Candidates) -> tuple[_Fit, int]:
    """Check 5: the slots over each group's nodes; the cheapest group that fits, and how many fit."""
    return _cheapest_of(_node_ways(job, candidates), job.tasks, candidates)


def _node_ways(job: Job, candidates: _Candidates) -> tuple[_Ways, ...]:
    """Each candidate node's ways for the job's tasks (``_ways``), whatever their count."""
    return tuple(_ways(job, node, candidates.pes, candidates.ranges) for node in candidates.nodes)


def _cheapest_of(node_ways: Sequence[_Ways], tasks: int, candidates: _Candidates) -> tuple[_Fit, int]:
    """``_cheapest`` for ``tasks`` tasks, from each candidate node's ways (``_node_ways``)."""
    fits = [_fit(ways, tasks) for ways in node_ways if not isinstance(ways, _Short)]
    if not fits:
        shorts = [ways for ways in node_ways if isinstance(ways, _Short)]
        raise _Stop(_slots_reason(shorts) + _among(candidates.left, candidates.everyone))
    priced = all(f.group.price_per_hour is not None for f in fits)
    best = min(fits, key=lambda f: ((f.group.price_per_hour or 0.0) * f.wanted if priced else 0.0, f.wanted, f.index))
    return best, len(fits)


def _requests(job: Job, complexes: ComplexTable, new_node_name: str | None) -> list[_Request]:
    """The job's hard requests (and Open Cluster Scheduler's scoped ones) resolved against the
    complex table, checked for type; ``slots`` and a met ``hostname`` request dropped."""
    out: list[_Request] = []
    scoped = (("", job.hard_requests), ("master", job.master_requests), ("slave", job.slave_requests))
    for scope, name, value in ((s, n, r[n]) for s, r in scoped for n in sorted(r)):
        request = _request(scope, name, value, complexes, new_node_name)
        if request is not None:
            out.append(request)
    return out


def _request(scope: str, name: str, value: str, complexes: ComplexTable, new_node_name: str | None) -> _Request | None:
    """One request resolved and checked (``_requests``); None for one that drops out."""
    c = _requested_complex(scope, name, value, complexes, new_node_name)
    return _Request(name, value, c, scope) if c is not None else None


def _requested_complex(
    scope: str, name: str, value: str, complexes: ComplexTable, new_node_name: str | None
) -> Complex | None:
    """The complex of one request, the request checked (``_request``); None for one that drops
    out."""
    c = complexes.get(name)
    if c is None:
        raise _Stop(f"requests {_request_text(name, value, scope)}: unknown complex {name} (not in qconf -sc)")
    if c.requestable is Requestable.NO:
        raise _Stop(f"requests {_request_text(name, value, scope)}: {c.name} is not requestable")
    try:
        check_value(c, value)
    except ValueError as err:
        raise _Stop(f"requests {_request_text(name, value, scope)}: {err}") from None
    if c.name == "slots":
        return None
    if c.name == "hostname":
        if new_node_name is None or not satisfies(c, value, new_node_name):
            text = _request_text(name, value, scope)
            raise _Stop(f"bound to host {value} ({text}): new nodes never have that name")
        return None
    return c


def _joins(group: NodeGroup, wanted: str, new_node_name: str | None) -> bool:
    """Whether a node of ``group`` is a queue instance of ``wanted`` (``cq``, ``cq@host``,
    ``cq@@hostgroup``; wildcards in each part)."""
    queue, _, host = wanted.strip().partition("@")
    queue = queue or "*"
    if not any(fnmatchcase(q, queue) for q in sge_options(group).queues):
        return False
    if not host:
        return True
    if host.startswith("@"):
        return fnmatchcase(sge_options(group).hostgroup, host)
    if new_node_name is None:
        return host == "*"
    return fnmatchcase(new_node_name.lower(), host.lower())


def _pes(job: Job, site: Site) -> list[ParallelEnvironment]:
    if job.pe is None:
        return []
    found = [pe for name, pe in sorted(site.pes.items()) if fnmatchcase(name, job.pe)]
    if not found:
        raise _Stop(f"requests parallel environment {job.pe}: no such PE (qconf -spl)")
    return found


def _serves(group: NodeGroup, pe: str) -> bool:
    return any(fnmatchcase(pe, pattern) for pattern in sge_options(group).pes)


def _ranges(job: Job) -> list[tuple[int, int]]:
    """The slot counts a task may get: the PE range (``4``, ``4-8``, ``4-``, ``-8``, ``2,4-6``),
    or its slots."""
    if job.pe is None or not job.pe_range:
        return [(max(1, job.slots), max(1, job.slots))]
    ranges: list[tuple[int, int]] = []
    for part in job.pe_range.split(","):
        lo_text, dash, hi_text = part.strip().partition("-")
        try:
            lo = int(lo_text) if lo_text else 1
            hi = (int(hi_text) if hi_text else RANGE_INFINITY) if dash else lo
        except ValueError:
            raise _Stop(f"PE range {job.pe_range!r} is not like 4, 4-8, 4- or -8") from None
        if lo < 1 or hi < lo:
            raise _Stop(f"PE range {job.pe_range!r} is empty or starts below 1")
        ranges.append((lo, min(hi, RANGE_INFINITY)))
    return ranges


def _value(group: NodeGroup, c: Complex, site: Site) -> tuple[str | None, str]:
    """The value a host of ``group`` offers for ``c`` and where it comes from (``host``,
    ``global``, ``implied``), or None with how it is treated (``met``, ``absent``).

    A load value the group does not declare is ``met``: a new node reports it only once it
    runs, so nothing is known before. Queue attributes and limits are ``met`` too: queues'
    limits are INFINITY unless the site sets them, and groups do not model queue configuration.
    """
    offers = sge_options(group).offers
    if c.name in offers:
        return offers[c.name], "host"
    if c.name in site.global_values:
        return site.global_values[c.name], "global"
    if c.name in ("mem_total", "mem_free") and group.memory is not None:
        return group.memory, "implied"
    if c.name == "num_proc":
        return str(group.slots), "implied"
    if c.name in HOST_LOAD_VALUES or c.name in QUEUE_VALUES:
        return None, "met"
    return None, "absent"


def _short_of(group: NodeGroup, request: _Request, site: Site, least_slots: int) -> tuple[str, str] | None:
    """None when a host of ``group`` can meet the request; else what is offered ("" for nothing)
    and where (``host``, ``global``, ``implied``, ``absent``)."""
    c = request.complex
    if c.name == "qname":
        queues = sge_options(group).queues
        met = any(match_expression(request.value, q) for q in queues)
        return None if met else (",".join(queues), "host")
    offered, source = _value(group, c, site)
    if offered is None:
        return None if source == "met" else ("", source)
    try:
        if c.consumable is not Consumable.NO and c.type.numeric:
            need = parse_number(request.value, c.type)
            if source == "global" and c.consumable is Consumable.YES:
                need *= least_slots
            met = need <= parse_number(offered, c.type)
        else:
            met = satisfies(c, request.value, offered)
    except ValueError as err:
        raise DemandError(f"node group {group.name}: {c.name}={offered!r}: {err}") from None
    return None if met else (offered, source)


def _request_reason(
    request: _Request,
    shorts: Sequence[tuple[NodeGroup, tuple[str, str]]],
    before: Sequence[tuple[int, NodeGroup]],
    everyone: Sequence[tuple[int, NodeGroup]],
) -> str:
    c = request.complex
    head = f"requests {request.text}"
    among = _among(before, everyone)
    if c.name == "qname":
        return f"{head}: no node group joins such a queue{among}"
    if all(source == "absent" for _, (_, source) in shorts):
        return f"{head}: no node group offers {c.name}{among}"
    less = c.type.numeric and c.relop in (Relop.LE, Relop.LT)
    if all(source == "global" for _, (_, source) in shorts):
        offered = shorts[0][1][0]
        if less:
            return f"{head}: more than the global host offers ({offered})"
        return f"{head}: the global host's value {offered} does not match"
    offers = ", ".join(f"{g.name}: {offered or 'none'}" for g, (offered, _) in shorts)
    if less:
        return f"{head}: more than any node group offers ({offers}){among}"
    return f"{head}: no node group offers a match ({offers}){among}"


def _forced_missing(group: NodeGroup, complexes: ComplexTable, requested: set[str]) -> list[str]:
    out = []
    for name in sge_options(group).offers:
        c = complexes.get(name)
        if c is not None and c.requestable is Requestable.FORCED and c.name not in requested:
            out.append(c.name)
    return out


def _among(narrowed: Sequence[tuple[int, NodeGroup]], everyone: Sequence[tuple[int, NodeGroup]]) -> str:
    if len(narrowed) == len(everyone):
        return ""
    return f" (of the groups the other checks leave: {', '.join(g.name for _, g in narrowed) or 'none'})"


# -- slots over nodes ---------------------------------------------------------------------------


def _per_node(group: NodeGroup, requests: Sequence[_Request], site: Site) -> tuple[int, int, str]:
    """Slots a node of ``group`` gives one job of these requests, tasks of it one node takes
    (``RANGE_INFINITY``: no limit but slots), and why slots are fewer than the node's."""
    cap, tasks, why = group.slots, RANGE_INFINITY, []
    for c, value, text in _debits(group, requests, site):
        offered = sge_options(group).offers[c.name]
        if c.relop is Relop.EXCL or c.type is ComplexType.BOOL:
            if parse_bool(value):
                tasks = 1
            continue
        fit = _how_many_fit(group, c, (value, text), offered)
        if fit is None:
            continue
        if c.consumable is Consumable.JOB:
            tasks = min(tasks, fit)
            if fit == 0:  # only a default can be more than the node has: requests were checked
                cap = 0
                why.append(f"{text} per job, {offered} per node")
        elif fit < cap:
            cap = fit
            why.append(f"{text} per slot, {offered} per node")
    return cap, tasks, f" ({'; '.join(why)})" if why else ""


def _debits(group: NodeGroup, requests: Sequence[_Request], site: Site) -> list[tuple[Complex, str, str]]:
    """The consumables of ``group``'s node a slot (or the job) of these requests debits: each as
    its complex, the value debited, and how to say it."""
    requested = {r.complex.name for r in requests}
    offers = sge_options(group).offers
    # A master task's request is needed once, on one host (checked in _short_of), not per slot.
    per_slot: list[tuple[Complex, str, str]] = [
        (r.complex, r.value, r.text) for r in requests if r.complex.name in offers and r.scope != "master"
    ]
    # A consumable the job does not request is debited at its default (when not zero).
    for name in offers:
        c = site.complexes.get(name)
        if c is not None and c.consumable is not Consumable.NO and c.name not in requested and c.type.numeric:
            per_slot.append((c, c.default, f"{c.name}={c.default} (default)"))
    return [d for d in per_slot if d[0].consumable is not Consumable.NO]


def _how_many_fit(group: NodeGroup, c: Complex, debit: tuple[str, str], offered: str) -> int | None:
    """How many debits of ``debit`` (its value, and how to say it) the node's ``offered`` amount
    of ``c`` holds; None for no limit (nothing debited, or an unlimited amount)."""
    value, text = debit
    try:
        need, has = parse_number(value, c.type), parse_number(offered, c.type)
    except ValueError as err:
        raise DemandError(f"node group {group.name}: {text} against {c.name}={offered}: {err}") from None
    if need <= 0 or math.isinf(has):
        return None
    return math.floor(has / need + 1e-9) if not math.isinf(need) else 0


def _smallest(ranges: Iterable[tuple[int, int]], step: int, limit: int) -> int | None:
    found = [m for lo, hi in ranges if (m := -(-lo // step) * step) <= min(hi, limit)]
    return min(found) if found else None


def _largest(ranges: Iterable[tuple[int, int]], step: int, limit: int) -> int | None:
    found = [m for lo, hi in ranges if (m := min(hi, limit) // step * step) >= lo and m > 0]
    return max(found) if found else None


def _ways(job: Job, node: _Node, pes: Sequence[ParallelEnvironment], ranges: Sequence[tuple[int, int]]) -> _Ways:
    """How each task of ``job`` can take new nodes like ``node``: one way for each of its PEs the
    group serves that fits, or why none does. Reads the job's slots and range, never its task
    count (``_fit`` weighs that)."""
    if not pes:
        slots = max(1, job.slots)
        if slots > node.cap:
            return _short(node, "host", _plural(slots, "slot"), node.cap)
        return (_Way(node, slots, 1, None, _plural(slots, "slot")),)
    shorts: list[_Short] = []
    ways: list[_Way] = []
    for pe in pes:
        if _serves(node.group, pe.name):
            outcome = _way_pe(job, node, pe, ranges)
            if isinstance(outcome, _Way):
                ways.append(outcome)
            else:
                shorts.append(outcome)
    if ways:
        return tuple(ways)
    return shorts[0]


def _short(node: _Node, kind: str, head: str, limit: int) -> _Short:
    return _Short(kind, head, limit, node.group.name, node.max_nodes, node.narrowed)


def _way_pe(job: Job, node: _Node, pe: ParallelEnvironment, ranges: Sequence[tuple[int, int]]) -> _Way | _Short:
    rule, cap = pe.allocation_rule, node.cap
    wanted = job.pe_range or str(job.slots)
    if rule.spread is Spread.PE_SLOTS:
        head = f"{wanted} slots in PE {pe.name} ($pe_slots: one host)"
        step, total_limit = 1, min(cap, pe.slots)
    elif rule.spread is Spread.FIXED:
        step = rule.per_host or 1
        head = f"{wanted} slots in PE {pe.name} ({_rule(pe)})"
        if step > cap:
            return _short(node, "host", head, cap)
        total_limit = min(pe.slots, step * node.max_nodes)
    else:
        head = f"{wanted} slots in PE {pe.name} ({_rule(pe)})"
        step, total_limit = 1, min(pe.slots, cap * node.max_nodes)
    if _smallest(ranges, step, pe.slots) is None:
        if step > 1 and _smallest(ranges, 1, pe.slots) is not None:
            return _short(node, "multiple", head, step)
        return _short(node, "pe_slots", head, pe.slots)
    chosen = _largest(ranges, step, total_limit)
    if chosen is None:
        if rule.spread is Spread.PE_SLOTS:
            return _short(node, "host", head, cap)
        return _short(node, "max_nodes", head, total_limit)
    if rule.spread is Spread.FIXED:
        nodes_per_task, on_node = chosen // step, step
    else:
        nodes_per_task, on_node = -(-chosen // cap), min(chosen, cap)
    return _Way(node, on_node, nodes_per_task, pe.slots // chosen, f"{chosen} slots in PE {pe.name} ({_rule(pe)})")


def _fit(ways: tuple[_Way, ...], tasks: int) -> _Fit:
    """The way ``tasks`` tasks want the fewest nodes (then fewest nodes at once)."""
    fits = [_spread(way, tasks) for way in ways]
    return fits[0] if len(fits) == 1 else min(fits, key=_FEWEST)


def _spread(way: _Way, tasks: int) -> _Fit:
    """Nodes for the tasks that run at once, each taking ``on_node`` slots on ``nodes_per_task``
    nodes."""
    node = way.node
    return _FIT(node.group, node.index, *_spread_counts(way, tasks), tasks, way.what)


def _servable_alone(way: _Way, tasks: int) -> Servable:
    """``_servable(*_cheapest_of(((way,),), tasks, ...))``: the answer when ``way`` is the only
    way of the only candidate node, without the fit between."""
    nodes, _, slots_per_node = _spread_counts(way, tasks)
    return _SERVABLE(way.node.group, nodes, slots_per_node, tasks, way.what, 1)


def _spread_counts(way: _Way, tasks: int) -> tuple[int, int, int]:
    """``_spread``'s nodes at once, nodes wanted and slots per node."""
    node, on_node, nodes_per_task = way.node, way.on_node, way.nodes_per_task
    at_once = tasks if way.most is None else min(tasks, way.most)
    if nodes_per_task == 1:
        per_node = max(1, min(node.cap // on_node, node.task_cap))
        wanted = -(-at_once // per_node)
        nodes = min(wanted, node.max_nodes)
        slots_per_node = min(at_once, per_node) * on_node
    else:
        wanted = at_once * nodes_per_task
        nodes = min(at_once, node.max_nodes // nodes_per_task) * nodes_per_task
        slots_per_node = on_node
    return nodes, wanted, slots_per_node


_FEWEST = attrgetter("wanted", "nodes")
_FIT, _SERVABLE = maker(_Fit), maker(Servable)


def _slots_reason(shorts: Sequence[_Short]) -> str:
    first = shorts[0]
    if any(s.kind != first.kind or s.head != first.head for s in shorts):
        return "; ".join(f"group {s.group}: {_slots_reason([s])}" for s in shorts)
    narrowed = next((s.narrowed for s in shorts if s.narrowed), "")
    single = len(shorts) == 1
    if first.kind == "host":
        where = f"group {first.group}'s node" if single else "any group's node"
        return f"{first.head}: more than the {max(s.limit for s in shorts)} slots of {where}{narrowed}"
    if first.kind == "max_nodes":
        if single:
            return (
                f"{first.head}: more than the {first.limit} slots of group {first.group} at max_nodes {first.max_nodes}"
            )
        each = ", ".join(f"{s.group}: {s.limit} at {s.max_nodes}" for s in shorts)
        return f"{first.head}: more than any group gives at its max_nodes ({each})"
    if first.kind == "multiple":
        return f"{first.head}: no slot count in the range is a multiple of {first.limit}"
    return f"{first.head}: more than the {first.limit} slots of the PE"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _rule(pe: ParallelEnvironment) -> str:
    rule = pe.allocation_rule
    return f"{rule.per_host} per host" if rule.spread is Spread.FIXED else str(rule)


def _when(start: float, now: float) -> str:
    stamp = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    minutes = math.ceil((start - now) / 60)
    hours, minutes = divmod(minutes, 60)
    return f"{stamp} (in {hours}h{minutes:02d}m)" if hours else f"{stamp} (in {minutes}m)"


# -- checking groups against the site -----------------------------------------------------------


def check_offers(groups: NodeGroups, site: Site) -> None:
    """Refuse groups whose ``offers`` the site cannot mean: an unknown complex, a shortcut instead
    of the name, a value not of the complex's type, or what a group models itself (``hostname``,
    ``qname``: its nodes and ``queues``). Raises ``DemandError`` naming the group and the key."""
    for g in groups.groups:
        for key, value in sge_options(g).offers.items():
            where = f"node group {g.name}: offers {key}={value}"
            c = site.complexes.get(key)
            if c is None:
                raise DemandError(f"{where}: no such complex (qconf -sc)")
            if c.name != key:
                raise DemandError(f"{where}: {key} is the shortcut of {c.name}; write the name")
            if c.name in ("hostname", "qname"):
                raise DemandError(f"{where}: set by SGE from the node's name and queues, not offered")
            try:
                check_value(c, value)
            except ValueError as err:
                raise DemandError(f"{where}: {err}") from None


__all__: Sequence[str] = (
    "HOST_LOAD_VALUES",
    "QUEUE_VALUES",
    "RANGE_INFINITY",
    "DemandError",
    "JobBinding",
    "NotYet",
    "Placement",
    "Placements",
    "Servable",
    "Site",
    "Unservable",
    "check_offers",
    "place",
    "place_all",
    "place_shapes",
)
