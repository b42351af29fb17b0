"""Which waiting jobs are demand for new nodes: the pass's filter before the policy plans.

A waiting job that no node elb can launch could ever run (a queue elb's nodes do not join, a
complex they do not offer, a host that is not one of them, a ``$pe_slots`` job wider than a
node, more slots than ``max_nodes`` nodes hold) is never demand: a node launched for it would
stay idle and billed. A job held by ``qsub -a`` until later is not demand before then, nor is a
job whose ``qsub -a`` time could not be read this pass (``qstat -j`` failed: ``unread``). The
policy plans on the snapshot without these jobs; each is reported with a one-line reason (log,
``status``, the dry run, ``elb jobs``, the ``elb_unservable_jobs`` metric).

The matching is ``elb.schedulers.sge.demand.place`` against the site's configuration (``qconf -sc``, the PEs,
the global host's values: ``elb.schedulers.sge.site``, read through ``SiteCache``) and the node groups
(``Config.groups``: ``node_groups``, or the one group elb's settings describe). Each job that is
demand goes to one group (``DemandSplit.group_of``), which the policy per group plans for
(``elb.core.policy.grouped``). Pure but for ``SiteCache``, which reads through the SGE seam: ``now``
is passed in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from types import MappingProxyType
from typing import Protocol

from elb.core.config import Config
from elb.core.demand import DemandSplit, NotDemand
from elb.core.frozen import maker
from elb.core.gcpause import paused
from elb.core.groups import NodeGroups
from elb.core.model import Job, JobPhase, Node, Snapshot
from elb.core.policy.view import infer_slots_per_node, new_names
from elb.schedulers.sge.demand import (
    DemandError,
    JobBinding,
    NotYet,
    Placement,
    Placements,
    Servable,
    Site,
    check_offers,
    place_shapes,
)

_NONE: Mapping[int, float] = MappingProxyType({})
_NO_REASONS: Mapping[int, str] = MappingProxyType({})
UNREAD = "its details could not be read: "  # the reason of a job whose qstat -j failed, before why


# How long a read of the site's configuration (qconf -sc, the PEs, the global host) is reused:
# it changes when an admin edits it, not from pass to pass, and reading it is 3 + one per PE
# qconf calls.
SITE_TTL = 300.0


class SiteReader(Protocol):
    def read_site(self) -> Site: ...


class SiteCache:
    """The site's configuration, read at most once every ``ttl`` seconds of the master's clock
    (again at once if the clock goes back). A failed read raises and forgets nothing: the
    caller launches nothing on it."""

    def __init__(self, ttl: float = SITE_TTL) -> None:
        self.ttl = ttl
        self._site: Site | None = None
        self._read_at = 0.0

    def get(self, reader: SiteReader, now: float) -> Site:
        if self._site is not None and 0 <= now - self._read_at < self.ttl:
            return self._site
        site = reader.read_site()
        self._site, self._read_at = site, now
        return site


def node_groups(config: Config, slots_per_node: int) -> NodeGroups:
    """The node groups of the config (``node_groups``, or the one group its settings describe,
    with ``slots_per_node`` slots a node)."""
    return config.groups(slots_per_node)


def demand_of(
    snapshot: Snapshot,
    nodes: Sequence[Node],
    config: Config,
    site: Site,
    node_slots: int | None,
    *,
    start_times: Mapping[int, float] = _NONE,
    unread: Mapping[int, str] = _NO_REASONS,
    keep: Placements | None = None,
) -> DemandSplit:
    """``split_demand`` for elb's node group: a new node has ``node_slots`` (None: the workers'
    most common size, as the policy infers it) and gets the next free name."""
    cluster = config.cluster
    workers = [h for h in snapshot.hosts if h.name != cluster.master]
    alive = [n for n in nodes if n.state.alive and n.name != cluster.master]
    slots = infer_slots_per_node(workers, alive, node_slots)
    name = new_names(snapshot.hosts, nodes, 1, cluster.node_prefix, cluster.node_digits)[0]
    groups = node_groups(config, slots)
    return split_demand(snapshot, groups, site, new_node_name=name, start_times=start_times, unread=unread, keep=keep)


def split_demand(
    snapshot: Snapshot,
    groups: NodeGroups,
    site: Site,
    *,
    new_node_name: str | None = None,
    start_times: Mapping[int, float] = _NONE,
    unread: Mapping[int, str] = _NO_REASONS,
    keep: Placements | None = None,
) -> DemandSplit:
    """The snapshot's eligible waiting jobs split into demand and the rest (``NotDemand``).
    ``start_times``: the ``qsub -a`` times known, by job number (``elb.schedulers.sge.starttimes``);
    ``unread``: the jobs whose ``qsub -a`` time could not be read this pass, with why: a fact that
    can only take a job out of the demand, unknown, so each is not demand (``held``) this pass;
    ``keep``: each shape's answer from the split before (``elb.schedulers.sge.demand.Placements``)."""
    pending = list(snapshot.pending)
    if not pending:
        return DemandSplit(snapshot)
    # The split and what ``keep`` holds live until the next pass: set aside from the collector's
    # walks at once (``elb.core.gcpause``); the lists as long as the queue are gone by the end.
    with paused(keep=True):
        return _split(
            snapshot,
            pending,
            groups,
            site,
            new_node_name=new_node_name,
            start_times=start_times,
            unread=unread,
            keep=keep,
        )


def _split(
    snapshot: Snapshot,
    pending: list[Job],
    groups: NodeGroups,
    site: Site,
    *,
    new_node_name: str | None,
    start_times: Mapping[int, float],
    unread: Mapping[int, str],
    keep: Placements | None,
) -> DemandSplit:
    try:
        check_offers(groups, site)
        placements, distinct = place_shapes(
            pending,
            groups,
            site,
            snapshot.now,
            bindings=_bindings(pending, start_times, keep),
            new_node_name=new_node_name,
            keep=keep,
        )
    except DemandError as err:  # the groups do not fit the site: no job is demand until fixed
        reason = f"the node group configuration does not fit the site: {err}"
        return DemandSplit(_without(snapshot, range(len(pending))), tuple(NotDemand(j, reason) for j in pending))
    answers: Sequence[Placement | _Unread] = placements
    reasons: dict[str, _Unread] = {}  # the waiting jobs not read, one for each reason (most share one)
    if unread:
        answers = marked = list[Placement | _Unread](placements)
        for n in [n for n, job in enumerate(pending) if job.job_id in unread]:
            why = unread[pending[n].job_id]
            found = reasons.get(why)
            if found is None:
                found = reasons[why] = _Unread(UNREAD + why)
            marked[n] = found
    # Jobs of one shape share one placement: only when one of them is not demand are the jobs
    # not demand looked at one by one.
    if not reasons and all(p.__class__ is Servable for p in distinct):
        return DemandSplit(snapshot, (), _GroupOf(pending, answers))
    left_out = [n for n, answer in enumerate(answers) if answer.__class__ is not Servable]
    refused = tuple(map(_not_demand, map(pending.__getitem__, left_out), map(answers.__getitem__, left_out)))
    return DemandSplit(_without(snapshot, left_out), refused, _GroupOf(pending, answers))


@dataclass(frozen=True, slots=True)
class _Unread:
    """The placement of a job whose ``qsub -a`` time could not be read this pass: held, with why."""

    reason: str


def _not_demand(job: Job, placement: Placement | _Unread) -> NotDemand:
    """Why ``job``, placed ``placement`` (not ``Servable``), is not demand."""
    kind = placement.__class__
    if kind is _Unread:
        return _NOT_DEMAND(job, placement.reason, None, True)
    return _NOT_DEMAND(job, placement.reason, placement.start_time if kind is NotYet else None)  # type: ignore[union-attr]


_NOT_DEMAND = maker(NotDemand)


class _GroupOf(Mapping[Job, str]):
    """``DemandSplit.group_of``: each servable job's group, made into a dict when first read. A
    policy for a single group never reads it, and hashing 50,000 jobs into a dict is most of the
    split's cost."""

    def __init__(self, jobs: Sequence[Job], placements: Sequence[Placement | _Unread]) -> None:
        self._jobs, self._placements = jobs, placements
        self._made: dict[Job, str] | None = None

    def _dict(self) -> dict[Job, str]:
        if self._made is None:
            self._made = {
                j: p.group.name for j, p in zip(self._jobs, self._placements, strict=True) if isinstance(p, Servable)
            }
            self._jobs = self._placements = ()
        return self._made

    def __getitem__(self, job: Job) -> str:
        return self._dict()[job]

    def __iter__(self) -> Iterator[Job]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        return repr(self._dict())


def _bindings(
    pending: Sequence[Job], start_times: Mapping[int, float], keep: Placements | None
) -> list[JobBinding | None] | None:
    """Each job's queues and ``qsub -a`` time (None for a job with neither); None when no job
    has either. Equal bindings are one object, so ``place_all`` tells them apart by identity;
    those without a start time are the objects of the split before (``keep``), so a job of the
    split before is found there by identity."""
    queues = [job.hard_queues for job in pending]
    if not start_times and not any(queues):
        return None
    timeless = {q: keep.binding(q) if keep is not None else JobBinding(q) for q in set(queues) if q}
    if keep is not None:
        keep.keep_bindings(timeless.values())
    out: list[JobBinding | None] = list(map(timeless.get, queues))  # None for no queue
    if start_times:
        ids = [job.job_id for job in pending]
        timed: dict[tuple[tuple[str, ...], float], JobBinding] = {}
        for n in compress(range(len(ids)), map(start_times.__contains__, ids)):
            key = (queues[n], start_times[ids[n]])
            binding = timed.get(key)
            if binding is None:
                binding = timed[key] = JobBinding(*key)
            out[n] = binding
    return out


def _without(snapshot: Snapshot, pending_indices: Sequence[int]) -> Snapshot:
    """The snapshot without the eligible waiting jobs at these positions (counted among them)."""
    jobs, waiting = snapshot.jobs, JobPhase.WAITING
    at = [n for n, job in enumerate(jobs) if job.phase is waiting]
    kept = [True] * len(jobs)
    for n in pending_indices:
        kept[at[n]] = False
    return dataclasses.replace(snapshot, jobs=tuple(compress(jobs, kept)))


__all__: Sequence[str] = (
    "SITE_TTL",
    "UNREAD",
    "DemandSplit",
    "NotDemand",
    "SiteCache",
    "demand_of",
    "node_groups",
    "split_demand",
)
