"""The policy run once per node group, on that group's share of the cluster.

With ``node_groups`` in the config, each group gets a policy object of its own (the configured
policy, ``elb`` by default), sized for it: ``slots_per_node`` is the group's ``slots``,
``min_nodes``/``max_nodes`` the group's (``max_nodes`` within the global one). Each pass splits
the joined state by group and asks each group's policy for a plan on its share:

- its nodes: elb's records whose group is this one (a record without a group, or naming a group
  no longer configured, belongs to the first group);
- its hosts: the scheduler's hosts of those nodes; an exec host elb does not manage goes to the first
  group whose queues it serves (none: it is in no group's share);
- its jobs: the waiting jobs the driver's demand placed on it (``DemandSplit.group_of``: the
  cheapest group that can run each), and the jobs running on its hosts.

The plans are joined: removals as planned, launches in group order within the global
``max_nodes`` (the workers of every group count), and the new nodes named after the highest
number in use across the whole cluster. ``Plan.add_groups`` says which group each new node is
of. Pure: the time is the joined state's ``now``; each group's policy object keeps its own memory (``ViewCache``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elb.core.config import ClusterConfig, Config, PolicyConfig
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import History, Host, Job, Plan, Removal, Snapshot
from elb.core.policy import Policy, make_policy
from elb.core.policy.base import QuietHint
from elb.core.policy.view import new_names
from elb.core.state import ClusterState, worker_names

_NO_GROUPS: Mapping[Job, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class GroupShare:
    """One group's share of the cluster: what its policy plans on."""

    group: NodeGroup
    state: ClusterState  # the group's hosts, jobs and records


@dataclass
class GroupedPolicy:
    """``config`` with one policy object per group of ``groups``."""

    config: PolicyConfig
    cluster: ClusterConfig
    groups: NodeGroups
    _policies: dict[str, Policy] = field(default_factory=dict, init=False, repr=False)

    @property
    def name(self) -> str:
        return f"{self.config.name} per node group"

    def policy_of(self, group: NodeGroup) -> Policy:
        """The group's own policy object, made once."""
        found = self._policies.get(group.name)
        if found is None:
            sized = self.config.model_copy(
                update={
                    "min_nodes": group.min_nodes,
                    "max_nodes": self.groups.max_nodes_of(group),
                    "slots_per_node": group.slots,
                }
            )
            found = self._policies[group.name] = make_policy(sized, self.cluster)
        return found

    def decide(self, state: ClusterState, history: History) -> Plan:
        """``Policy.decide``: every waiting job counted for the first group (``decide_groups``
        takes the demand model's placement)."""
        return self.decide_groups(state, _NO_GROUPS, history)

    def decide_groups(self, state: ClusterState, group_of: Mapping[Job, str], history: History) -> Plan:
        """One plan from each group's policy on its share, joined (see the module's description)."""
        plans = [(s.group, self.policy_of(s.group).decide(s.state, history)) for s in self.shares(state, group_of)]
        return self._join(plans, state)

    def quiet_until_groups(self, state: ClusterState, group_of: Mapping[Job, str], history: History) -> float:
        """The earliest time any group's policy may plan something on an unchanged cluster
        (``quiet_until`` of each group's policy on its share; ``now`` when one has none): the
        simulator skips the polls before it."""
        until = float("inf")
        for s in self.shares(state, group_of):
            policy = self.policy_of(s.group)
            if not isinstance(policy, QuietHint):
                return state.now
            until = min(until, float(policy.quiet_until(s.state, history)))
        return until

    def shares(self, state: ClusterState, group_of: Mapping[Job, str]) -> list[GroupShare]:
        """The cluster split by group."""
        snapshot, nodes = state.snapshot, state.records
        known = {g.name for g in self.groups.groups}
        first = self.groups.groups[0].name
        master = self.cluster.master
        node_group = {n.name: n.group if n.group in known else first for n in nodes if n.name != master}
        host_group: dict[str, str | None] = {}
        for h in snapshot.hosts:
            if h.name != master:
                host_group[h.name] = node_group.get(h.name) or self._serving(h)
        out = []
        for g in self.groups.groups:
            hosts = tuple(h for h in snapshot.hosts if host_group.get(h.name) == g.name)
            jobs = tuple(
                j
                for j in snapshot.jobs
                if (j.is_pending and group_of.get(j, first) == g.name)
                or (j.host is not None and host_group.get(j.host) == g.name)
            )
            mine = tuple(n for n in nodes if node_group.get(n.name) == g.name)
            out.append(
                GroupShare(g, dataclasses.replace(state, snapshot=Snapshot(snapshot.now, jobs, hosts), records=mine))
            )
        return out

    def _serving(self, host: Host) -> str | None:
        """The first group whose nodes serve a queue the unmanaged ``host`` serves (the driver's
        word: ``SchedulerGroupOptions.joins``)."""
        queues = {q.queue for q in host.queues}
        return next((g.name for g in self.groups.groups if any(map(g.scheduler_options.joins, queues))), None)

    def _join(self, plans: Sequence[tuple[NodeGroup, Plan]], state: ClusterState) -> Plan:
        snapshot, nodes = state.snapshot, state.records
        master = self.cluster.master
        alive = [n.name for n in nodes if n.state.alive]
        size = len(worker_names([h.name for h in snapshot.hosts], alive, master, state.down))
        room = max(0, self.groups.total_max_nodes - size)
        counts: list[tuple[NodeGroup, int, str]] = []
        reasons: list[str] = []
        removals: list[Removal] = []
        for g, plan in plans:
            take = min(plan.add, room)
            room -= take
            if take:
                why = plan.add_reason
                if take < plan.add:
                    why += f" (capped at the global max_nodes {self.groups.total_max_nodes}: {take} of {plan.add})"
                counts.append((g, take, why))
            elif plan.add:
                reasons.append(f"{g.name}: {plan.add} wanted, but the cluster is at the global max_nodes ({size})")
            if plan.reason:
                reasons.append(f"{g.name}: {plan.reason}")
            removals.extend(Removal(r.node, f"{r.reason} (group {g.name})") for r in plan.remove)
        total = sum(n for _, n, _ in counts)
        names = new_names(snapshot.hosts, nodes, total, self.cluster.node_prefix, self.cluster.node_digits)
        groups: dict[str, str] = {}
        add_reasons: list[str] = []
        at = 0
        for g, n, why in counts:
            mine = names[at : at + n]
            at += n
            groups.update(dict.fromkeys(mine, g.name))
            add_reasons.append(f"{g.name}: {n} ({', '.join(mine)}): {why}")
        return Plan(
            add=total,
            add_names=names,
            add_reason="; ".join(add_reasons),
            remove=tuple(removals),
            reason="; ".join(reasons),
            add_groups=MappingProxyType(groups),
        )


def policy_for(config: Config) -> Policy:
    """The policy a config names: per node group with ``node_groups``, else the one policy."""
    if config.node_groups is None:
        return make_policy(config.policy, config.cluster)
    return GroupedPolicy(config.policy, config.cluster, config.groups(1))


def decide_demand(
    policy: Policy, state: ClusterState, history: History, *, group_of: Mapping[Job, str] = _NO_GROUPS
) -> Plan:
    """``policy``'s plan on the joined ``state`` of the demand; a ``GroupedPolicy`` also takes
    which group each waiting job goes to (``elb.core.demand.DemandSplit.group_of``)."""
    if isinstance(policy, GroupedPolicy):
        return policy.decide_groups(state, group_of, history)
    return policy.decide(state, history)


__all__: Sequence[str] = ("GroupShare", "GroupedPolicy", "decide_demand", "policy_for")
