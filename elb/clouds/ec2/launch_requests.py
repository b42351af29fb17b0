"""The launch requests elb sends (pure): what a node is launched as (``LaunchSpec``), the ways to
start it in order (``Choice``, ``choices``), and the ``RunInstances`` and ``CreateFleet`` requests
built from them, each with its ``ClientToken`` (``client_token``).

Every instance is tagged at creation with elb's tags (``worker_tags``), and the token is a digest
of the request itself and of the node name's earlier life, so a retried request never starts a
second instance for one node, and a new launch never gets an old answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from elb.clouds.ec2.config import LaunchTemplate
from elb.clouds.ec2.tags import MANAGED_BY, ROLE_WORKER
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import (
        EbsBlockDeviceTypeDef,
        RunInstancesRequestTypeDef,
        TagSpecificationTypeDef,
        TagTypeDef,
    )

Market = Literal["spot", "on-demand"]


@dataclass(frozen=True, slots=True)
class Choice:
    """One way to start a worker: instance type, subnet (None: EC2's default) and market."""

    instance_type: str
    subnet: str | None
    market: Market = "on-demand"

    def describe(self) -> str:
        return f"{self.instance_type} in {self.subnet or 'default subnet'} ({self.market})"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything ``RunInstances`` needs besides the node name, resolved from config and workers."""

    image_id: str | None  # None only with a launch template (the template's image)
    instance_types: tuple[str, ...]
    subnets: tuple[str | None, ...]
    security_groups: tuple[str, ...] = ()
    key_name: str | None = None
    iam_instance_profile: str | None = None
    root_device_name: str | None = None
    root_volume_size: int | None = None
    root_volume_type: str | None = None
    user_data: str | None = None
    extra_tags: Mapping[str, str] = field(default_factory=dict)
    spot: bool = False
    spot_max_price: str | None = None
    spot_fallback_on_demand: bool = True
    launch_template: LaunchTemplate | None = None
    metadata_tokens: str = "required"
    placement_group: str | None = None  # a cluster placement group the node goes into
    group: str | None = None  # the node group of its nodes, their elb:group tag; None: no such tag


def choices(spec: LaunchSpec) -> list[Choice]:
    """The ordered choices: each instance type over each subnet; spot first, then on-demand if allowed."""
    markets: list[Market] = ["on-demand"]
    if spec.spot:
        markets = ["spot", "on-demand"] if spec.spot_fallback_on_demand else ["spot"]
    return [Choice(t, s, m) for m in markets for t in spec.instance_types for s in spec.subnets]


def client_token(request: Mapping[str, Any], *, after: str = "", generation: int = 0) -> str:
    """The ``ClientToken`` of one launch request, ``RunInstances`` or ``CreateFleet`` (<= 64 ASCII
    characters): a digest of the request (its ``ClientToken`` and ``DryRun`` left out), of
    ``after`` and of ``generation``.

    One rule for both calls. The request is in it because EC2 refuses a token it has seen with
    other parameters (``IdempotentParameterMismatch``): another choice, another set of fleet
    overrides (a back-off took one out), another template version is another attempt. ``after``
    is the newest ended instance that had the node's name (``""`` when none is listed): Slurm
    and elb reuse names, and EC2 answers a token it has seen with the instance it started
    then, even terminated, for longer than it lists terminated instances. ``generation`` is
    raised when EC2 answers with an ended instance all the same, and past a token this process
    spent on a request that launched nothing (an instant fleet of errors only is still a fleet,
    which EC2 would answer again with the same errors). A retry of one attempt builds the same
    request with the same ``after`` and so sends the same token.
    """
    body = {k: v for k, v in request.items() if k not in ("ClientToken", "DryRun")}
    key = json.dumps([body, after, generation], sort_keys=True, separators=(",", ":"), default=str)
    return "elb-" + hashlib.sha256(key.encode()).hexdigest()[:56]


def worker_tags(spec: LaunchSpec, cluster: str, name: str) -> list[TagTypeDef]:
    """The tags of node ``name`` launched as ``spec`` says: its ``extra_tags``, elb's, and its
    node group's name when ``spec`` has one."""
    tags: list[TagTypeDef] = [{"Key": k, "Value": v} for k, v in sorted(spec.extra_tags.items())]
    tags += [
        {"Key": TAG_CLUSTER, "Value": cluster},
        {"Key": TAG_ROLE, "Value": ROLE_WORKER},
        {"Key": TAG_MANAGED_BY, "Value": MANAGED_BY},
        {"Key": TAG_NAME, "Value": name},
    ]
    if spec.group is not None:
        tags.append({"Key": TAG_GROUP, "Value": spec.group})
    return tags


def run_arguments(
    spec: LaunchSpec, choice: Choice, cluster: str, name: str, *, after: str = "", generation: int = 0
) -> RunInstancesRequestTypeDef:
    """The keyword arguments of one ``RunInstances`` call (pure), with its ``client_token``.

    With a launch template the request names it and sets only the instance type, the subnet, the
    market and the tags (EC2 merges them over the template's); without one, elb describes the
    worker itself, with IMDSv2 required unless ``metadata_tokens`` says otherwise.
    """
    tags = worker_tags(spec, cluster, name)
    tag_specs: list[TagSpecificationTypeDef] = [
        {"ResourceType": "instance", "Tags": tags},
        {"ResourceType": "volume", "Tags": tags},
    ]
    args: RunInstancesRequestTypeDef = {
        "InstanceType": choice.instance_type,  # type: ignore[typeddict-item]
        "MinCount": 1,
        "MaxCount": 1,
        "TagSpecifications": tag_specs,
    }
    if choice.subnet is not None:
        args["SubnetId"] = choice.subnet
    if choice.market == "spot":
        args["InstanceMarketOptions"] = _spot_options(spec)
    if spec.placement_group is not None:
        args["Placement"] = {"GroupName": spec.placement_group}
    template = spec.launch_template
    if template is not None:
        ref: dict[str, str] = {"Version": template.version}
        if template.id is not None:
            ref["LaunchTemplateId"] = template.id
        else:
            ref["LaunchTemplateName"] = template.name or ""
        args["LaunchTemplate"] = ref  # type: ignore[typeddict-item]
        if spec.user_data is not None:  # a node's boot: replaces the template's, which it holds first
            args["UserData"] = spec.user_data  # boto3 base64-encodes it
    else:
        _describe_worker(args, spec)
    args["ClientToken"] = client_token(args, after=after, generation=generation)
    return args


def uses_fleet(spec: LaunchSpec) -> bool:
    """Whether a node is launched with one ``CreateFleet`` call rather than ``RunInstances`` per
    choice: with a launch template (a fleet needs one) and more than one way to start it; never
    for a node given user data of its own (its boot: ``CreateFleet``'s overrides take none)."""
    if spec.placement_group is not None:  # RunInstances places each node in the group
        return False
    if spec.launch_template is not None and spec.user_data is not None:
        return False
    return spec.launch_template is not None and (len(spec.instance_types) > 1 or len(spec.subnets) > 1 or spec.spot)


def fleet_arguments(
    spec: LaunchSpec,
    options: Sequence[Choice],
    cluster: str,
    name: str,
    *,
    after: str = "",
    generation: int = 0,
) -> dict[str, Any]:
    """The keyword arguments of one ``CreateFleet`` (type ``instant``) for one node, with its
    ``client_token``: the template with ``options`` (one market) as overrides in order of
    preference; spot by price-capacity-optimized, on-demand prioritized in that order (pure).

    An instant fleet tags only the ``fleet`` and its ``instance``s at creation (the volumes are
    tagged once the instance runs: ``tags.tag_volumes``); the fleet carries elb's tags too,
    which is what the IAM policy's conditions on ``CreateFleet`` test."""
    template = spec.launch_template
    if template is None or not options or len({c.market for c in options}) != 1:
        raise CloudError("a fleet request needs a launch template and choices of one market")
    market = options[0].market
    ref: dict[str, str] = {"Version": template.version}
    if template.id is not None:
        ref["LaunchTemplateId"] = template.id
    else:
        ref["LaunchTemplateName"] = template.name or ""
    overrides: list[dict[str, Any]] = []
    for priority, c in enumerate(options):
        o: dict[str, Any] = {"InstanceType": c.instance_type}
        if c.subnet is not None:
            o["SubnetId"] = c.subnet
        if market == "on-demand":
            o["Priority"] = float(priority)
        elif spec.spot_max_price:
            o["MaxPrice"] = spec.spot_max_price
        overrides.append(o)
    tags = worker_tags(spec, cluster, name)
    args: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": ref, "Overrides": overrides}],
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": market},
        "TagSpecifications": [
            {"ResourceType": "fleet", "Tags": tags},
            {"ResourceType": "instance", "Tags": tags},
        ],
    }
    if market == "spot":
        args["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        args["OnDemandOptions"] = {"AllocationStrategy": "prioritized"}
    args["ClientToken"] = client_token(args, after=after, generation=generation)
    return args


def fleet_choice(error: Mapping[str, Any], market: Market) -> Choice | None:
    """The choice a ``CreateFleet`` error entry is about (its override), if it names one."""
    o = error.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
    if not o.get("InstanceType"):
        return None
    return Choice(str(o["InstanceType"]), o.get("SubnetId"), market)


def _spot_options(spec: LaunchSpec) -> Any:
    spot_opts: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
    if spec.spot_max_price:
        spot_opts["MaxPrice"] = spec.spot_max_price
    return {"MarketType": "spot", "SpotOptions": spot_opts}


def _describe_worker(args: RunInstancesRequestTypeDef, spec: LaunchSpec) -> None:
    """The parts of a ``RunInstances`` request a launch template would otherwise hold."""
    if spec.image_id is None:
        raise CloudError("no AMI and no launch template: set cloud.ec2.ami or cloud.ec2.launch_template")
    args["ImageId"] = spec.image_id
    args["MetadataOptions"] = {"HttpTokens": spec.metadata_tokens, "HttpEndpoint": "enabled"}  # type: ignore[typeddict-item]
    if spec.security_groups:
        args["SecurityGroupIds"] = list(spec.security_groups)
    if spec.key_name:
        args["KeyName"] = spec.key_name
    if spec.iam_instance_profile:
        prof = spec.iam_instance_profile
        args["IamInstanceProfile"] = {"Arn": prof} if prof.startswith("arn:") else {"Name": prof}
    if spec.user_data is not None:
        args["UserData"] = spec.user_data  # boto3 base64-encodes it
    if spec.root_volume_size is not None or spec.root_volume_type is not None:
        if spec.root_device_name is None:
            raise CloudError(f"cannot size the root volume: AMI {spec.image_id} has no root device name")
        ebs: EbsBlockDeviceTypeDef = {"DeleteOnTermination": True}
        if spec.root_volume_size is not None:
            ebs["VolumeSize"] = spec.root_volume_size
        if spec.root_volume_type is not None:
            ebs["VolumeType"] = spec.root_volume_type  # type: ignore[typeddict-item]
        args["BlockDeviceMappings"] = [{"DeviceName": spec.root_device_name, "Ebs": ebs}]
