"""A scheduler that names the nodes it wants (Slurm's power saving): its asks as a pass's
actions, per node. Pure.

The state is each node's latest ask (``elb.core.scheduler.Ask``), never a request of many nodes: an
ask is answered once for its node, and a newer ask of the node replaces it.

- ``WANT``: a node that is not alive is launched (or, pooled, started again: ``elb.core.poolplan``)
  within ``max_nodes`` and its group's; the ones over the limits are declined (given back to the
  scheduler, which lets their jobs wait again). The ask stays open while the node boots, so a
  bring-up that fails is launched again (or declined) at a later pass; it is answered once the
  node is ready.
- ``RELEASE`` and ``RESET``: a ready node the scheduler is done with (or gave up on) is removed
  with the safe drain; a booting one no operation carries is abandoned; a reset node that is not
  alive is given back (the scheduler left it down). A release of a node that is not alive is
  answered at once.
- a node of elb's the read shows ``gone`` (powered down) is removed like a release.
- an ask the read dropped (stale) is answered with why; a give-back that failed is tried again
  at ``retry_at``, not before (``elb.core.backoff``'s doubling).
- the names the scheduler may pick next (``NamePool``, a driver that ``HoldsNames``): as many stay
  open as there is room for within ``max_nodes`` and each group's once this pass's launches are
  counted, the rest are held (``NameHolds``), so the scheduler puts no job on a node elb would give
  back (a give-back sends the job to wait again, and the scheduler would pick another such name).
  Names of the warm pool's nodes are kept open first, then the names a waiting job asks for by
  name, then the names open now, then the held ones (reopened), then the names still on their
  way down, then the lowest: room goes first to a name the scheduler can bring up now. A name on
  its way down is held like the others: the scheduler may pick it the moment it is down.
  With ``policy.budget``, a group's open names are also within the nodes the budget affords now;
  while scaling is paused, every name is held. A held name whose node is alive (the scheduler
  put a job on it as elb held it) is reopened, whatever the room.

Nodes with an operation in flight are left to it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from elb.core.model import ALIVE_STATES, Node, NodeState, Removal
from elb.core.scheduler import Ask, AskKind, Dropped, NamePool, PoolName
from elb.core.state import worker_names

RELEASE_RETRY = 60.0  # seconds before a failed give-back is tried again, doubling per attempt
RELEASE_RETRY_MAX = 3600.0


def release_retry_at(attempts: int, now: float) -> float:
    """When a give-back that failed ``attempts`` times (this one included) is tried again."""
    return now + min(RELEASE_RETRY * 2.0 ** min(attempts - 1, 32), RELEASE_RETRY_MAX)


@dataclass(frozen=True, slots=True)
class Decline:
    """Give ``node`` back to the scheduler (its ask of ``since`` answered once that went through)."""

    node: str
    since: float
    reason: str


@dataclass(frozen=True, slots=True)
class Answer:
    node: str
    since: float
    answer: str


@dataclass(frozen=True, slots=True)
class NameHolds:
    """Names to keep from the scheduler's next asks (``hold``, with ``reason``) and names to let it
    pick again (``reopen``)."""

    hold: tuple[str, ...] = ()
    reopen: tuple[str, ...] = ()
    reason: str = ""

    def describe(self) -> list[str]:
        lines = [f"hold {name} from the scheduler's asks: {self.reason}" for name in self.hold]
        return lines + [f"reopen {name} to the scheduler's asks: there is room for it" for name in self.reopen]


@dataclass(frozen=True, slots=True)
class AskPlan:
    launch: tuple[Ask, ...] = ()  # WANT asks to launch, in order (within the limits)
    declines: tuple[Decline, ...] = ()
    answers: tuple[Answer, ...] = ()
    removals: tuple[Removal, ...] = ()  # ready nodes the scheduler released or showed gone
    abandon: tuple[Removal, ...] = ()  # booting nodes no operation carries that the scheduler gave up
    groups: Mapping[str, str] = field(default_factory=dict)  # the group of each node to launch
    holds: NameHolds = field(default_factory=NameHolds)  # the names kept from (or opened to) its next asks


def plan_asks(
    asks: Sequence[Ask],
    dropped: Sequence[Dropped],
    gone: Mapping[str, str],
    records: Sequence[Node],
    in_flight: Collection[str],
    *,
    max_nodes: int,
    group_max: Mapping[str, int],
    first_group: str,
    master: str,
    now: float,
    names: NamePool | None = None,
    afford: Mapping[str, int] | None = None,
    paused: str = "",
    down: Collection[str] = (),
) -> AskPlan:
    """The asks' actions (see the module's description). ``names``: the names the scheduler may
    pick next (None: not read, none held or opened); ``afford``: how many more nodes of each
    group the budget allows now (``elb.core.budget.room``; None: no budget), a limit on the
    names kept open besides ``max_nodes``; ``paused``: why scaling is paused ("": it is not),
    every name held then (every launch is declined); ``down``: the nodes that are down
    (``elb.core.state.ClusterState.down``), which take no room."""
    by_name = {n.name: n for n in records}
    room = _Room(records, max_nodes=max_nodes, group_max=group_max, first_group=first_group, master=master, down=down)
    out = _Actions(answers=[Answer(d.ask.node, d.ask.since, f"dropped: {d.reason}") for d in dropped])
    _answer_asks(asks, by_name, in_flight, now, room, out)
    _remove_gone(gone, by_name, {a.node for a in asks}, in_flight, out)
    holds = _name_holds(names, paused, room, records, afford, out)
    return AskPlan(
        tuple(out.launch),
        tuple(out.declines),
        tuple(out.answers),
        tuple(out.removals),
        tuple(out.abandon),
        out.groups,
        holds,
    )


def _answer_asks(  # noqa: PLR0917 (the asks, what the pass knows of their nodes, and where the actions go)
    asks: Sequence[Ask],
    by_name: Mapping[str, Node],
    in_flight: Collection[str],
    now: float,
    room: _Room,
    out: _Actions,
) -> None:
    """Each ask's actions into ``out``: a want within ``room``, a release or reset; an ask of a node
    an operation carries, or whose give-back is not due again yet (``retry_at``), is left."""
    for a in asks:
        if a.node in in_flight or (a.retry_at is not None and now < a.retry_at):
            continue
        node = by_name.get(a.node)
        if a.kind is AskKind.WANT:
            _want(a, node, room, out)
        else:
            _release(a, node, out)


def _remove_gone(
    gone: Mapping[str, str],
    by_name: Mapping[str, Node],
    asked: Collection[str],
    in_flight: Collection[str],
    out: _Actions,
) -> None:
    """The ready nodes of elb's the read shows gone, removed like a release (by name, with why),
    unless an ask of the node or an operation on it has it already."""
    for name, why in sorted(gone.items()):
        node = by_name.get(name)
        if name in asked or name in in_flight or node is None or node.state is not NodeState.READY:
            continue
        out.removals.append(Removal(name, why))


def _name_holds(  # noqa: PLR0917 (the pool, why paused, the room and what this pass does with both)
    names: NamePool | None,
    paused: str,
    room: _Room,
    records: Sequence[Node],
    afford: Mapping[str, int] | None,
    out: _Actions,
) -> NameHolds:
    """The names to hold and to reopen (none without a pool): every open one while ``paused``
    (and the held ones that say another reason), else ``_holds``'s; a held name whose node is
    alive reopened whatever the room; no reason when nothing is held."""
    if names is None:
        holds = NameHolds()
    elif paused:
        holds = NameHolds(tuple(sorted([*(p.name for p in names.open), *_stale(names.held, paused)])), (), paused)
    else:
        holds = _holds(names, room, records, afford, out.groups, {d.node for d in out.declines})
    if names is not None and names.held_alive:
        holds = dataclasses.replace(holds, reopen=tuple(sorted({*holds.reopen, *names.held_alive})))
    if not holds.hold:
        holds = dataclasses.replace(holds, reason="")
    return holds


def _holds(  # noqa: PLR0917 (the pool, the room and what this pass does with both)
    names: NamePool,
    room: _Room,
    records: Sequence[Node],
    afford: Mapping[str, int] | None,
    launched: Mapping[str, str],
    declined: set[str],
) -> NameHolds:
    """The names to hold and to reopen so that as many are open as ``room`` has left, each group
    within its own and within what the budget affords (``afford``, less this pass's launches of
    the group: ``launched``, each node's group); see the module's description."""
    pooled = {n.name for n in records if n.state.pooled}
    wanted, settling = set(names.wanted), set(names.settling)
    ranked = sorted(
        [(p, True) for p in names.open] + [(p, False) for p in names.held],
        key=lambda pair: (
            pair[0].name not in pooled,
            pair[0].name not in wanted,
            pair[0].name in settling,
            not pair[1],
            pair[0].name,
        ),
    )
    # A name the scheduler brings up before elb has its ask takes room as this pass's launches do.
    left = room.free - len(set(names.pending) - set(launched) - declined)
    group_left = {g: limit - room.per_group.get(g, 0) for g, limit in room.group_max.items()}
    money_left = dict(afford) if afford is not None else {}
    for group in launched.values():
        if group in money_left:
            money_left[group] = max(0, money_left[group] - 1)
    hold: list[str] = []
    reopen: list[str] = []
    kept: list[PoolName] = []  # held, and held still
    why: set[str] = set()
    for p, is_open in ranked:
        group = room.group(p.group)
        full = _full(left, group_left.get(group), money_left.get(group), room.max_nodes)
        if full is None and not is_open and p.name in settling:
            continue  # held on its way down: reopened once down (the scheduler can use it only then)
        if full is None:
            left -= 1
            for limits in (group_left, money_left):
                if group in limits:
                    limits[group] -= 1
            if not is_open:
                reopen.append(p.name)
            continue
        why.add(full)
        if is_open:
            hold.append(p.name)
        else:
            kept.append(p)
    reason = "; ".join(sorted(why))
    hold += _stale(kept, reason)
    if not hold and not reopen:
        return NameHolds()
    return NameHolds(tuple(sorted(hold)), tuple(sorted(reopen)), reason)


def _stale(held: Sequence[PoolName], reason: str) -> list[str]:
    """The held names whose hold says another reason than ``reason``: held again with it, so that
    what the scheduler shows an admin is why each name is held now."""
    return [p.name for p in held if not _says(p.reason, reason)]


def _says(shown: str | None, reason: str) -> bool:
    """Whether a held name's reason as the scheduler shows it (``PoolName.reason``) is ``reason``:
    the same words, whatever the punctuation the scheduler takes (None: not known in full, taken
    as the same, so that a reason the scheduler cuts is not written again every pass)."""
    if shown is None:
        return True
    return _WORDS.findall(shown.lower()) == _WORDS.findall(reason.lower())


_WORDS = re.compile(r"[0-9a-z]+")


def _full(left: int, group_left: int | None, money_left: int | None, max_nodes: int) -> str | None:
    """Why no name more of a group may stay open (None: one may): ``max_nodes``, the group's own,
    or the budget."""
    if left <= 0:
        return f"no room within max_nodes {max_nodes}"
    if group_left is not None and group_left <= 0:
        return "no room within its group's max_nodes"
    if money_left is not None and money_left <= 0:
        return "the budget affords no more node of its group now"
    return None


@dataclass
class _Actions:
    launch: list[Ask] = field(default_factory=list)
    declines: list[Decline] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    abandon: list[Removal] = field(default_factory=list)
    groups: dict[str, str] = field(default_factory=dict)


class _Room:
    """Room for new nodes within ``max_nodes`` and each group's own limit: each alive record
    takes one (``worker_names``: a node that is down takes none)."""

    def __init__(
        self,
        records: Sequence[Node],
        *,
        max_nodes: int,
        group_max: Mapping[str, int],
        first_group: str,
        master: str,
        down: Collection[str],
    ) -> None:
        self.max_nodes, self.group_max, self.first_group = max_nodes, group_max, first_group
        places = worker_names((), [n.name for n in records if n.state in ALIVE_STATES], master, down)
        alive = [n for n in records if n.name in places]
        self.free = max(0, max_nodes - len(alive))
        self.per_group: dict[str, int] = {}
        for n in alive:
            g = self.group(n.group)
            self.per_group[g] = self.per_group.get(g, 0) + 1

    def group(self, name: str | None) -> str:
        return name if name is not None and name in self.group_max else self.first_group

    def take(self, group: str) -> str | None:
        """Take room for one node of ``group``; None when there is, else why not."""
        if self.free <= 0:
            return f"max_nodes {self.max_nodes} reached"
        limit = self.group_max.get(group, self.max_nodes)
        if self.per_group.get(group, 0) >= limit:
            return f"group {group}'s max_nodes {limit} reached"
        self.free -= 1
        self.per_group[group] = self.per_group.get(group, 0) + 1
        return None


def _want(a: Ask, node: Node | None, room: _Room, out: _Actions) -> None:
    if node is not None and node.state.alive:
        if node.state is NodeState.READY:
            out.answers.append(Answer(a.node, a.since, "ready"))
        return  # booting (or draining): left open until it is ready, or not alive
    group = room.group(a.group)
    full = room.take(group)
    if full is not None:
        out.declines.append(Decline(a.node, a.since, full))
        return
    out.launch.append(a)
    out.groups[a.node] = group


def _release(a: Ask, node: Node | None, out: _Actions) -> None:
    why = "the scheduler powered it down" if a.kind is AskKind.RELEASE else "the scheduler gave up on its resume"
    why += f" ({a.detail})" if a.detail else ""
    if node is None or not node.state.alive:
        if a.kind is AskKind.RESET:
            out.declines.append(Decline(a.node, a.since, why))
        else:
            out.answers.append(Answer(a.node, a.since, "done: the node is not running"))
        return
    (out.abandon if node.state.booting else out.removals).append(Removal(a.node, why))


__all__: Sequence[str] = ("Answer", "AskPlan", "Decline", "NameHolds", "plan_asks", "release_retry_at")
