"""Who spent it: every billed node-second of elb's nodes, attributed to the jobs that ran on the
node, and the rest to the cost of elasticity. Pure: the nodes' stretches (``elb.core.spend.Life``,
``Stopped``) and the jobs' uses of nodes (``JobUse``, from the scheduler's accounting:
each driver's ``usage``) go in, the parts come out.

The rule, for each second EC2 bills of a node (its billed stretch, ``elb.core.spend.billed_span``,
within the window asked for): the jobs running on it then share it in proportion to their slots,
each taking ``slots / node's slots`` of it (the node's slots, or the jobs' together when they
hold more or the node's are not known); what no job holds goes to what the node was doing:
``booting`` (launch to ready, and a restart from a warm pool), ``idle`` (ready: with no job, or
the slots no job holds) or ``draining`` (draining, deregistering, stopping, and the time EC2
bills after the instance ended: its 60 s minimum or the rest of a started hour). A warm pool's
stopped nodes cost their volumes (``volumes``: money, no node-second). Every part is a share of a
billed second, so the parts add up to the bill: ``Attribution.billed`` is that bill, computed
apart (``elb.core.spend.billed_in``), and the sum of the parts equals it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from elb.core.spend import Activity, Billing, Life, Stopped, Window, billed_in, billed_span

By = Literal["user", "project", "queue", "group"]
BY: tuple[By, ...] = ("user", "project", "queue", "group")
Kind = Literal["jobs", "booting", "idle", "draining", "volumes"]
ELASTICITY: tuple[Kind, ...] = ("booting", "idle", "draining", "volumes")
UNKNOWN = "(unknown)"  # a job whose accounting does not say (no project, say)


class UsageError(Exception):
    """The scheduler's accounting cannot be read: one line saying why."""


@dataclass(frozen=True, slots=True)
class JobUse:
    """A job (an array task, or a parallel job's part) on one node, as the scheduler's accounting
    records it: from its start to its end, holding ``slots`` there."""

    job: str
    host: str
    start: float
    end: float
    slots: float
    user: str = ""
    project: str = ""
    queue: str = ""
    master_only: bool = False  # a parallel job's slots all on its master's host: where else, unknown
    placed: bool = False  # the host and slots are where elb's reads saw the job (``placed``)


@dataclass(frozen=True, slots=True)
class Part:
    """One line of the attribution: the jobs of one user (project, queue, group), or a kind of
    elasticity (of one group when attributing by group), with its billed node-seconds and money."""

    key: str  # the user, project, queue or group; "" for elasticity not by group
    kind: Kind
    node_seconds: float
    money: float
    jobs: int = 0  # jobs with a share in it

    @property
    def node_hours(self) -> float:
        return self.node_seconds / 3600.0


@dataclass(frozen=True, slots=True)
class Attribution:
    """The parts of the bill of elb's nodes in [since, until), and the bill itself."""

    by: By
    since: float
    until: float
    parts: tuple[Part, ...]
    billed: Window
    unmatched: int = 0  # job uses on no billed node of elb's in the window (other hosts)
    priced: bool = True  # every node has a price (else money is 0 and only node-hours count)
    master_only: int = 0  # parallel jobs charged to their master's host alone, with more slots than it has
    placed: int = 0  # parallel jobs spread over their hosts as elb's reads saw them (``placed``)

    @property
    def jobs(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.kind == "jobs")

    @property
    def elasticity(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.kind != "jobs")

    @property
    def node_seconds(self) -> float:
        return sum(p.node_seconds for p in self.parts)

    @property
    def money(self) -> float:
        return sum(p.money for p in self.parts)

    def as_json(self) -> dict[str, object]:
        return {
            "by": self.by,
            "since": self.since,
            "until": self.until,
            "priced": self.priced,
            "parts": [
                {
                    "key": p.key,
                    "kind": p.kind,
                    "jobs": p.jobs,
                    "node_hours": p.node_hours,
                    "dollars": p.money if self.priced else None,
                }
                for p in self.parts
            ],
            "total": {"node_hours": self.node_seconds / 3600.0, "dollars": self.money if self.priced else None},
            "billed": {
                "node_hours": self.billed.node_seconds / 3600.0,
                "dollars": self.billed.money + self.billed.volume_money if self.priced else None,
                "volume_dollars": self.billed.volume_money if self.priced else None,
                "stretches": self.billed.lives,
            },
            "unmatched_job_records": self.unmatched,
            "parallel_jobs_on_master_host_only": self.master_only,
            "parallel_jobs_placed_by_elbs_reads": self.placed,
        }


def key_of(use: JobUse, by: By, group: str) -> str:
    if by == "group":
        return group
    value = use.user if by == "user" else use.project if by == "project" else use.queue
    return value or UNKNOWN


@dataclass(slots=True)
class _Sums:
    seconds: dict[tuple[str, Kind], float] = field(default_factory=dict)
    money: dict[tuple[str, Kind], float] = field(default_factory=dict)
    jobs: dict[tuple[str, Kind], set[str]] = field(default_factory=dict)

    def add(self, key: tuple[str, Kind], seconds: float, price: float, job: str | None = None) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        self.money[key] = self.money.get(key, 0.0) + seconds * price / 3600.0
        if job is not None:
            self.jobs.setdefault(key, set()).add(job)


def attribute(
    found: tuple[Sequence[Life], Sequence[Stopped]],
    uses: Iterable[JobUse],
    *,
    by: By,
    since: float,
    until: float,
    billing: Billing,
    period: float = 3600.0,
) -> Attribution:
    """Every billed node-second of ``found``'s stretches in [since, until), attributed."""
    lives, stopped = found
    sizes = _node_sizes(lives)
    on: dict[str, list[JobUse]] = {}
    for u in fit_to_nodes(uses, sizes):
        on.setdefault(_short(u.host), []).append(u)
    sums = _Sums()
    matched = _sum_lives(lives, on, (since, until), by=by, sums=sums, billed=(billing, period))
    _sum_stopped(stopped, (since, until), by, sums)
    unmatched = sum(1 for us in on.values() for u in us if id(u) not in matched and u.end > since and u.start < until)
    return Attribution(
        by,
        since,
        until,
        _parts(sums),
        billed_in(found, since, until, billing, period),
        unmatched,
        all(life.price_per_hour is not None for life in lives),
        _master_only(on, matched, sizes),
        len({u.job for us in on.values() for u in us if u.placed and id(u) in matched}),
    )


def _node_sizes(lives: Sequence[Life]) -> dict[str, int]:
    """Each node's slots, the most any of its lives had (a life of unknown slots left out)."""
    sizes: dict[str, int] = {}
    for life in lives:
        if life.slots:
            sizes[life.node] = max(sizes.get(life.node, 0), life.slots)
    return sizes


def _sum_lives(
    lives: Sequence[Life],
    on: Mapping[str, Sequence[JobUse]],
    window: tuple[float, float],
    *,
    by: By,
    sums: _Sums,
    billed: tuple[Billing, float],
) -> set[int]:
    """Each life's billed seconds in ``window`` into ``sums``, shared among the jobs on its node;
    the ids of the uses matched to a life."""
    since, until = window
    billing, period = billed
    matched: set[int] = set()
    for life in lives:
        a, b = billed_span(life, until, billing, period)
        lo, hi = max(a, since), min(b, until)
        if hi <= lo:
            continue
        mine = [u for u in on.get(life.node, ()) if u.end > lo and u.start < hi]
        matched.update(id(u) for u in mine)
        _one_life(life, mine, (lo, hi), by, sums)
    return matched


def _sum_stopped(stopped: Sequence[Stopped], window: tuple[float, float], by: By, sums: _Sums) -> None:
    """The stopped nodes' volumes in ``window`` into ``sums`` (money, no node-seconds)."""
    since, until = window
    for p in stopped:
        end = until if p.end is None else min(p.end, until)
        seconds = max(0.0, min(end, until) - max(p.start, since))
        if seconds > 0:
            key: tuple[str, Kind] = (p.group if by == "group" else "", "volumes")
            sums.money[key] = sums.money.get(key, 0.0) + seconds * p.price_per_hour / 3600.0
            sums.seconds.setdefault(key, 0.0)


def _parts(sums: _Sums) -> tuple[Part, ...]:
    """The sums as parts: jobs first, then the elasticity kinds; within a kind the dearest first."""
    parts = [
        Part(
            key, kind, sums.seconds[(key, kind)], sums.money.get((key, kind), 0.0), len(sums.jobs.get((key, kind), ()))
        )
        for key, kind in sums.seconds
    ]
    order = {k: i for i, k in enumerate(("jobs", *ELASTICITY))}
    parts.sort(key=lambda p: (order[p.kind], -p.money, -p.node_seconds, p.key))
    return tuple(parts)


def _master_only(on: Mapping[str, Sequence[JobUse]], matched: set[int], sizes: Mapping[str, int]) -> int:
    """How many matched jobs the accounting charged to their master's host alone with more slots
    than the host has."""
    return len(
        {
            u.job
            for host, us in on.items()
            for u in us
            if u.master_only and id(u) in matched and u.slots > sizes.get(host, u.slots)
        }
    )


class RunningJob(Protocol):
    """What ``spanning_jobs`` reads of a job a scheduler's read shows running."""

    @property
    def job_id(self) -> int: ...
    @property
    def task_ids(self) -> str | None: ...
    @property
    def slots(self) -> int: ...
    @property
    def host(self) -> str | None: ...


def spanning_jobs(jobs: Iterable[RunningJob]) -> dict[str, dict[str, int]]:
    """The running jobs (array tasks) one read shows on more than one host, each with its slots on
    each host, keyed as the accounting keys a job (``123``, or ``123.4`` for an array task). A job
    on one host is left out: its accounting line says where it ran."""
    seen: dict[str, dict[str, int]] = {}
    for j in jobs:
        host = j.host
        if host is None:
            continue
        key = f"{j.job_id}.{j.task_ids}" if j.task_ids else str(j.job_id)
        on = seen.setdefault(key, {})
        on[host] = on.get(host, 0) + j.slots
    return {k: v for k, v in seen.items() if len(v) > 1}


@dataclass(frozen=True, slots=True)
class SeenOn:
    """A stretch of passes whose reads saw a job on a host, holding ``slots`` there."""

    host: str
    slots: int
    first: float
    last: float


def placed(uses: Iterable[JobUse], seen: Mapping[str, Sequence[SeenOn]]) -> list[JobUse]:
    """``uses`` with each parallel job the accounting charged to its master's host alone
    (``master_only``) spread over the hosts elb's reads saw it on during its run (``seen``: by
    job, the stretches of ``spanning_jobs`` over the passes): its slots shared out in proportion
    to the most the reads saw on each host, over the accounting's start and end. Any other use,
    and a job the reads never saw on several hosts during its run, is kept as it is."""
    out: list[JobUse] = []
    for u in uses:
        hosts: dict[str, int] = {}
        for s in seen.get(u.job, ()) if u.master_only else ():
            if s.first <= u.end and s.last >= u.start:
                hosts[s.host] = max(hosts.get(s.host, 0), s.slots)
        total = sum(hosts.values())
        if len(hosts) < 2 or total <= 0:
            out.append(u)
            continue
        out.extend(
            replace(u, host=host, slots=u.slots * slots / total, master_only=False, placed=True)
            for host, slots in hosts.items()
        )
    return out


def _short(host: str) -> str:
    return host.split(".", 1)[0]


def fit_to_nodes(uses: Iterable[JobUse], sizes: Mapping[str, int]) -> list[JobUse]:
    """``uses`` with a job's slots on a node cut to the node's slots (``sizes``, by node name) and
    the rest given to the job's other hosts over the same run, up to their slots, in order: a
    parallel job's accounting may put more of its slots on a host than the host has (Grid
    Engine's master line holds all the job's slots, and Open MPI starts one task per other host,
    which counts one slot there). What no other host has room for stays where it was."""
    out = list(uses)
    runs: dict[tuple[str, float, float], list[int]] = {}
    for i, u in enumerate(out):
        runs.setdefault((u.job, u.start, u.end), []).append(i)
    for idx in runs.values():
        if len(idx) >= 2:
            _refit_run(out, idx, sizes)
    return out


def _refit_run(out: list[JobUse], idx: Sequence[int], sizes: Mapping[str, int]) -> None:
    """One run's uses (``idx`` into ``out``) refitted in place: each cut to its node's slots and
    the excess given to the others with room, in order; what finds no room goes back on the first
    host that had too much."""
    cap = {i: float(sizes.get(_short(out[i].host), 0)) for i in idx}
    slots = {i: out[i].slots for i in idx}
    excess = sum(max(0.0, slots[i] - cap[i]) for i in idx if cap[i])
    if excess <= 0:
        return
    for i in idx:
        if cap[i] and slots[i] > cap[i]:
            slots[i] = cap[i]
    for i in idx:
        room = cap[i] - slots[i] if cap[i] else 0.0
        if room > 0 and excess > 0:
            slots[i] += min(room, excess)
            excess -= min(room, excess)
    if excess > 0:  # nowhere to put it: back on the first host that had too much
        first = next(i for i in idx if cap[i] and out[i].slots > cap[i])
        slots[first] += excess
    for i in idx:
        out[i] = replace(out[i], slots=slots[i])


def _one_life(life: Life, uses: Sequence[JobUse], window: tuple[float, float], by: By, sums: _Sums) -> None:
    """One stretch's billed seconds in ``window`` into ``sums``: a sweep over its jobs' starts
    and ends and its activity's changes."""
    lo, hi = window
    uses = [u for u in uses if min(u.end, hi) > max(u.start, lo)]
    points: list[tuple[float, int, int]] = []  # (time, 0: an end / 1: a start, use index)
    for i, u in enumerate(uses):
        points.append((max(u.start, lo), 1, i))
        points.append((min(u.end, hi), 0, i))
    cuts = _cuts(life, points, window)
    points.sort()
    active: dict[int, JobUse] = {}
    k = 0
    for t0, t1 in itertools.pairwise(cuts):
        while k < len(points) and points[k][0] <= t0:
            _, starts, i = points[k]
            if starts:
                active[i] = uses[i]
            else:
                active.pop(i, None)
            k += 1
        if t1 - t0 > 0:
            _one_stretch(life, active.values(), (t0, t1), by, sums)


def _cuts(life: Life, points: Sequence[tuple[float, int, int]], window: tuple[float, float]) -> list[float]:
    """The times in ``window`` where what a life does or holds changes: the window's ends, its
    activity's changes, its jobs' starts and ends, and its instance's end."""
    lo, hi = window
    cuts = sorted({lo, hi, *(t for t, _ in life.activity if lo < t < hi)} | {p[0] for p in points})
    if life.end is not None and lo < life.end < hi:
        cuts = sorted({*cuts, life.end})
    return cuts


def _one_stretch(life: Life, active: Iterable[JobUse], span: tuple[float, float], by: By, sums: _Sums) -> None:
    """One span between two cuts into ``sums``: each job on the node its share by slots, the
    rest spare, counted as what the node was doing."""
    t0, t1 = span
    dt = t1 - t0
    price = life.price_per_hour or 0.0
    on = list(active)
    held = sum(u.slots for u in on)
    size = max(float(life.slots or 0), held)
    for u in on:
        share = dt * u.slots / size
        sums.add((key_of(u, by, life.group), "jobs"), share, price, u.job)
    spare = dt - (dt * held / size if size > 0 else 0.0)
    if spare > 0:
        sums.add((life.group if by == "group" else "", _doing(life, t0)), spare, price)


def _doing(life: Life, t: float) -> Activity:
    """What the node was doing at ``t``: its activity then; after its instance ended (billed
    still: the minimum, the started hour), draining."""
    if life.end is not None and t >= life.end:
        return "draining"
    doing: Activity = "booting"
    for since, activity in life.activity:
        if since > t:
            break
        doing = activity
    return doing


__all__: Sequence[str] = (
    "BY",
    "ELASTICITY",
    "Attribution",
    "By",
    "JobUse",
    "Kind",
    "Part",
    "attribute",
    "fit_to_nodes",
    "key_of",
)
