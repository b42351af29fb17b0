"""The cloud's notices and their consequences, as a pass's actions. Pure.

- ``plan_notices``: each notice about a worker of elb's is counted and logged as what it is; one
  that dooms its node (a spot interruption, a scheduled retirement, a failed status check) or
  puts it at risk (a rebalance recommendation) retires the node: it is disabled in the scheduler
  and its removal ordered with that cause, so it is removed for good once idle, never stopped
  into a warm pool; a spot interruption also requeues its rerunnable jobs at once (two minutes'
  warning). A notice about an instance whose node is gone (terminated already) is logged and
  counted too; one about an instance elb never had is logged only.
- ``plan_moves``: a job requeued by more spot interruptions than allowed
  (``policy.spot_interruptions_allowed``), waiting again, is bound to on-demand nodes
  (``elb.core.interruptions``), once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from elb.core.interfaces import Instance, Notice, NoticeKind
from elb.core.interruptions import Move, moves
from elb.core.model import Node, Snapshot
from elb.core.orders import Orders


@dataclass(frozen=True, slots=True)
class Retire:
    """A node the cloud is taking back (or put at risk): disable it, order its removal with
    ``kind`` as the cause (``order``: not ordered yet), and with ``requeue`` send its rerunnable
    jobs back to wait; ``moves``: the jobs running there that this interruption sends back once
    too often, bound to on-demand nodes if the requeue sent them back."""

    node: str
    kind: NoticeKind
    reason: str
    cloud: str  # the cloud that sent the notice, in messages (``CloudSettings.name``)
    requeue: bool = False
    order: bool = True
    moves: tuple[Move, ...] = ()


@dataclass(frozen=True, slots=True)
class NoticePlan:
    retire: tuple[Retire, ...] = ()
    notes: tuple[str, ...] = ()  # one line each notice not acted on, for the log
    counts: Mapping[str, int] = field(default_factory=dict)  # notices about elb's nodes, by kind


def plan_notices(
    notices: Sequence[Notice],
    instances: Sequence[Instance],
    records: Sequence[Node],
    orders: Orders,
    *,
    snapshot: Snapshot,
    interrupted: Sequence[tuple[int, int, bool]] = (),
    allowed: int = 1,
    cloud: str,
) -> NoticePlan:
    """What each notice means for elb's nodes (see the module's description). A spot
    interruption seen again (the queue delivers at least once) requeues again, and orders
    nothing more. ``interrupted`` and ``allowed``: the journal's interruption counts and the spot
    interruptions a job may suffer (``policy.spot_interruptions_allowed``), for the jobs this
    interruption sends back once too often (``moves``); ``cloud``: its name, in messages."""
    if not notices:
        return NoticePlan()
    by_id = {i.instance_id: i.name for i in instances}
    records_by_id = {n.instance_id: n for n in records if n.instance_id}
    alive = {n.name for n in records if n.state.alive}
    retire: dict[str, Retire] = {}
    notes: list[str] = []
    counts: Counter[str] = Counter()
    for n in notices:
        record = records_by_id.get(n.instance_id)
        name = by_id.get(n.instance_id) or (record.name if record is not None else None)
        if name is None:
            notes.append(f"{cloud} notice about an instance that is not one of elb's workers: {n.describe()}")
            continue
        cause = orders.causes.get(name)
        if n.kind is NoticeKind.IMPAIRED and name in orders.remove:
            continue  # a status check seen again: its removal is under way
        counts[n.kind.value] += 1
        if name not in alive:
            state = record.state.value if record is not None else "gone"
            notes.append(f"{name}: {cloud} notice about a node that is {state}: {n.describe()}")
        elif not n.kind.retire:
            notes.append(f"{name}: {cloud} notice: {n.describe()}")
        elif n.kind is NoticeKind.INTERRUPTION:
            bound = _bound_once_too_often(name, snapshot, interrupted, allowed)
            retire[name] = Retire(name, n.kind, n.describe(), cloud, requeue=True, order=cause is None, moves=bound)
        elif cause is not None and cause[0] == n.kind.value:
            notes.append(f"{name}: {cloud} notice seen again, its removal is under way: {n.describe()}")
        elif name not in retire:
            retire[name] = Retire(name, n.kind, n.describe(), cloud)
    return NoticePlan(tuple(retire.values()), tuple(notes), dict(counts))


def _bound_once_too_often(
    node: str,
    snapshot: Snapshot,
    interrupted: Sequence[tuple[int, int, bool]],
    allowed: int,
) -> tuple[Move, ...]:
    """The jobs running on ``node`` that one more interruption sends back more than ``allowed``
    times, each bound to on-demand nodes (``elb.core.interruptions.moves``)."""
    counts = {job: (times, moved) for job, times, moved in interrupted}
    there = {j.job_id: j for j in snapshot.jobs if j.host == node}
    due = [(job, counts.get(job, (0, False))[0] + 1, counts.get(job, (0, False))[1]) for job in sorted(there)]
    return tuple(moves(due, allowed, {job: there[job].hard_requests for job in there}))


def plan_moves(interrupted: Sequence[tuple[int, int, bool]], allowed: int, snapshot: Snapshot) -> tuple[Move, ...]:
    """The jobs spot interruptions requeued more than ``allowed`` times that wait again and are
    not bound to on-demand nodes yet, each with its hard requests (``elb.core.interruptions.moves``)."""
    if not interrupted:
        return ()
    waiting = {j.job_id: j for j in snapshot.jobs if j.is_pending}
    due = [(job, times, moved) for job, times, moved in interrupted if job in waiting]
    requests = {job: waiting[job].hard_requests for job, _, _ in due}
    return tuple(moves(due, allowed, requests))


__all__: Sequence[str] = ("NoticePlan", "Retire", "plan_moves", "plan_notices")
