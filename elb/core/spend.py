"""What managed nodes cost: billed time by EC2's rule, and money at each node group's price.

EC2 bills an instance from its launch: per second with a 60 s minimum (Linux on-demand and spot
today), or per started period (``billing: hour``, ``billing_period``). ``billed_seconds`` is
that rule, used by the simulator's bill and by ``elb status``. ``spend_by_group`` gives, for the
nodes up now, each group's count, billed node-hours so far, and, where the group has a
``price_per_hour``, the money so far and the rate it is spending at now (also the
``elb_spend_dollars_per_hour`` gauge). Pure: ``now`` is passed in.

Over time, from the journal: ``lives`` turns the journal's events into each node's billed
stretches (``Life``: its instance running, from its launch or restart to its stop or end, with
when it was booting, ready or draining; ``Stopped``: its volumes while it sat stopped in a warm
pool). ``billed_in`` is the money and node-seconds of those stretches within a window, and
``period_spend`` what a budget's period has cost so far with the rate spent now (``elb.core.budget``);
``read_spend`` reads both from a journal.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from elb.core.budget import Budget, BudgetCheck, Spend, holding_now, pace, period_bounds, room, status_lines
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Node, NodeState

if TYPE_CHECKING:
    from elb.core.config import Config
    from elb.core.model import Event

Billing = Literal["second", "hour"]
MIN_BILLED_SECONDS = 60.0  # EC2's minimum for per-second billing


def billed_seconds(up: float, billing: Billing, period: float = 3600.0) -> float:
    """Seconds billed for ``up`` seconds of an instance's life."""
    up = max(0.0, up)
    if billing == "second":
        return max(MIN_BILLED_SECONDS, up)
    return max(1, math.ceil(up / period - 1e-9)) * period


@dataclass(frozen=True, slots=True)
class GroupSpend:
    """One node group's nodes up now and what they have cost so far."""

    group: str
    nodes: int
    node_hours: float  # billed so far, nodes up now
    price_per_hour: float | None
    money: float | None  # node_hours at the price; None without a price
    per_hour: float | None  # what the nodes up now (and the pooled ones' volumes) cost an hour; None without a price
    stopped: int = 0  # nodes stopped in the group's warm pool (or on their way there): their volumes cost

    def describe(self) -> str:
        text = f"group {self.group}: {self.nodes} node{'s' if self.nodes != 1 else ''} up"
        if self.stopped:
            text += f", {self.stopped} stopped in the warm pool"
        text += f", {self.node_hours:.1f} node-hours billed so far"
        if self.price_per_hour is not None and self.money is not None and self.per_hour is not None:
            text += f" at {self.price_per_hour:g}/h: {self.money:.2f} so far, spending {self.per_hour:.2f}/h now"
        return text


def spend_by_group(
    nodes: Sequence[Node], groups: NodeGroups, now: float, billing: Billing, period: float = 3600.0
) -> list[GroupSpend]:
    """Each group's nodes that are up (``NodeState.alive``) and stopped in its warm pool, in the
    groups' order; a node whose group is not configured counts for the first group, as the pass
    counts it. The rate spent now is the nodes up at the group's price plus the pooled nodes'
    volumes at ``warm_pool.volume_price_per_hour``."""
    first = groups.groups[0].name
    out: list[GroupSpend] = []

    def group_of(n: Node) -> str:
        return n.group if n.group and groups.get(n.group) else first

    for g in groups.groups:
        mine = [n for n in nodes if n.state.alive and group_of(n) == g.name]
        pooled = sum(1 for n in nodes if n.state.pooled and group_of(n) == g.name)
        hours = sum(billed_seconds(now - n.launched_at, billing, period) for n in mine) / 3600.0
        price = g.price_per_hour
        rate = None if price is None else len(mine) * price + pooled * g.warm_pool.volume_price_per_hour
        out.append(GroupSpend(g.name, len(mine), hours, price, None if price is None else hours * price, rate, pooled))
    return out


# What a node does while its instance runs, for the attribution of its billed seconds.
Activity = Literal["booting", "idle", "draining"]
_ACTIVITY: dict[NodeState, Activity] = {
    NodeState.REQUESTED: "booting",
    NodeState.LAUNCHING: "booting",
    NodeState.RUNNING: "booting",
    NodeState.PROVISIONING: "booting",
    NodeState.STARTING: "booting",
    NodeState.READY: "idle",
    NodeState.DRAINING: "draining",
    NodeState.DEREGISTERED: "draining",
    NodeState.STOPPING: "draining",
}
# States in which the node's instance exists and runs (billed): a life opens at the first of them.
_RUNS = frozenset(
    {
        NodeState.RUNNING,
        NodeState.PROVISIONING,
        NodeState.READY,
        NodeState.DRAINING,
        NodeState.DEREGISTERED,
        NodeState.STOPPING,
        NodeState.STARTING,
    }
)


@dataclass(frozen=True, slots=True)
class Life:
    """One billed stretch of a node's instance: from its launch (or its restart from a warm pool)
    to its stop or its end (``end`` None: it runs still), at its group's price. ``activity``: from
    when on it was booting, ready (``idle`` unless a job runs on it) or draining, oldest first."""

    node: str
    group: str
    start: float
    end: float | None
    activity: tuple[tuple[float, Activity], ...]
    slots: int | None = None
    price_per_hour: float | None = None


@dataclass(frozen=True, slots=True)
class Stopped:
    """A node stopped in its group's warm pool, from its stop to its restart or its end (None:
    stopped still): its volumes cost ``price_per_hour`` (``warm_pool.volume_price_per_hour``)."""

    node: str
    group: str
    start: float
    end: float | None
    price_per_hour: float = 0.0


def lives(
    nodes: Sequence[Node], events: Iterable[Event], groups: NodeGroups, since: float | None = None
) -> tuple[list[Life], list[Stopped]]:
    """Each node's billed stretches from the journal's events (oldest first, as the journal
    keeps them; ``since``: the events at or after it only, None: every one kept) and records. A
    stretch opens when the instance runs (``running`` and after, or ``starting`` from a warm
    pool) and closes when it is stopped or gone (``terminated``, ``failed``); a launch that
    failed before its instance ran is not billed. The last stretch of a node starts at its
    record's ``launched_at`` (the instance's own launch time); a node whose first event given is
    not a launch's ran (or sat stopped) from ``since`` (without it, from that event: older events
    were pruned). A node alive with no event given runs (or is stopped) since before them."""
    first = groups.groups[0]
    by_node: dict[str, list[Event]] = {}
    for e in events:
        by_node.setdefault(e.node, []).append(e)
    out: list[Life] = []
    pooled: list[Stopped] = []
    for n in nodes:
        g = (groups.get(n.group) if n.group else None) or first
        mine = by_node.get(n.name, [])
        if not mine:
            if n.state.alive:
                out.append(Life(n.name, g.name, n.launched_at, None, _activity_of(n), n.slots, g.price_per_hour))
            elif n.state is NodeState.STOPPED:
                since = n.stopped_at if n.stopped_at is not None else n.launched_at
                pooled.append(Stopped(n.name, g.name, since, None, g.warm_pool.volume_price_per_hour))
            continue
        built, stops = _walk(n, mine, g, since)
        out += built
        pooled += stops
    return out, pooled


def _activity_of(n: Node) -> tuple[tuple[float, Activity], ...]:
    """What a node with no event kept did since its launch, from its record alone."""
    acts: list[tuple[float, Activity]] = [(n.launched_at, "booting")]
    if n.ready_at is not None:
        acts.append((max(n.ready_at, n.launched_at), "idle"))
    now_doing = _ACTIVITY.get(n.state)
    if now_doing == "draining":
        acts.append((max(n.updated_at or n.launched_at, acts[-1][0]), "draining"))
    return tuple(acts)


class _Walk:
    """One node's events, walked oldest first into its stretches."""

    def __init__(self, n: Node, group: NodeGroup) -> None:
        self.n = n
        self.group = group.name
        self.price = group.price_per_hour
        self.volumes = group.warm_pool.volume_price_per_hour
        self.lives: list[Life] = []
        self.stopped: list[Stopped] = []
        self.start: float | None = None
        self.acts: list[tuple[float, Activity]] = []
        self.stopped_since: float | None = None

    def begin(self, first: Event, since: float | None) -> None:
        """The node's state before its first event given: none when that event starts a launch;
        else it ran, or sat stopped, before it (from ``since``, the events' start, or from the
        event itself when not known)."""
        if first.state in (NodeState.REQUESTED, NodeState.LAUNCHING):
            return
        before = first.time if since is None else min(since, first.time)
        n = self.n
        was_stopped = first.state is NodeState.STARTING or (
            first.state in (NodeState.TERMINATED, NodeState.FAILED)
            and n.stopped_at is not None
            and n.stopped_at <= first.time
        )
        if was_stopped:
            self.stopped_since = before
        else:
            booting = first.state in (NodeState.RUNNING, NodeState.PROVISIONING, NodeState.READY)
            self.start = before
            self.acts = [(before, "booting" if booting else "idle")]

    def close(self, at: float) -> None:
        if self.start is not None:
            end = max(self.start, at)
            self.lives.append(
                Life(self.n.name, self.group, self.start, end, tuple(self.acts), self.n.slots, self.price)
            )
        self.start, self.acts = None, []

    def unstop(self, at: float) -> None:
        if self.stopped_since is not None:
            self.stopped.append(
                Stopped(self.n.name, self.group, self.stopped_since, max(self.stopped_since, at), self.volumes)
            )
            self.stopped_since = None

    def step(self, e: Event) -> None:
        s = e.state
        if s is NodeState.STARTING:
            self.unstop(e.time)
        if s in _RUNS and self.start is None and self.stopped_since is None:
            self.start, self.acts = e.time, []
        doing = _ACTIVITY.get(s)
        if self.start is not None and doing is not None and (not self.acts or self.acts[-1][1] != doing):
            self.acts.append((max(e.time, self.start), doing))
        if s is NodeState.STOPPED:
            self.close(e.time)
            self.stopped_since = e.time
        elif s in (NodeState.TERMINATED, NodeState.FAILED):
            self.close(e.time)
            self.unstop(e.time)

    def end(self) -> tuple[list[Life], list[Stopped]]:
        n = self.n
        if self.start is not None:  # runs still
            life = Life(n.name, self.group, self.start, None, tuple(self.acts), n.slots, self.price)
            self.lives.append(life)
        if self.stopped_since is not None:
            self.stopped.append(Stopped(n.name, self.group, self.stopped_since, None, self.volumes))
        if self.lives:
            # The record's launched_at is the instance's own launch time, a little before the
            # event that opened its last stretch; a later one is a new request's (no instance yet).
            last = self.lives[-1]
            earlier = self.lives[-2].end if len(self.lives) > 1 else None
            if n.launched_at <= last.start and (earlier is None or earlier <= n.launched_at):
                acts = ((n.launched_at, last.activity[0][1]), *last.activity[1:]) if last.activity else ()
                self.lives[-1] = dataclasses.replace(last, start=n.launched_at, activity=acts)
        return self.lives, self.stopped


def _walk(n: Node, events: Sequence[Event], group: NodeGroup, since: float | None) -> tuple[list[Life], list[Stopped]]:
    """One node's stretches from its events."""
    walk = _Walk(n, group)
    walk.begin(events[0], since)
    for e in events:
        walk.step(e)
    return walk.end()


@dataclass(frozen=True, slots=True)
class Window:
    """Billed node-seconds and money within a window: compute (``node_seconds``, ``money``:
    the nodes' prices) and the warm pools' volumes (``volume_money``)."""

    node_seconds: float
    money: float
    volume_money: float
    lives: int


def billed_span(life: Life, now: float, billing: Billing, period: float) -> tuple[float, float]:
    """The stretch of time EC2 bills for ``life`` as of ``now``: from its start, its minimum or
    its started periods (a life running at ``now`` billed to ``now``)."""
    end = now if life.end is None else min(life.end, now)
    return life.start, life.start + billed_seconds(end - life.start, billing, period)


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def billed_in(
    found: tuple[Sequence[Life], Sequence[Stopped]],
    since: float,
    until: float,
    billing: Billing,
    period: float = 3600.0,
) -> Window:
    """What the stretches cost within [since, until): each life's billed stretch (as of
    ``until``) cut to the window, at its price; each stopped stretch's volumes likewise. Lives
    without a price count node-seconds and no money."""
    seconds = money = volumes = 0.0
    count = 0
    lives_, stopped = found
    for life in lives_:
        a, b = billed_span(life, until, billing, period)
        s = overlap(a, b, since, until)
        if s > 0:
            count += 1
            seconds += s
            money += s * (life.price_per_hour or 0.0) / 3600.0
    for p in stopped:
        end = until if p.end is None else min(p.end, until)
        volumes += overlap(p.start, end, since, until) * p.price_per_hour / 3600.0
    return Window(seconds, money, volumes, count)


def period_spend(
    found: tuple[Sequence[Life], Sequence[Stopped]], budget: Budget, now: float, billing: Billing, period: float
) -> Spend:
    """What the budget's period has cost by ``now`` and the rate spent now: each stopped or gone
    node's billed time in the period (all of it: EC2 has billed it), each running node's up to
    ``now``, at their prices; the warm pools' volumes alike. The rate: the nodes running now at
    their prices and the stopped ones' volumes."""
    start, end = period_bounds(budget, now)
    lives_, stopped = found
    spent = 0.0
    rate = 0.0
    for life in lives_:
        a, b = billed_span(life, now, billing, period)
        cut = now if life.end is None else end
        spent += overlap(a, b, start, cut) * (life.price_per_hour or 0.0) / 3600.0
        if life.end is None:
            rate += life.price_per_hour or 0.0
    for p in stopped:
        stop = now if p.end is None else min(p.end, now)
        spent += overlap(p.start, stop, start, now) * p.price_per_hour / 3600.0
        if p.end is None:
            rate += p.price_per_hour
    return Spend(spent, rate)


class SpendJournal(Protocol):
    """What ``read_spend`` reads of the journal (``elb.service.journal.Journal``)."""

    def nodes(self, *, include_gone: bool = False) -> list[Node]: ...
    def events(self, node: str | None = None) -> list[Event]: ...
    def events_since(self, since: float) -> list[Event]: ...


_GONE = (NodeState.TERMINATED, NodeState.FAILED)
_FEW = 200  # nodes to walk: fewer are read one by one, more with one read of the window's events


class SpendCache:
    """What ``read_spend`` keeps between calls (a daemon's passes, a metrics endpoint's scrapes):
    the stretches of each gone node, by its name and its record's last change (a gone node's
    stretches change only when its name is used again, and that changes its record), for one
    window. A pass then reads the events of the nodes alive or gone since, not of the period's
    every node."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.gone: dict[str, tuple[float | None, list[Life], list[Stopped]]] = {}

    def window(self, since: float) -> None:
        if since != self.since:
            self.since = since
            self.gone = {}


def read_spend(
    journal: SpendJournal,
    config: Config,
    now: float,
    *,
    records: Sequence[Node] | None = None,
    cache: SpendCache | None = None,
) -> Spend | None:
    """The budget's spend so far in its period and the rate spent now, read from the journal's
    records (``records``: the pass's read of them, gone ones included) and its events since the
    period's start (one billing period before it too: a node gone just before the start may be
    billed into it); None without ``policy.budget``. ``cache``: the gone nodes' stretches kept
    from the last call."""
    budget = config.policy.budget
    if budget is None:
        return None
    p = config.policy
    start, _ = period_bounds(budget, now)
    since = start - p.billing_period
    groups = _groups(config)
    nodes = journal.nodes(include_gone=True) if records is None else records
    mine = [n for n in nodes if n.state not in _GONE or (n.updated_at or n.launched_at) >= since]
    cache = cache if cache is not None else SpendCache()
    cache.window(since)
    kept = {n.name for n in mine if n.state in _GONE and cache.gone.get(n.name, (None,))[0] == n.updated_at}
    todo = [n for n in mine if n.name not in kept]
    found, stopped = lives(todo, _events_of(journal, todo, since), groups, since)
    _keep_gone(cache, todo, found, stopped)
    for name in kept:
        _, old_lives, old_stopped = cache.gone[name]
        found += old_lives
        stopped += old_stopped
    return period_spend((found, stopped), budget, now, p.billing, p.billing_period)


def _events_of(journal: SpendJournal, todo: Sequence[Node], since: float) -> list[Event]:
    """The events since ``since`` of the nodes in ``todo``: of every node in one read when they
    are more than a few, else node by node."""
    if len(todo) > _FEW:
        return journal.events_since(since)
    return [e for n in todo for e in journal.events(n.name) if e.time >= since]


def _keep_gone(cache: SpendCache, todo: Sequence[Node], found: Sequence[Life], stopped: Sequence[Stopped]) -> None:
    """The stretches of the gone nodes in ``todo`` kept in ``cache``, against their record's last
    update (a gone node's stretches no longer change)."""
    gone = {n.name: n.updated_at for n in todo if n.state in _GONE}
    for name, at in gone.items():
        cache.gone[name] = (at, [], [])
    for life in found:
        if life.node in gone:
            cache.gone[life.node][1].append(life)
    for pooled in stopped:
        if pooled.node in gone:
            cache.gone[pooled.node][2].append(pooled)


@dataclass(frozen=True, slots=True)
class BudgetNow:
    """The budget as it stands now (``elb status``, the dry run, the metrics): the period's spend
    so far, its projection, and whether it holds launches (no room for one more node of any
    group), with the room left for each group's nodes."""

    check: BudgetCheck
    holding: bool
    room: dict[str, int]
    lines: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        c = self.check
        return {
            "amount": c.amount,
            "period": c.period,
            "utc_offset": c.utc_offset,
            "start": c.start,
            "end": c.end,
            "spent": c.spent,
            "per_hour": c.per_hour,
            "projected": c.projected,
            "holding": self.holding,
            "room": dict(self.room),
        }


def budget_now(
    journal: SpendJournal, config: Config, now: float, *, cache: SpendCache | None = None
) -> BudgetNow | None:
    """The budget now, read from the journal; None without ``policy.budget``."""
    budget = config.policy.budget
    spend = read_spend(journal, config, now, cache=cache)
    if budget is None or spend is None:
        return None
    prices = {g.name: g.price_per_hour or 0.0 for g in _groups(config).groups}
    return BudgetNow(
        pace(budget, spend, (), now),
        holding_now(budget, spend, prices, now),
        room(budget, spend, prices, now),
        tuple(status_lines(budget, spend, prices, now)),
    )


def _groups(config: Config) -> NodeGroups:
    return config.groups(config.policy.slots_per_node or 1)


__all__: Sequence[str] = (
    "MIN_BILLED_SECONDS",
    "Activity",
    "Billing",
    "BudgetNow",
    "GroupSpend",
    "Life",
    "SpendCache",
    "Stopped",
    "Window",
    "billed_in",
    "billed_seconds",
    "billed_span",
    "budget_now",
    "lives",
    "overlap",
    "period_spend",
    "read_spend",
    "spend_by_group",
)
