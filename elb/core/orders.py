"""The standing orders to the balancer, and the pure rule that applies them to a plan.

An admin's orders:

- **pause** (``elb pause``): no node is launched or removed by the policy; repairs go on, and
  so do removals an admin (or the cloud) asked for.
- **keep** (``elb keep NODE``): the policy never removes the node (``elb release NODE`` ends it).
- **remove** (``elb remove NODE``): the node goes through the safe drain at the first pass
  that finds it ready and the scheduler shows nothing on it; the order ends with the node.

The cloud's: a notice that dooms a node (a spot interruption, a scheduled retirement, a failed
status check) or puts it at risk (a rebalance recommendation) orders its removal with that cause
(``Orders.causes``); such a node is removed for good, never stopped into a warm pool.

The orders live in the journal, so they survive a restart and the command line can give them
while the daemon runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from elb.core.model import Node, NodeState, Plan, Removal

ADMIN_REMOVAL = "an admin asked for its removal (elb remove)"


@dataclass(frozen=True, slots=True)
class Orders:
    paused_since: float | None = None  # None: scaling runs
    pause_reason: str = ""
    kept: frozenset[str] = frozenset()
    remove: frozenset[str] = frozenset()
    # Removal orders the cloud gave: node -> (the notice's kind, what it said); the others are an admin's.
    causes: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def paused(self) -> bool:
        return self.paused_since is not None

    def why_remove(self, node: str, cloud: str) -> str:
        """The reason a removal order of ``node`` gives (``cloud``: the cloud's name in messages,
        ``CloudSettings.name``, for an order its notice gave)."""
        cause = self.causes.get(node)
        return ADMIN_REMOVAL if cause is None else f"{cloud} {cause[0]} notice: {cause[1]}"

    @property
    def by_admin(self) -> frozenset[str]:
        """Nodes an admin ordered removed (``elb remove NODE``), not the cloud's notices."""
        return self.remove - frozenset(self.causes)

    @property
    def doomed(self) -> frozenset[str]:
        """Nodes the cloud is taking back, or put at risk: removed for good, never pooled."""
        return frozenset(self.causes)


def apply_orders(plan: Plan, orders: Orders, nodes: Sequence[Node], busy_hosts: Collection[str], *, cloud: str) -> Plan:
    """The policy's plan with the orders applied (see the module's description); ``cloud``: the
    cloud's name in messages."""
    if orders.paused:
        why = f"scaling paused by an admin ({orders.pause_reason or 'no reason given'}; elb resume ends it)"
        held = plan.describe() if not plan.empty else []
        reason = why + (f"; the policy would: {'; '.join(held)}" if held else "")
        plan = Plan(reason=reason)
    removals = tuple(r for r in plan.remove if r.node not in orders.kept)
    if len(removals) < len(plan.remove):
        kept = sorted({r.node for r in plan.remove} - {r.node for r in removals})
        plan = replace(plan, remove=removals, reason=_join(plan.reason, f"kept by an admin: {', '.join(kept)}"))
    planned = {r.node for r in plan.remove}
    ready = {n.name for n in nodes if n.state is NodeState.READY}
    asked = tuple(
        Removal(name, orders.why_remove(name, cloud))
        for name in sorted(orders.remove)
        if name in ready and name not in planned and name not in busy_hosts
    )
    if asked:
        plan = replace(plan, remove=plan.remove + asked)
    return plan


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b
