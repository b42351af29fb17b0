"""Grid Engine's own settings of a node group (``GROUP_OPTIONS`` of its driver's module): the
cluster queues and host group its nodes join, the complex values set on each of its exec hosts
(``offers``: ``h_vmem``, ``gpu``, ``arch``, ...) and the parallel environments its queues serve.
A config gives them flat in the group (``elb.core.groups.NodeGroup``); ``sge_options`` reads them
back from a group."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from elb.core.groups import NodeGroup, SchedulerGroupOptions, unique
from elb.schedulers.sge.config import HostgroupName, QueueName

_COMPLEX = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


class SgeGroupOptions(SchedulerGroupOptions):
    """Where a group's nodes join Grid Engine and what they offer there."""

    queues: list[QueueName] = Field(default_factory=lambda: ["all.q"], min_length=1)
    hostgroup: HostgroupName = "@allhosts"
    # Complex values set on each exec host of the group (its complex_values), by full name:
    # {"h_vmem": "23.5G", "gpu": "1", "arch": "lx-amd64"}. Checked against the site's complex
    # table by elb.schedulers.sge.demand.check_offers.
    offers: dict[str, str] = Field(default_factory=dict)
    pes: list[str] = Field(default_factory=lambda: ["*"])  # parallel environments it serves (wildcards)

    @field_validator("offers")
    @classmethod
    def _offers(cls, offers: dict[str, str]) -> dict[str, str]:
        for key, value in offers.items():
            if _COMPLEX.fullmatch(key) is None:
                raise ValueError(f"offers: {key!r} is not a complex name")
            if key in ("slots", "s"):
                raise ValueError("offers: slots is the group's own 'slots' setting")
            if not value.strip() or any(c.isspace() for c in value.strip()):
                raise ValueError(f"offers: {key}={value!r} is not one value")
        return offers

    @field_validator("queues", "pes")
    @classmethod
    def _unique(cls, items: list[str]) -> list[str]:
        unique(items)
        return items

    @field_validator("pes")
    @classmethod
    def _pes(cls, items: list[str]) -> list[str]:
        for item in items:
            if not item or any(c.isspace() or c in "@," for c in item):
                raise ValueError(f"{item!r} is not a parallel environment name or pattern")
        return items

    def joins(self, queue: str) -> bool:
        """Whether the group's nodes are in the cluster queue ``queue``."""
        return queue in self.queues

    def describe(self) -> str:
        """Its complex values and queues: ``gpu=1, queues all.q,gpu.q``."""
        offers = ", ".join(f"{k}={v}" for k, v in self.offers.items()) or "no complex values"
        return f"{offers}, queues {','.join(self.queues)}"


def sge_options(group: NodeGroup) -> SgeGroupOptions:
    """Grid Engine's settings of ``group`` (a group read for another scheduler has none: TypeError)."""
    options = group.scheduler_options
    if not isinstance(options, SgeGroupOptions):
        raise TypeError(f"node group {group.name!r} holds no Grid Engine settings ({type(options).__name__})")
    return options
