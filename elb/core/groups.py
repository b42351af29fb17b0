"""Node groups: the kinds of worker elb can add, each with what its nodes offer SGE.

A ``NodeGroup`` says which cluster queues and host group its nodes join, how many slots each
has, the complex values set on each of its exec hosts (``offers``: ``h_vmem``, ``gpu``, ``arch``,
...), the parallel environments its queues serve, how it is launched (instance types or a
launch template, on-demand or spot) and its size limits. ``NodeGroups`` is the ordered list with
a cap on all of them together. Which group a waiting job goes to is the scheduler's driver's
to say (Grid Engine's demand model, ``elb.schedulers.sge.demand``; Slurm: its partition's group).

Nothing here does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from elb.core.naming import MAX_NODES
from elb.core.warmpool import WarmPool

# Why a warm pool and spot instances do not go together.
SPOT_NOT_STOPPED = (
    "a warm pool stops idle nodes, and elb's spot nodes are one-time spot instances, which cannot be stopped"
)

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
_QUEUE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"  # a cluster queue: no wildcard, no @host
_HOSTGROUP = r"^@[A-Za-z0-9_][A-Za-z0-9_.-]*$"
_COMPLEX = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
_INSTANCE_TYPE = r"^[a-z0-9-]+\.[a-z0-9-]+$"  # c5.2xlarge, r6i.metal, u-6tb1.metal

# The most slots a node may have: Slurm counts a node's CPUs in 16 bits (65534 is its largest);
# EC2's largest instance has 1920 vCPUs, so this leaves Grid Engine room to oversubscribe.
MAX_SLOTS = 65534

QueueName = Annotated[str, Field(pattern=_QUEUE)]
HostgroupName = Annotated[str, Field(pattern=_HOSTGROUP)]
InstanceType = Annotated[str, Field(pattern=_INSTANCE_TYPE)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class LaunchTemplate(_Model):
    """An EC2 launch template, by id or by name, and its version."""

    id: str | None = Field(None, pattern=r"^lt-[0-9a-f]{8,17}$")
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9()./_-]{3,128}$")
    version: str = Field("$Default", pattern=r"^(\$Default|\$Latest|[1-9][0-9]*)$")

    @model_validator(mode="after")
    def _one_key(self) -> LaunchTemplate:
        if (self.id is None) == (self.name is None):
            raise ValueError("give the launch template's id or its name (exactly one)")
        return self


class NodeGroup(_Model):
    """One kind of worker: where it joins SGE, what it offers, how it is launched, how many."""

    name: str = Field(pattern=_NAME)
    queues: list[QueueName] = Field(default_factory=lambda: ["all.q"], min_length=1)
    hostgroup: HostgroupName = "@allhosts"
    slots: int = Field(gt=0)  # a configured group: at most MAX_SLOTS (checked by elb.core.config)
    # Complex values set on each exec host of the group (its complex_values), by full name:
    # {"h_vmem": "23.5G", "gpu": "1", "arch": "lx-amd64"}. Checked against the site's complex
    # table by elb.schedulers.sge.demand.check_offers.
    offers: dict[str, str] = Field(default_factory=dict)
    memory: str | None = Field(None, pattern=r"^\d+(\.\d+)?[kKmMgGtT]?$")  # RAM of a node, an SGE MEMORY value
    instance_types: list[InstanceType] | None = Field(None, min_length=1)  # ordered: the first that launches
    launch_template: LaunchTemplate | None = None
    min_nodes: int = Field(0, ge=0, le=MAX_NODES)
    max_nodes: int = Field(ge=0, le=MAX_NODES)
    market: Literal["on-demand", "spot"] = "on-demand"
    price_per_hour: float | None = Field(None, gt=0)  # of one node; compares groups that can run a job
    pes: list[str] = Field(default_factory=lambda: ["*"])  # parallel environments it serves (wildcards)
    placement_group: bool = False
    # Idle nodes stopped instead of terminated, started again for demand (elb.core.warmpool, elb.core.poolplan).
    warm_pool: WarmPool = Field(default_factory=WarmPool)

    @field_validator("offers")
    @classmethod
    def _offers(cls, offers: dict[str, str]) -> dict[str, str]:
        for key, value in offers.items():
            if not _matches(_COMPLEX, key):
                raise ValueError(f"offers: {key!r} is not a complex name")
            if key in ("slots", "s"):
                raise ValueError("offers: slots is the group's own 'slots' setting")
            if not value.strip() or any(c.isspace() for c in value.strip()):
                raise ValueError(f"offers: {key}={value!r} is not one value")
        return offers

    @field_validator("instance_types", "queues", "pes")
    @classmethod
    def _unique(cls, items: list[str] | None) -> list[str] | None:
        if items is not None:
            unique(items)
        return items

    @field_validator("pes")
    @classmethod
    def _pes(cls, items: list[str]) -> list[str]:
        for item in items:
            if not item or any(c.isspace() or c in "@," for c in item):
                raise ValueError(f"{item!r} is not a parallel environment name or pattern")
        return items

    @field_validator("price_per_hour")
    @classmethod
    def _finite(cls, price: float | None) -> float | None:
        if price is not None and not math.isfinite(price):
            raise ValueError("price_per_hour must be a finite number")
        return price

    @model_validator(mode="after")
    def _check(self) -> NodeGroup:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) is greater than max_nodes ({self.max_nodes})")
        if self.instance_types is not None and self.launch_template is not None:
            raise ValueError("give instance_types or launch_template, not both")
        if self.market == "spot" and self.warm_pool.enabled:
            raise ValueError(f"warm_pool: {SPOT_NOT_STOPPED} (market is spot)")
        return self


class NodeGroups(_Model):
    """The node groups in order (the order breaks ties) and a cap on their nodes together."""

    groups: list[NodeGroup] = Field(min_length=1)
    max_nodes: int | None = Field(None, ge=0, le=MAX_NODES)  # all groups together; None: the sum of theirs

    @model_validator(mode="after")
    def _check(self) -> NodeGroups:
        seen: set[str] = set()
        for g in self.groups:
            if g.name in seen:
                raise ValueError(f"two node groups are named {g.name!r}")
            seen.add(g.name)
        priced = [g.name for g in self.groups if g.price_per_hour is not None]
        if priced and len(priced) != len(self.groups):
            unpriced = [g.name for g in self.groups if g.price_per_hour is None]
            raise ValueError(
                f"price_per_hour is set on {', '.join(priced)} but not on {', '.join(unpriced)}: "
                "set it on every group or on none (prices compare groups)"
            )
        if self.max_nodes is None and sum(g.max_nodes for g in self.groups) > MAX_NODES:
            raise ValueError(
                f"the groups' max_nodes add up to {sum(g.max_nodes for g in self.groups)}, more than elb manages "
                f"({MAX_NODES}): set policy.max_nodes to cap them together"
            )
        minimum = sum(g.min_nodes for g in self.groups)
        if self.max_nodes is not None and minimum > self.max_nodes:
            raise ValueError(f"the groups' min_nodes add up to {minimum}, more than max_nodes ({self.max_nodes})")
        return self

    @property
    def total_max_nodes(self) -> int:
        """The most nodes of all groups together."""
        total = sum(g.max_nodes for g in self.groups)
        return total if self.max_nodes is None else min(total, self.max_nodes)

    def max_nodes_of(self, group: NodeGroup) -> int:
        """The most nodes ``group`` can have: its own cap, and the cap of all groups together."""
        return group.max_nodes if self.max_nodes is None else min(group.max_nodes, self.max_nodes)

    def get(self, name: str) -> NodeGroup | None:
        for g in self.groups:
            if g.name == name:
                return g
        return None

    def __len__(self) -> int:
        return len(self.groups)


def known_group(name: str | None, groups: NodeGroups) -> NodeGroup | None:
    """The configured node group a worker is of, by the group its record or its tag names
    (``name``; None: none named): the group named; none named, the one group when there is only
    one. None when it cannot be known: none named among several groups, or a group no longer
    configured (its group decides where it joins the scheduler, so none is guessed)."""
    if name is None:
        return groups.groups[0] if len(groups.groups) == 1 else None
    return groups.get(name)


def unique(items: Sequence[str]) -> None:
    """Refuse an item listed twice (ValueError naming it)."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            raise ValueError(f"{item!r} is listed twice")
        seen.add(item)


def _matches(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text) is not None


def default_group(
    *,
    slots_per_node: int,
    max_nodes: int,
    min_nodes: int = 0,
    queue: str = "all.q",
    hostgroup: str = "@allhosts",
    instance_types: Sequence[str] = (),
    name: str = "default",
    warm_pool: WarmPool | None = None,
) -> NodeGroup:
    """The one group elb's settings without groups describe (``policy.slots_per_node``,
    ``policy.max_nodes``, ``policy.min_nodes``, ``sge.queue``, ``sge.hostgroup``,
    ``cloud.ec2.instance_types``, ``policy.warm_pool``): every parallel environment, no complex
    values of its own."""
    return NodeGroup(
        name=name,
        queues=[queue],
        hostgroup=hostgroup,
        slots=slots_per_node,
        instance_types=list(instance_types) or None,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        warm_pool=warm_pool or WarmPool(),
    )


__all__: Sequence[str] = (
    "MAX_NODES",
    "MAX_SLOTS",
    "SPOT_NOT_STOPPED",
    "HostgroupName",
    "InstanceType",
    "LaunchTemplate",
    "NodeGroup",
    "NodeGroups",
    "QueueName",
    "default_group",
    "known_group",
    "unique",
)
