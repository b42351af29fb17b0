"""How a node is launched (``LaunchSpec``): the config first; what it leaves open comes from the
newest worker (or the master's subnet), the AMI (its root device, ``DescribeImages``) or the launch
template; a node group's own template, instance types, market and placement group
(``DescribePlacementGroups``, ``CreatePlacementGroup``) go over the cluster's way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.config import LaunchTemplate
from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import error_code, to_cloud_error
from elb.clouds.ec2.groupoptions import ec2_options
from elb.clouds.ec2.instances import Instances
from elb.clouds.ec2.launch_requests import LaunchSpec
from elb.clouds.ec2.tags import MANAGED_BY
from elb.clouds.ec2.templates import Templates
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, CloudError

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeDef

log = logging.getLogger(__name__)


class Specs:
    """Each node group's ``LaunchSpec``, with what EC2 was asked for it cached: the AMIs' root
    devices, and the placement groups known to exist."""

    def __init__(self, ctx: Ec2Context, instances: Instances, templates: Templates) -> None:
        self.ctx = ctx
        self.instances = instances
        self.templates = templates
        self._root_devices: dict[str, str | None] = {}
        self._placement_groups: set[str] = set()  # known to exist

    def launch_spec(self) -> LaunchSpec:
        """Config first; what config leaves open comes from the newest worker (or the master's
        subnet). With a launch template, the template (``_template_spec``)."""
        cfg = self.ctx.config
        if cfg.launch_template is not None:
            return self._template_spec()
        ref = self.instances.reference()
        ref_profile = (ref or {}).get("IamInstanceProfile", {}).get("Arn") if ref else None
        image = cfg.ami or (ref.get("ImageId") if ref else None)
        if not image:
            raise CloudError("no AMI: the cluster has no worker to copy from; set cloud.ec2.ami")
        types = self._instance_types(ref)
        if not types:
            raise CloudError("no instance type: the cluster has no worker to copy from; set cloud.ec2.instance_types")
        subnets: tuple[str | None, ...] = tuple(cfg.subnets)
        if not subnets:
            subnet = ref.get("SubnetId") if ref else self.instances.master_subnet()
            subnets = (subnet,)
        groups = tuple(cfg.security_groups)
        if not groups and ref:
            groups = tuple(g["GroupId"] for g in ref.get("SecurityGroups", []) if "GroupId" in g)
        root_device = None
        if cfg.root_volume_size is not None or cfg.root_volume_type is not None:
            root_device = self._root_device(image)
        return LaunchSpec(
            image_id=image,
            instance_types=types,
            subnets=subnets,
            security_groups=groups,
            key_name=cfg.key_name or (ref.get("KeyName") if ref else None),
            iam_instance_profile=cfg.iam_instance_profile or ref_profile,
            root_device_name=root_device,
            root_volume_size=cfg.root_volume_size,
            root_volume_type=cfg.root_volume_type,
            user_data=cfg.user_data,
            extra_tags=dict(cfg.extra_tags),
            spot=cfg.spot,
            spot_max_price=cfg.spot_max_price,
            spot_fallback_on_demand=cfg.spot_fallback_on_demand,
            metadata_tokens=cfg.metadata_tokens,
        )

    def spec_for(self, group: str | None) -> LaunchSpec:
        """How a node of node group ``group`` is launched: the cluster's way (``launch_spec``)
        with the group's launch template or instance types, its market (spot: without falling
        back to on-demand, which is another group's business) and its placement group. Without
        node groups, or a group not configured: ``launch_spec``. Its nodes are tagged with
        ``group`` (``TAG_GROUP``) whenever it is given."""
        g = None if self.ctx.node_groups is None or group is None else self.ctx.node_groups.get(group)
        if g is None:
            return dataclasses.replace(self.launch_spec(), group=group)
        options = ec2_options(g)
        if options.launch_template is not None:
            base = self._template_spec(options.launch_template, options.instance_types or ())
        else:
            base = self.launch_spec()
            if options.instance_types:
                base = dataclasses.replace(base, instance_types=tuple(options.instance_types))
        spot = g.market == "spot"
        placement = self._placement_group(g.name) if options.placement_group else None
        return dataclasses.replace(
            base,
            spot=spot,
            spot_fallback_on_demand=False if spot else base.spot_fallback_on_demand,
            placement_group=placement,
            group=g.name,
        )

    def new_node_slots(self) -> int | None:
        """Slots of the node ``launch`` would start first: configured, else the vCPUs of the first
        instance type (configured, or the newest worker's). None, with a warning, if EC2 can't say."""
        if self.ctx.slots_per_node is not None:
            return self.ctx.slots_per_node
        try:
            types = self.launch_spec().instance_types if self.ctx.config.launch_template else ()
            types = types or self._instance_types(
                None if self.ctx.config.instance_types else self.instances.reference()
            )
            return self.instances.slots_for(types[0]) if types else None
        except CloudError as err:
            log.warning("slots of a new node unknown: %s", err)
            return None

    def _template_spec(self, template: LaunchTemplate | None = None, types: Sequence[str] = ()) -> LaunchSpec:
        """A launch template (``template``, a node group's, else ``cloud.ec2.launch_template``)
        describes the worker: the instance types are ``types``, else (the configured template
        only) ``cloud.ec2.instance_types``, else the template's, else the newest worker's;
        subnets configured, else the template's."""
        cfg = self.ctx.config
        types = tuple(types) or (tuple(cfg.instance_types) if template is None else ())
        template = template or cfg.launch_template
        if not types:
            found = self.templates.instance_type(template)
            ref = None if found else self.instances.reference()
            types = (found,) if found else self._instance_types(ref)
        if not types:
            raise CloudError(
                "no instance type: the launch template sets none and the cluster has no worker to copy "
                "from; set cloud.ec2.instance_types"
            )
        subnets: tuple[str | None, ...] = tuple(cfg.subnets) or (None,)
        return LaunchSpec(
            image_id=None,
            instance_types=types,
            subnets=subnets,
            extra_tags=dict(cfg.extra_tags),
            spot=cfg.spot,
            spot_max_price=cfg.spot_max_price,
            spot_fallback_on_demand=cfg.spot_fallback_on_demand,
            launch_template=template,
        )

    def _placement_group(self, group: str) -> str:
        """The cluster placement group of node group ``group`` (``elb-CLUSTER-GROUP``), made
        with elb's tags when missing."""
        name = f"elb-{self.ctx.cluster}-{group}"
        if name in self._placement_groups:
            return name
        try:
            try:
                found = self.ctx.client.describe_placement_groups(GroupNames=[name]).get("PlacementGroups", [])
            except ClientError as err:
                if error_code(err) != "InvalidPlacementGroup.Unknown":
                    raise
                found = []
            if not found:
                self.ctx.client.create_placement_group(
                    GroupName=name,
                    Strategy="cluster",
                    TagSpecifications=[
                        {
                            "ResourceType": "placement-group",
                            "Tags": [
                                {"Key": TAG_CLUSTER, "Value": self.ctx.cluster},
                                {"Key": TAG_MANAGED_BY, "Value": MANAGED_BY},
                            ],
                        }
                    ],
                )
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, f"making the placement group {name}") from None
        self._placement_groups.add(name)
        return name

    def _root_device(self, image_id: str) -> str | None:
        if image_id not in self._root_devices:
            try:
                imgs = self.ctx.client.describe_images(ImageIds=[image_id]).get("Images", [])
            except (BotoCoreError, ClientError) as err:
                raise to_cloud_error(err, f"looking up AMI {image_id}") from None
            if not imgs:
                raise CloudError(f"AMI {image_id} not found")
            self._root_devices[image_id] = imgs[0].get("RootDeviceName")
        return self._root_devices[image_id]

    def _instance_types(self, ref: InstanceTypeDef | None) -> tuple[str, ...]:
        """The types to launch, in order: configured, else the reference worker's."""
        return tuple(self.ctx.config.instance_types) or (
            (ref["InstanceType"],) if ref and ref.get("InstanceType") else ()
        )
