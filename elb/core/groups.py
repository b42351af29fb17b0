"""Node groups: the kinds of worker elb can add.

A ``NodeGroup`` holds what every scheduler and cloud share: its name, how many slots a node
has, its memory, its size limits, its market (on-demand or spot), its price and its warm pool.
What only the configured scheduler's driver or only the configured cloud reads of a group (Grid
Engine: the queues and host group its nodes join, the complex values they offer, the parallel
environments they serve; EC2: the instance types or launch template, the placement group) is
that driver's or that cloud's own, held opaquely in ``scheduler_options`` and ``cloud_options``:
each a pydantic model the module of its registry entry declares (``elb.core.groupoptions``). A
config writes those keys flat in the group, beside the common ones; ``NodeGroup`` hands each to
the model that declares it, and dumps them flat again. ``NodeGroups`` is the ordered list with a
cap on all of them together. Which group a waiting job goes to is the scheduler's driver's to
say (Grid Engine's demand model, ``elb.schedulers.sge.demand``; Slurm: its partition's group).

Nothing here does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from elb.core.groupoptions import GroupOptions, SchedulerGroupOptions, cloud_options, other_owner, scheduler_options
from elb.core.keyerrors import refused
from elb.core.naming import MAX_NODES
from elb.core.warmpool import WarmPool

# Why a warm pool and spot instances do not go together.
SPOT_NOT_STOPPED = (
    "a warm pool stops idle nodes, and elb's spot nodes are one-time spot instances, which cannot be stopped"
)

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"

# A node's memory, a size: a number with an optional suffix, k m g t (powers of 1000) or K M G T
# (powers of 1024): ``32g``, ``128G``, ``30000M`` (read as bytes by ``memory_bytes``).
_SIZE = r"\d+(\.\d+)?[kKmMgGtT]?"
_SIZE_UNITS = {
    "k": 1e3, "K": 2.0**10, "m": 1e6, "M": 2.0**20, "g": 1e9, "G": 2.0**30, "t": 1e12, "T": 2.0**40,
}  # fmt: skip

# The most slots a node may have: Slurm counts a node's CPUs in 16 bits (65534 is its largest);
# EC2's largest instance has 1920 vCPUs, so this leaves Grid Engine room to oversubscribe.
MAX_SLOTS = 65534


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class NodeGroup(_Model):
    """One kind of worker: its size, its limits, how it is bought; the configured driver's and
    cloud's own settings of it in ``scheduler_options`` and ``cloud_options``."""

    name: str = Field(pattern=_NAME)
    slots: int = Field(gt=0)  # a configured group: at most MAX_SLOTS (checked by elb.core.config)
    memory: str | None = Field(None, pattern=f"^{_SIZE}$")  # RAM of a node, a size (``memory_bytes``)
    min_nodes: int = Field(0, ge=0, le=MAX_NODES)
    max_nodes: int = Field(ge=0, le=MAX_NODES)
    market: Literal["on-demand", "spot"] = "on-demand"
    price_per_hour: float | None = Field(None, gt=0)  # of one node; compares groups that can run a job
    # Idle nodes stopped instead of terminated, started again for demand (elb.core.warmpool, elb.core.poolplan).
    warm_pool: WarmPool = Field(default_factory=WarmPool)
    # The configured driver's and cloud's own keys of the group, each validated by the model its
    # module declares (``elb.core.groupoptions``); read only by that driver or cloud.
    scheduler_options: SerializeAsAny[SchedulerGroupOptions] = Field(default_factory=SchedulerGroupOptions)
    cloud_options: SerializeAsAny[GroupOptions] = Field(default_factory=GroupOptions)

    @model_validator(mode="before")
    @classmethod
    def _route(cls, data: object, info: ValidationInfo) -> object:
        """A config's group is flat: each key that is not a common one goes to the option model of
        the scheduler or cloud that declares it (``info.context``'s ``scheduler`` and ``cloud``;
        without a context, the defaults of ``elb.core.registry``). A key neither declares is left
        for the common fields' check to refuse as unknown."""
        if not isinstance(data, dict):
            return data
        context = info.context if isinstance(info.context, dict) else {}
        scheduler, cloud = context.get("scheduler"), context.get("cloud")
        routed = route(data, set(cls.model_fields), scheduler_options(scheduler).model, cloud_options(cloud).model)
        for key in routed:
            if key not in cls.model_fields and (owner := other_owner(key, scheduler, cloud)) is not None:
                raise refused(cls.__name__, "other_owner", {key: owner}, routed)
        return routed

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped flat, as a config writes it: the options' keys beside the common ones."""
        out: dict[str, Any] = handler(self)
        scheduler, cloud = out.pop("scheduler_options", {}), out.pop("cloud_options", {})
        return {**out, **scheduler, **cloud}

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
        if self.market == "spot" and self.warm_pool.enabled:
            raise ValueError(f"warm_pool: {SPOT_NOT_STOPPED} (market is spot)")
        return self


def memory_bytes(size: str) -> float:
    """A node group's ``memory`` (a size: ``30G``, ``30000M``, ``32g``) in bytes; ``ValueError``
    for text that is not a size."""
    text = size.strip()
    if re.fullmatch(_SIZE, text) is None:
        raise ValueError(f"{size!r} is not a memory value")
    unit = _SIZE_UNITS.get(text[-1])
    return float(text) if unit is None else float(text[:-1]) * unit


def route(
    data: dict[str, Any], common: set[str], scheduler: type[SchedulerGroupOptions], cloud: type[GroupOptions]
) -> dict[str, Any]:
    """``data``, a flat group, with the keys ``scheduler``'s and ``cloud``'s models declare taken
    out into its ``scheduler_options`` and ``cloud_options``, validated (an error is placed at its
    key, as if the key were the group's own). Options given as a model (as a driver or a cloud
    built them) are kept as they are; given as a mapping, or with flat keys beside a model of the
    declared one, they are read together."""
    out = dict(data)
    taken: dict[str, str] = {}
    for holder, model in (("scheduler_options", scheduler), ("cloud_options", cloud)):
        given = {k: out.pop(k) for k in list(out) if k in model.model_fields and k not in common}
        for key in given:
            if key in taken:
                raise ValueError(f"{key}: declared by both the scheduler's and the cloud's options")
            taken[key] = holder
        held = out.get(holder)
        if isinstance(held, BaseModel) and not given:
            continue
        if held is not None and not isinstance(held, (model, dict)):
            raise ValueError(f"{holder}: not the configured {holder.split('_')[0]}'s options ({type(held).__name__})")
        before = held.model_dump() if isinstance(held, BaseModel) else dict(held or {})
        out[holder] = model.model_validate({**before, **given})
    return out


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


def default_group(
    *,
    slots_per_node: int,
    max_nodes: int,
    min_nodes: int = 0,
    name: str = "default",
    warm_pool: WarmPool | None = None,
    scheduler_options: SchedulerGroupOptions | None = None,
    cloud_options: GroupOptions | None = None,
) -> NodeGroup:
    """The one group elb's settings without groups describe (``policy.slots_per_node``,
    ``policy.max_nodes``, ``policy.min_nodes``, ``policy.warm_pool``; its driver's and cloud's
    options from their sections, ``elb.core.groupoptions.Declared.of_config``)."""
    options = {"scheduler_options": scheduler_options, "cloud_options": cloud_options}
    return NodeGroup.model_validate(
        {
            "name": name,
            "slots": slots_per_node,
            "min_nodes": min_nodes,
            "max_nodes": max_nodes,
            "warm_pool": warm_pool or WarmPool(),
            **{k: v for k, v in options.items() if v is not None},
        }
    )


__all__: Sequence[str] = (
    "MAX_NODES",
    "MAX_SLOTS",
    "SPOT_NOT_STOPPED",
    "GroupOptions",
    "NodeGroup",
    "NodeGroups",
    "SchedulerGroupOptions",
    "default_group",
    "known_group",
    "memory_bytes",
    "route",
    "unique",
)
