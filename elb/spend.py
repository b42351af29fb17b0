"""What managed nodes cost: billed time by EC2's rule, and money at each node group's price.

EC2 bills an instance from its launch: per second with a 60 s minimum (Linux on-demand and spot
today), or per started period (``billing: hour``, ``billing_period``). ``billed_seconds`` is
that rule, used by the simulator's bill and by ``elb status``. ``spend_by_group`` gives, for the
nodes up now, each group's count, billed node-hours so far, and, where the group has a
``price_per_hour``, the money so far and the rate it is spending at now (also the
``elb_spend_dollars_per_hour`` gauge). Pure: ``now`` is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from elb.groups import NodeGroups
from elb.model import Node

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


__all__: Sequence[str] = ("MIN_BILLED_SECONDS", "Billing", "GroupSpend", "billed_seconds", "spend_by_group")
