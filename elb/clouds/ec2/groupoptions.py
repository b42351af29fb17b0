"""EC2's own settings of a node group (``GROUP_OPTIONS`` of ``elb.clouds.ec2.entry``): how its
nodes are launched (instance types or a launch template) and whether they share a placement
group. A config gives them flat in the group (``elb.core.groups.NodeGroup``); ``ec2_options``
reads them back from a group."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from elb.clouds.ec2.config import InstanceType, LaunchTemplate
from elb.core.groups import GroupOptions, NodeGroup, unique


class Ec2GroupOptions(GroupOptions):
    """How a group's nodes are launched on EC2."""

    instance_types: list[InstanceType] | None = Field(None, min_length=1)  # ordered: the first that launches
    launch_template: LaunchTemplate | None = None
    placement_group: bool = False

    @field_validator("instance_types")
    @classmethod
    def _unique(cls, items: list[str] | None) -> list[str] | None:
        if items is not None:
            unique(items)
        return items

    @model_validator(mode="after")
    def _one_source(self) -> Ec2GroupOptions:
        if self.instance_types is not None and self.launch_template is not None:
            raise ValueError("give instance_types or launch_template, not both")
        return self


def ec2_options(group: NodeGroup) -> Ec2GroupOptions:
    """EC2's settings of ``group`` (a group read for another cloud has none: TypeError)."""
    options = group.cloud_options
    if not isinstance(options, Ec2GroupOptions):
        raise TypeError(f"node group {group.name!r} holds no EC2 settings ({type(options).__name__})")
    return options
