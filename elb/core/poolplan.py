"""The warm pool in a pass: which idle nodes the policy removes are stopped instead, which pooled
nodes a launch starts again, and which pooled nodes go for good; each with its reason.

``elb.core.warmpool`` decides for one group on values (``stop_or_terminate``, ``pick_restart``,
``expired``); this module applies it to the journal's nodes and the policy's plan. Pure: time is
passed in, nothing is read or changed.

- A pooled node is a node recorded ``stopped``; one ``stopping`` counts toward the pool's size.
  It may stay stopped up to its keep time (``warmpool.keep_time``) from its ``stopped_at``.
- It goes for good when ``warmpool.expired`` says so (age, keep time, the pool's size; a group
  whose pool is off keeps none), or when it was launched with another launch template version
  than its group's now (``template_versions``, when the cloud knows them).
- A removal of the policy's plan is a stop when its group has a pool and ``stop_or_terminate``
  says so; a launch of a group is a restart of the group's youngest pooled node while it has one
  (``pick_restart``); with a scheduler that names the nodes it wants, only the pooled node of
  that name is started again. Nodes with an operation in flight are left alone; a node the cloud
  is taking back (``doomed``: a spot interruption, a retirement) is never stopped into a pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from elb.core.config import Config
from elb.core.frozen import quick_init
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Node, NodeState, Plan, Removal, Snapshot
from elb.core.warmpool import Pooled, expired, keep_time, pick_restart, stop_or_terminate


@quick_init
@dataclass(frozen=True, slots=True)
class PoolPlan:
    """The warm pool's actions of one pass, each a node with its reason."""

    stops: tuple[Removal, ...] = ()  # idle nodes to drain and stop (instead of terminating them)
    restarts: tuple[Removal, ...] = ()  # pooled nodes to start for demand (instead of launching)
    expire: tuple[Removal, ...] = ()  # pooled nodes to deregister and terminate

    @property
    def empty(self) -> bool:
        return not (self.stops or self.restarts or self.expire)

    def describe(self) -> list[str]:
        return [
            *(f"stop {r.node}: {r.reason}" for r in self.stops),
            *(f"restart {r.node}: {r.reason}" for r in self.restarts),
            *(f"terminate pooled {r.node}: {r.reason}" for r in self.expire),
        ]


def groups_of(config: Config) -> NodeGroups:
    """The node groups (their warm pools and prices do not depend on a node's size)."""
    return config.groups(config.policy.slots_per_node or 1)


def group_of(node: Node, groups: NodeGroups) -> NodeGroup:
    """A node's group; a record without one, or naming a group no longer configured: the first."""
    return (groups.get(node.group) if node.group is not None else None) or groups.groups[0]


def pooled_hosts_left_out(snapshot: Snapshot, nodes: Sequence[Node]) -> Snapshot:
    """``snapshot`` without the exec hosts of pooled nodes: they stay registered in the scheduler (disabled),
    but are no capacity and no size for the policy."""
    pooled = {n.name for n in nodes if n.state.pooled}
    if not pooled or not any(h.name in pooled for h in snapshot.hosts):
        return snapshot
    return dataclasses.replace(snapshot, hosts=tuple(h for h in snapshot.hosts if h.name not in pooled))


def plan_pool(
    plan: Plan,
    nodes: Sequence[Node],
    config: Config,
    now: float,
    *,
    in_flight: Collection[str] = frozenset(),
    template_versions: Mapping[str, str] | None = None,
    doomed: Collection[str] = frozenset(),
    named: bool = False,
    record_of: Callable[[str], Node | None] | None = None,
) -> tuple[Plan, PoolPlan]:
    """The policy's ``plan`` with its removals that are stops and its launches that are restarts
    taken out, and the warm pool's actions. ``nodes``: the journal's records (those in a pool
    are enough, with ``record_of`` to find a removal's record). ``template_versions``: each
    group's launch template version now (a group missing: not known, no node goes for its
    version). ``doomed``: nodes never pooled; ``named``: a launch restarts only the pooled node
    of its own name."""
    groups = groups_of(config)
    pools = _pools(nodes, groups, config, now, in_flight=in_flight, versions=template_versions or {})
    if not plan.add and not plan.remove:
        return plan, PoolPlan(expire=tuple(pools.expire))
    restarts, launches = _restarts(plan, groups, pools, now, named=named)
    if record_of is None:
        by_name = {n.name: n for n in nodes}
        record_of = by_name.get
    stops, removals = _stops(plan, record_of, groups, pools, config=config, now=now, doomed=doomed)
    if not restarts and not stops and removals == list(plan.remove):
        return plan, PoolPlan(expire=tuple(pools.expire))
    out = dataclasses.replace(
        plan,
        add=len(launches),
        add_names=tuple(launches),
        add_groups=MappingProxyType({n: g for n, g in plan.add_groups.items() if n in launches}),
        add_reason=plan.add_reason if launches else "",
        remove=tuple(removals),
    )
    return out, PoolPlan(tuple(stops), tuple(restarts), tuple(pools.expire))


@dataclass(frozen=True, slots=True)
class _Pools:
    pooled: dict[str, list[Pooled]]  # by group: the stopped nodes that may stay
    stopping: dict[str, int]  # by group: nodes on their way into the pool
    expire: list[Removal]


def _pools(
    nodes: Sequence[Node],
    groups: NodeGroups,
    config: Config,
    now: float,
    *,
    in_flight: Collection[str],
    versions: Mapping[str, str],
) -> _Pools:
    """Each group's pooled nodes, and those of them that go for good now."""
    pools = _Pools({g.name: [] for g in groups.groups}, {g.name: 0 for g in groups.groups}, [])
    if not any(g.warm_pool.enabled for g in groups.groups) and not any(n.state is NodeState.STOPPED for n in nodes):
        return pools
    for n in nodes:
        g = group_of(n, groups)
        if n.state is NodeState.STOPPING:
            pools.stopping[g.name] += 1
        if n.state is not NodeState.STOPPED or n.name in in_flight:
            continue
        current = versions.get(g.name)
        if current is not None and n.template_version is not None and n.template_version != current:
            why = (
                f"launched with launch template version {n.template_version}, group {g.name}'s is now "
                f"{current}: a stopped node is not restarted on an old version"
            )
            pools.expire.append(Removal(n.name, why))
            continue
        since = n.stopped_at if n.stopped_at is not None else (n.updated_at or n.launched_at)
        keep = keep_time(g.warm_pool, config.policy.boot_time, g.price_per_hour)
        pools.pooled[g.name].append(Pooled(n.name, since, since + keep))
    for g in groups.groups:
        for p, _, why in expired(pools.pooled[g.name], g.warm_pool, now):
            pools.pooled[g.name].remove(p)
            pools.expire.append(Removal(p.name, f"{why} (group {g.name}'s warm pool)"))
    return pools


def _restarts(
    plan: Plan, groups: NodeGroups, pools: _Pools, now: float, *, named: bool
) -> tuple[list[Removal], list[str]]:
    """The pooled nodes started instead of launches, and the launches left."""
    restarts: list[Removal] = []
    launches: list[str] = []
    for name in plan.add_names:
        g = groups.get(plan.add_groups.get(name, "")) or groups.groups[0]
        candidates = pools.pooled[g.name]
        if named:
            candidates = [p for p in candidates if p.name == name]
        pick = pick_restart(candidates, g.warm_pool, now) if g.warm_pool.enabled and candidates else None
        if pick is None:
            launches.append(name)
            continue
        p, why = pick
        pools.pooled[g.name].remove(p)
        restarts.append(Removal(p.name, f"instead of launching {name}: {why}"))
    return restarts, launches


def _stops(
    plan: Plan,
    record_of: Callable[[str], Node | None],
    groups: NodeGroups,
    pools: _Pools,
    *,
    config: Config,
    now: float,
    doomed: Collection[str],
) -> tuple[list[Removal], list[Removal]]:
    """The policy's removals that are stops into a warm pool, and those that stay removals."""
    stops: list[Removal] = []
    removals: list[Removal] = []
    for r in plan.remove:
        record = record_of(r.node)
        g = group_of(record, groups) if record is not None else groups.groups[0]
        if record is None or not g.warm_pool.enabled:
            removals.append(r)
            continue
        if r.node in doomed:
            removals.append(Removal(r.node, f"{r.reason}; terminated, not pooled: the cloud is taking it back"))
            continue
        # Those stopping (this pass's stops among them) count as pooled: the pool has their room.
        taken = [*pools.pooled[g.name], *(Pooled("", now, now) for _ in range(pools.stopping[g.name]))]
        decision = stop_or_terminate(
            g.warm_pool,
            taken,
            boot_time=config.policy.boot_time,
            price_per_hour=g.price_per_hour,
            poll_interval=config.policy.poll_interval,
        )
        if decision.stop:
            pools.stopping[g.name] += 1
            stops.append(Removal(r.node, f"{r.reason}; {decision.reason}"))
        else:
            removals.append(Removal(r.node, f"{r.reason}; terminated, not pooled: {decision.reason}"))
    return stops, removals


__all__: Sequence[str] = ("PoolPlan", "group_of", "groups_of", "plan_pool", "pooled_hosts_left_out")
