"""A node group's settings that are one scheduler's or one cloud's own: the models they subclass
(``GroupOptions``, ``SchedulerGroupOptions``) and the models the registered modules declare.

The module of a scheduler driver or a cloud adapter (``elb.core.registry``) may declare, at its
top level:

- ``GROUP_OPTIONS``: its model of a group's settings, a subclass of ``SchedulerGroupOptions`` (a
  driver) or ``GroupOptions`` (a cloud), frozen and refusing unknown keys; its fields are keys a
  config writes in a node group, beside the common ones (``elb.core.groups.NodeGroup``), and no
  two of the configured driver's and cloud's share a name. Without it: the empty model, no key.
- ``group_options(cfg)`` (``DescribesDefaultGroup``): its settings of the one group a config
  without ``node_groups`` describes, from its own config section. Without it: the model's
  defaults.

What the core asks of a group in a driver's words is a method of ``SchedulerGroupOptions``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from elb.core.registry import CLOUDS, DEFAULT_CLOUD, DEFAULT_SCHEDULER, SCHEDULERS, declared, load


class GroupOptions(BaseModel):
    """What a cloud reads of a node group besides the common fields: a cloud's ``GROUP_OPTIONS``
    subclasses it; this empty model is the options of a cloud that declares none."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SchedulerGroupOptions(GroupOptions):
    """What a scheduler's driver reads of a node group besides the common fields: a driver's
    ``GROUP_OPTIONS`` subclasses it, and answers what the core asks of a group in the driver's
    words; this empty model is the options of a driver that declares none."""

    def joins(self, queue: str) -> bool:
        """Whether a node of the group serves the scheduler's queue (or partition) ``queue``: how
        a host elb did not add is counted in a group. None, unless the driver says."""
        return False

    def describe(self) -> str:
        """The group's own settings in a line, for the dry run ("" when it has none)."""
        return ""


Options = TypeVar("Options", bound=GroupOptions)
Described_co = TypeVar("Described_co", bound=GroupOptions, covariant=True)


@runtime_checkable
class DescribesDefaultGroup(Protocol[Described_co]):
    """Optional for the module of a registry entry that declares ``GROUP_OPTIONS``:
    ``group_options(cfg)``, its settings of the one group a config without ``node_groups``
    describes (``cfg``: an ``elb.core.config.Config``), read from its own section; asked for by
    ``isinstance``. Without it: the model's defaults."""

    def group_options(self, cfg: Any) -> Described_co: ...


@dataclass(frozen=True, slots=True)
class Declared(Generic[Options]):
    """What a registered module declares of a node group: its model, and its settings of the one
    group a config without ``node_groups`` describes."""

    model: type[Options]
    defaults: Callable[[Any], Options] | None

    def of_config(self, cfg: Any) -> Options:
        """The one group's settings under ``cfg`` (an ``elb.core.config.Config``)."""
        return self.model() if self.defaults is None else self.defaults(cfg)


def scheduler_options(name: str | None) -> Declared[SchedulerGroupOptions]:
    """What the scheduler ``name`` declares (None: ``elb.core.registry``'s default)."""
    module = load(SCHEDULERS, name or DEFAULT_SCHEDULER, "scheduler")
    model = declared(module, "GROUP_OPTIONS", SchedulerGroupOptions) or SchedulerGroupOptions
    return Declared(model, module.group_options if isinstance(module, DescribesDefaultGroup) else None)


def cloud_options(name: str | None) -> Declared[GroupOptions]:
    """What the cloud ``name`` declares (None: ``elb.core.registry``'s default)."""
    module = load(CLOUDS, name or DEFAULT_CLOUD, "cloud provider")
    model = declared(module, "GROUP_OPTIONS", GroupOptions) or GroupOptions
    return Declared(model, module.group_options if isinstance(module, DescribesDefaultGroup) else None)


def other_owner(key: str, scheduler: str | None, cloud: str | None) -> str | None:
    """Which other registered scheduler or cloud (not the configured ``scheduler``, ``cloud``)
    declares the group key ``key``, said for an admin ("a setting of the sge scheduler's node
    groups; this config's scheduler is slurm"); None when none does. Asked only of a key the
    configured ones refuse: it imports the other registered modules."""
    for table, configured, default, what, declares in (
        (SCHEDULERS, scheduler, DEFAULT_SCHEDULER, "scheduler", scheduler_options),
        (CLOUDS, cloud, DEFAULT_CLOUD, "cloud", cloud_options),
    ):
        mine = configured or default
        for name in table:
            if name != mine and key in declares(name).model.model_fields:
                return f"a setting of the {name} {what}'s node groups; this config's {what} is {mine}"
    return None
