"""Every AWS request elb makes, and the documented rules of AWS's APIs that elb relies on.

moto, elb's stand-in for AWS in tests, accepts requests that AWS refuses. So the calls are listed
here as data (``CALLS``: service, operation, who makes it, why, whether AWS can scope its
permission) and the rules AWS documents for them (``CONSTRAINTS``: each with the API reference
page and section it comes from, and a check). ``elb.clouds.ec2.iam`` builds the IAM policy from
``CALLS``; tests/unit/test_ec2_contract.py checks that the code calls nothing outside
``CALLS``, that the requests it sends (tests/fixtures/ec2/golden/) pass botocore's validation
against the service model, and each row of ``CONSTRAINTS`` on them. docs/ec2.md has the table.

Pure data and pure checks: nothing here talks to AWS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Service = Literal["ec2", "sqs", "events"]
# daemon: elb's own identity (the daemon, ec2-check, the inventory); setup: an admin running
# ``elb ec2-events setup`` / ``check`` once.
Caller = Literal["daemon", "setup"]


@dataclass(frozen=True, slots=True)
class Call:
    """One AWS API operation elb calls."""

    service: Service
    operation: str  # the API's name, e.g. "RunInstances"
    callers: tuple[Caller, ...]
    why: str
    # AWS does not scope this action to resources (the Service Authorization Reference lists no
    # resource type for it): the policy can only give it on "*".
    unscoped: bool = False

    @property
    def action(self) -> str:
        """The IAM action that allows it."""
        return f"{self.service}:{self.operation}"


CALLS: tuple[Call, ...] = (
    Call("ec2", "DescribeInstances", ("daemon",), "list workers, find the newest worker, wait for boots", True),
    Call("ec2", "DescribeInstanceStatus", ("daemon",), "the workers' status checks", True),
    Call("ec2", "DescribeInstanceTypes", ("daemon",), "an instance type's vCPUs (slots)", True),
    Call("ec2", "DescribeImages", ("daemon",), "the AMI's root device (root_volume_size)", True),
    Call("ec2", "DescribeLaunchTemplateVersions", ("daemon",), "the template's type, version, IMDSv2", True),
    Call("ec2", "DescribePlacementGroups", ("daemon",), "a node group's placement group", True),
    Call("ec2", "CreatePlacementGroup", ("daemon",), "make a node group's placement group"),
    Call("ec2", "RunInstances", ("daemon",), "launch a worker (and the instant fleet's launches)"),
    Call("ec2", "CreateFleet", ("daemon",), "launch a worker by an instant EC2 Fleet"),
    Call(
        "ec2",
        "CreateTags",
        ("daemon",),
        "tags at creation; a fleet node's volumes once it runs; the node group tag of a worker launched before "
        "elb set it",
    ),
    Call("ec2", "TerminateInstances", ("daemon",), "terminate a worker"),
    Call("ec2", "StopInstances", ("daemon",), "stop a worker into a warm pool"),
    Call("ec2", "StartInstances", ("daemon",), "start a warm pool's worker"),
    Call("ec2", "GetConsoleOutput", ("daemon",), "a launch template node's SSH host key, as cloud-init prints it"),
    Call("sqs", "GetQueueUrl", ("daemon", "setup"), "find the notice queue"),
    Call("sqs", "ReceiveMessage", ("daemon",), "read EC2's notices"),
    Call("sqs", "DeleteMessage", ("daemon",), "drop a notice once read"),
    Call("sqs", "CreateQueue", ("setup",), "make the notice queue"),
    Call("sqs", "GetQueueAttributes", ("setup",), "the queue's ARN and policy"),
    Call("sqs", "SetQueueAttributes", ("setup",), "the queue policy: only elb's rules may send"),
    Call("events", "PutRule", ("setup",), "one rule per kind of notice"),
    Call("events", "PutTargets", ("setup",), "aim a rule at the queue"),
    Call("events", "DescribeRule", ("setup",), "ec2-events check: the rule is enabled"),
    Call("events", "ListTargetsByRule", ("setup",), "ec2-events check: the rule targets the queue"),
)


def call(service: str, operation: str) -> Call | None:
    return next((c for c in CALLS if (c.service, c.operation) == (service, operation)), None)


# --------------------------------------------------------------------------- constraints

Check = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True, slots=True)
class Constraint:
    """One documented rule of an AWS API that elb's requests must keep."""

    id: str
    operations: tuple[str, ...]  # "service:Operation"
    source: str  # the API reference page and section
    rule: str
    check: Check  # the problems of one request (empty: kept)
    # A request of ``operations`` changed to break the rule: the test shows ``check`` sees it.
    broken: Callable[[dict[str, Any]], dict[str, Any]]


def _tag_specs(req: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(req.get("TagSpecifications", []))


def _all_tags(req: Mapping[str, Any]) -> Iterator[list[Mapping[str, str]]]:
    for ts in _tag_specs(req):
        yield list(ts.get("Tags", []))
    if "Tags" in req and isinstance(req["Tags"], list):
        yield list(req["Tags"])


def _template_refs(req: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = [req["LaunchTemplate"]] if "LaunchTemplate" in req else []
    refs += [c["LaunchTemplateSpecification"] for c in req.get("LaunchTemplateConfigs", [])]
    return refs


def _check_fleet_tag_types(req: Mapping[str, Any]) -> list[str]:
    if req.get("Type") != "instant":
        return []
    bad = [ts.get("ResourceType") for ts in _tag_specs(req) if ts.get("ResourceType") not in ("fleet", "instance")]
    return [f"an instant fleet cannot tag {t!r} at creation" for t in bad]


def _check_run_tag_types(req: Mapping[str, Any]) -> list[str]:
    allowed = ("instance", "volume", "network-interface", "spot-instances-request")
    return [
        f"RunInstances cannot tag {ts.get('ResourceType')!r}"
        for ts in _tag_specs(req)
        if ts.get("ResourceType") not in allowed
    ]


def _check_token(req: Mapping[str, Any]) -> list[str]:
    tok = req.get("ClientToken")
    if not isinstance(tok, str) or not tok:
        return ["no ClientToken: a retried launch could start a second instance"]
    if len(tok) > 64 or not tok.isascii():
        return [f"ClientToken {tok!r} is not at most 64 ASCII characters"]
    return []


def _check_one_instance(req: Mapping[str, Any]) -> list[str]:
    if (req.get("MinCount"), req.get("MaxCount")) != (1, 1):
        return [f"MinCount/MaxCount {req.get('MinCount')}/{req.get('MaxCount')}: one node is one instance"]
    return []


def _check_one_time_spot(req: Mapping[str, Any]) -> list[str]:
    opts = req.get("InstanceMarketOptions")
    if opts is None:
        return []
    spot = opts.get("SpotOptions", {})
    if opts.get("MarketType") != "spot":
        return [f"MarketType {opts.get('MarketType')!r}"]
    kind, behaviour = spot.get("SpotInstanceType"), spot.get("InstanceInterruptionBehavior")
    if kind != "one-time" or behaviour != "terminate":
        return [f"spot {kind}/{behaviour}: elb asks one-time requests, which only terminate"]
    return []


def _check_imdsv2(req: Mapping[str, Any]) -> list[str]:
    if "LaunchTemplate" in req:
        return []  # the template's metadata options apply (elb ec2-check reads them)
    tokens = req.get("MetadataOptions", {}).get("HttpTokens")
    if tokens not in ("required", "optional"):
        return [f"MetadataOptions.HttpTokens {tokens!r}: elb states it on every worker it describes"]
    return []


def _check_image_or_template(req: Mapping[str, Any]) -> list[str]:
    if ("ImageId" in req) == ("LaunchTemplate" in req):
        return ["exactly one of ImageId and LaunchTemplate: elb either describes the worker or names the template"]
    if "LaunchTemplate" in req:
        # UserData is the one a request may give beside a template: a node's boot, the template's
        # own user data first in it (EC2 takes the request's over the template's).
        owned = [k for k in ("ImageId", "SecurityGroupIds", "KeyName", "IamInstanceProfile") if k in req]
        if owned:
            return [f"{', '.join(owned)} beside a launch template: the template owns them"]
    return []


def _check_template_ref(req: Mapping[str, Any]) -> list[str]:
    out = []
    for ref in _template_refs(req):
        if ("LaunchTemplateId" in ref) == ("LaunchTemplateName" in ref):
            out.append("a launch template by its id or its name, not both")
        if not re.fullmatch(r"\$Latest|\$Default|[1-9][0-9]*", str(ref.get("Version", ""))):
            out.append(f"launch template version {ref.get('Version')!r}")
    return out


def _check_instant_fleet(req: Mapping[str, Any]) -> list[str]:
    out = []
    if req.get("Type") != "instant":
        out.append(f"fleet type {req.get('Type')!r}: only an instant fleet answers with its instances")
    target = req.get("TargetCapacitySpecification", {})
    if target.get("TotalTargetCapacity") != 1:
        out.append("a fleet per node asks for one instance")
    market = target.get("DefaultTargetCapacityType")
    if market == "spot" and "SpotOptions" not in req:
        out.append("a spot fleet without SpotOptions")
    if market == "on-demand" and "OnDemandOptions" not in req:
        out.append("an on-demand fleet without OnDemandOptions")
    return out


def _check_priorities(req: Mapping[str, Any]) -> list[str]:
    if req.get("OnDemandOptions", {}).get("AllocationStrategy") != "prioritized":
        return []
    out = []
    for cfg in req.get("LaunchTemplateConfigs", []):
        prios = [o.get("Priority") for o in cfg.get("Overrides", [])]
        if any(p is None for p in prios):
            out.append("prioritized without a Priority on every override: EC2 puts those last")
        elif prios != sorted(prios) or len(set(prios)) != len(prios):
            out.append(f"priorities {prios} do not follow elb's order (lower goes first)")
    return out


def _check_tags(req: Mapping[str, Any]) -> list[str]:
    out = []
    for tags in _all_tags(req):
        if len(tags) > 50:
            out.append(f"{len(tags)} tags on one resource (at most 50)")
        for t in tags:
            key, value = str(t.get("Key", "")), str(t.get("Value", ""))
            if not 1 <= len(key) <= 128 or len(value) > 256:
                out.append(f"tag {key[:20]!r}: key 1-128, value at most 256 characters")
            if key.lower().startswith("aws:"):
                out.append(f"tag {key!r}: the aws: prefix is AWS's")
    return out


def _check_status_batch(req: Mapping[str, Any]) -> list[str]:
    ids = req.get("InstanceIds", [])
    return [f"{len(ids)} instance ids (at most 100)"] if len(ids) > 100 else []


def _check_terminate_batch(req: Mapping[str, Any]) -> list[str]:
    ids = req.get("InstanceIds", [])
    return [f"{len(ids)} instance ids (at most 1000)"] if len(ids) > 1000 else []


def _check_create_tags(req: Mapping[str, Any]) -> list[str]:
    n = len(req.get("Resources", []))
    return [] if 1 <= n <= 1000 else [f"{n} resources (1 to 1000)"]


def _check_receive(req: Mapping[str, Any]) -> list[str]:
    out = []
    if not 1 <= int(req.get("MaxNumberOfMessages", 1)) <= 10:
        out.append(f"MaxNumberOfMessages {req.get('MaxNumberOfMessages')} (1 to 10)")
    if not 0 <= int(req.get("WaitTimeSeconds", 0)) <= 20:
        out.append(f"WaitTimeSeconds {req.get('WaitTimeSeconds')} (0 to 20)")
    return out


def _check_queue_name(req: Mapping[str, Any]) -> list[str]:
    name = str(req.get("QueueName", ""))
    return [] if re.fullmatch(r"[A-Za-z0-9_-]{1,80}", name) else [f"queue name {name!r}"]


def _check_rule_names(req: Mapping[str, Any]) -> list[str]:
    names = [req[k] for k in ("Name", "Rule") if k in req] + [t.get("Id") for t in req.get("Targets", [])]
    return [f"name {n!r}: 1-64 of [.-_A-Za-z0-9]" for n in names if not re.fullmatch(r"[.\-_A-Za-z0-9]{1,64}", str(n))]


def _check_placement_group(req: Mapping[str, Any]) -> list[str]:
    name = str(req.get("GroupName", ""))
    out = [] if 1 <= len(name) <= 255 and name.isascii() else [f"group name {name!r}: at most 255 ASCII"]
    out += [
        f"cannot tag {ts.get('ResourceType')!r}"
        for ts in _tag_specs(req)
        if ts.get("ResourceType") != "placement-group"
    ]
    return out


def _set(path: Sequence[str | int], value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A change of ``request`` at ``path`` (for ``Constraint.broken``)."""

    def change(request: dict[str, Any]) -> dict[str, Any]:
        node: Any = request
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
        return request

    return change


def _add_volume_tags(request: dict[str, Any]) -> dict[str, Any]:
    request["TagSpecifications"].append({"ResourceType": "volume", "Tags": request["TagSpecifications"][0]["Tags"]})
    return request


def _describe_and_name(request: dict[str, Any]) -> dict[str, Any]:
    if "ImageId" in request:
        request["LaunchTemplate"] = {"LaunchTemplateName": "workers", "Version": "$Default"}
    else:
        request["ImageId"] = "ami-0123456789abcdef0"
    return request


def _unprioritize(request: dict[str, Any]) -> dict[str, Any]:
    for o in request["LaunchTemplateConfigs"][0]["Overrides"]:
        o.pop("Priority", None)
    return request


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(
        "fleet-instant-tag-types",
        ("ec2:CreateFleet",),
        "EC2 API Reference, CreateFleet, Request Parameters: TagSpecifications",
        "An instant fleet tags resource types fleet and instance only; volumes are tagged through the "
        "launch template or afterwards (elb: CreateTags once the node runs).",
        _check_fleet_tag_types,
        _add_volume_tags,
    ),
    Constraint(
        "run-tag-types",
        ("ec2:RunInstances",),
        "EC2 API Reference, RunInstances, Request Parameters: TagSpecifications",
        "RunInstances tags at launch instances, volumes, network interfaces and spot requests only.",
        _check_run_tag_types,
        _set(("TagSpecifications", 0, "ResourceType"), "fleet"),
    ),
    Constraint(
        "client-token",
        ("ec2:RunInstances", "ec2:CreateFleet"),
        "EC2 API Reference, RunInstances and CreateFleet, Request Parameters: ClientToken; EC2 Developer "
        "Guide, Ensuring idempotency in Amazon EC2 API requests: Idempotency in Amazon EC2",
        "Every launch carries a ClientToken of at most 64 ASCII characters; one token with other "
        "parameters is refused (IdempotentParameterMismatch), so elb's token is a digest of the request.",
        _check_token,
        _set(("ClientToken",), "elb-" + "0" * 61),
    ),
    Constraint(
        "run-one-instance",
        ("ec2:RunInstances",),
        "EC2 API Reference, RunInstances, Request Parameters: MinCount, MaxCount",
        "MinCount and MaxCount are at least 1 and MinCount <= MaxCount; elb asks 1 and 1 (one node, one "
        "instance, one Name tag).",
        _check_one_instance,
        _set(("MaxCount",), 2),
    ),
    Constraint(
        "one-time-spot",
        ("ec2:RunInstances",),
        "EC2 API Reference, SpotMarketOptions, Contents: SpotInstanceType, InstanceInterruptionBehavior; "
        "EC2 User Guide, Behavior of Spot Instance interruptions",
        "For RunInstances a persistent spot request must stop or hibernate, and stopping needs a "
        "persistent request; elb asks one-time requests that terminate.",
        _check_one_time_spot,
        _set(("InstanceMarketOptions", "SpotOptions", "InstanceInterruptionBehavior"), "stop"),
    ),
    Constraint(
        "imdsv2",
        ("ec2:RunInstances",),
        "EC2 API Reference, InstanceMetadataOptionsRequest, Contents: HttpTokens",
        "Left out, HttpTokens follows the AMI's or the account's default; elb states it on every worker "
        "it describes itself (required unless metadata_tokens: optional).",
        _check_imdsv2,
        _set(("MetadataOptions",), {"HttpEndpoint": "enabled"}),
    ),
    Constraint(
        "image-or-template",
        ("ec2:RunInstances",),
        "EC2 API Reference, RunInstances, Request Parameters: ImageId, LaunchTemplate",
        "An AMI is named in the request or in the launch template; with a template elb sets only the "
        "type, subnet, market and tags, and the user data of a node that configures itself at boot "
        "(the request's replaces the template's).",
        _check_image_or_template,
        _describe_and_name,
    ),
    Constraint(
        "template-reference",
        ("ec2:RunInstances", "ec2:CreateFleet"),
        "EC2 API Reference, LaunchTemplateSpecification and FleetLaunchTemplateSpecificationRequest, "
        "Contents: LaunchTemplateId, LaunchTemplateName, Version",
        "A launch template by its id or its name, not both; the version is $Latest, $Default or a number.",
        _check_template_ref,
        _set(("LaunchTemplateConfigs", 0, "LaunchTemplateSpecification", "LaunchTemplateName"), "workers"),
    ),
    Constraint(
        "instant-fleet",
        ("ec2:CreateFleet",),
        "EC2 API Reference, CreateFleet, Request Parameters: Type, TargetCapacitySpecification; Response "
        "Elements: Instances",
        "Only an instant fleet answers with the instances it launched; elb asks one instance per fleet, "
        "with the options of its market.",
        _check_instant_fleet,
        _set(("Type",), "request"),
    ),
    Constraint(
        "prioritized-overrides",
        ("ec2:CreateFleet",),
        "EC2 API Reference, OnDemandOptionsRequest, Contents: AllocationStrategy; "
        "FleetLaunchTemplateOverridesRequest, Contents: Priority",
        "With prioritized on-demand allocation EC2 takes the override of the lowest Priority first; an "
        "override without one comes last. elb numbers them in its order of preference.",
        _check_priorities,
        _unprioritize,
    ),
    Constraint(
        "tag-limits",
        ("ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateTags", "ec2:CreatePlacementGroup"),
        "EC2 API Reference, Tag, Contents: Key, Value; EC2 User Guide, Tag your Amazon EC2 resources: Tag restrictions",
        "At most 50 tags per resource; keys 1-128 characters, values at most 256; the aws: prefix is reserved "
        "(Ec2Cloud refuses extra_tags that would break it).",
        _check_tags,
        _set(("TagSpecifications", 0, "Tags", 0, "Key"), "aws:elb"),
    ),
    Constraint(
        "instance-status-batch",
        ("ec2:DescribeInstanceStatus",),
        "EC2 API Reference, DescribeInstanceStatus, Request Parameters: InstanceId.N",
        "At most 100 explicitly named instance ids per call (elb.clouds.ec2.health.STATUS_BATCH).",
        _check_status_batch,
        _set(("InstanceIds",), [f"i-{n:017x}" for n in range(101)]),
    ),
    Constraint(
        "terminate-batch",
        ("ec2:TerminateInstances",),
        "EC2 API Reference, TerminateInstances, Request Parameters: InstanceId.N",
        "Up to 1000 instance ids per call (elb.clouds.ec2.lifecycle.TERMINATE_BATCH).",
        _check_terminate_batch,
        _set(("InstanceIds",), [f"i-{n:017x}" for n in range(1001)]),
    ),
    Constraint(
        "create-tags-batch",
        ("ec2:CreateTags",),
        "EC2 API Reference, CreateTags, Request Parameters: ResourceId.N",
        "Up to 1000 resource ids per call (elb.clouds.ec2.tags.TAG_BATCH).",
        _check_create_tags,
        _set(("Resources",), []),
    ),
    Constraint(
        "placement-group",
        ("ec2:CreatePlacementGroup",),
        "EC2 API Reference, CreatePlacementGroup, Request Parameters: GroupName, TagSpecification.N",
        "A group name of at most 255 ASCII characters; its tags at creation are of type placement-group.",
        _check_placement_group,
        _set(("GroupName",), "g" * 256),
    ),
    Constraint(
        "sqs-receive",
        ("sqs:ReceiveMessage",),
        "SQS API Reference, ReceiveMessage, Request Parameters: MaxNumberOfMessages, WaitTimeSeconds",
        "1 to 10 messages per call; a wait of 0 to 20 seconds (elb: no wait).",
        _check_receive,
        _set(("MaxNumberOfMessages",), 50),
    ),
    Constraint(
        "sqs-queue-name",
        ("sqs:CreateQueue", "sqs:GetQueueUrl"),
        "SQS API Reference, CreateQueue, Request Parameters: QueueName",
        "A queue name is 1 to 80 alphanumerics, hyphens and underscores.",
        _check_queue_name,
        _set(("QueueName",), "elb-" + "x" * 80),
    ),
    Constraint(
        "eventbridge-names",
        ("events:PutRule", "events:PutTargets", "events:DescribeRule", "events:ListTargetsByRule"),
        "EventBridge API Reference, PutRule, Request Parameters: Name; Target data type, Contents: Id",
        "Rule names and target ids are 1 to 64 of [.-_A-Za-z0-9] (botocore checks neither; elb shortens "
        "a long cluster name's rule names with a digest).",
        _check_rule_names,
        _set(("Name",), "elb-" + "x" * 64),
    ),
)


def problems(service: str, operation: str, request: Mapping[str, Any]) -> list[str]:
    """Every documented rule ``request`` breaks (``CONSTRAINTS`` of its operation)."""
    op = f"{service}:{operation}"
    return [f"{c.id}: {p}" for c in CONSTRAINTS if op in c.operations for p in c.check(request)]


def calls_table() -> str:
    """``CALLS`` as the Markdown table docs/ec2.md shows."""
    rows = ["| call | made by | why | IAM scope |", "|---|---|---|---|"]
    for c in CALLS:
        scope = "`*` (AWS does not scope it)" if c.unscoped else "its resources"
        rows.append(f"| `{c.action}` | {', '.join(c.callers)} | {c.why} | {scope} |")
    return "\n".join(rows) + "\n"


def constraints_table() -> str:
    """``CONSTRAINTS`` as the Markdown table docs/ec2.md shows."""
    rows = ["| rule | calls | what elb relies on | source |", "|---|---|---|---|"]
    for c in CONSTRAINTS:
        calls = ", ".join(f"`{o}`" for o in c.operations)
        rows.append(f"| `{c.id}` | {calls} | {c.rule} | {c.source} |")
    return "\n".join(rows) + "\n"
