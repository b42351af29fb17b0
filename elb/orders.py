"""An admin's standing orders to the balancer, and the pure rule that applies them to a plan.

- **pause** (``elb pause``): no node is launched or removed by the policy; repairs go on, and
  so do removals an admin asked for.
- **keep** (``elb keep NODE``): the policy never removes the node (``elb release NODE`` ends it).
- **remove** (``elb remove NODE``): the node goes through the safe drain at the first pass
  that finds it ready and SGE shows nothing on it; the order ends with the node.

The orders live in the journal, so they survive a restart and the command line can give them
while the daemon runs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from elb.model import Node, NodeState, Plan, Removal


@dataclass(frozen=True, slots=True)
class Orders:
    paused_since: float | None = None  # None: scaling runs
    pause_reason: str = ""
    kept: frozenset[str] = frozenset()
    remove: frozenset[str] = frozenset()

    @property
    def paused(self) -> bool:
        return self.paused_since is not None


def apply_orders(plan: Plan, orders: Orders, nodes: Sequence[Node], busy_hosts: Collection[str]) -> Plan:
    """The policy's plan with the admin's orders applied (see the module's description)."""
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
        Removal(name, "an admin asked for its removal (elb remove)")
        for name in sorted(orders.remove)
        if name in ready and name not in planned and name not in busy_hosts
    )
    if asked:
        plan = replace(plan, remove=plan.remove + asked)
    return plan


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b
