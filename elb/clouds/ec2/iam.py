"""The IAM policy elb needs, built from the list of calls it makes (``elb.clouds.ec2.contract.CALLS``)
and scoped by the config: the cluster's tags, its launch templates, subnets, images, security
groups and key pair. A feature the config does not have (a warm pool, launch templates, spot
instances, instant fleets, placement groups, EC2's notices, a root volume elb sizes) adds none
of its permissions: the policy is the least the config's calls need.

Every statement but one names resources and, where AWS offers them, tag conditions: launching
(``RunInstances``, ``CreateFleet``) only with elb's tags on the instance and the fleet and only
from the configured template, subnets and images; terminating, stopping and starting only
instances tagged as this cluster's elb workers, and tagging one afterwards with its node group
alone. The exception is the ``Describe`` calls, which
AWS does not scope to resources (the Service Authorization Reference lists no resource type for
them): they can only be given on ``"*"``, and they only read.

``policy(scope, "daemon")`` is elb's own identity (the daemon, ``elb ec2-check``, the
inventory); ``policy(scope, "setup")`` the admin's for ``elb ec2-events setup`` and ``check``.
Pure: the scope is passed in; ``Scope.from_config`` reads it from a config. Unknown parts stay
placeholders (``REGION``, ``ACCOUNT_ID``, ``WORKER_ROLE``) for the admin to fill in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elb.clouds.ec2.config import LaunchTemplate, ec2_settings
from elb.clouds.ec2.contract import CALLS, Caller
from elb.clouds.ec2.groupoptions import ec2_options
from elb.clouds.ec2.notices import RULES, queue_name, rule_name
from elb.clouds.ec2.tags import MANAGED_BY, ROLE_WORKER
from elb.core.config import Config
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_MANAGED_BY, TAG_ROLE

VERSION = "2012-10-17"


@dataclass(frozen=True, slots=True)
class Scope:
    """What the policy is scoped to. An empty tuple: any resource of that type."""

    cluster: str
    region: str = "REGION"
    account: str = "ACCOUNT_ID"
    worker_role: str = "WORKER_ROLE"  # the role in the workers' instance profile
    subnets: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    key_name: str | None = None
    launch_templates: tuple[LaunchTemplate, ...] = ()
    # The features the config has (each True: its permissions are in the policy).
    templates: bool = True  # a launch template (cloud.ec2 or a node group's)
    fleet: bool = True  # a node may be launched by an instant fleet (elb.clouds.ec2.launch_requests.uses_fleet)
    spot: bool = True  # cloud.ec2.spot or a node group of market spot
    warm_pool: bool = True  # policy.warm_pool or a node group's warm pool
    root_volume: bool = True  # cloud.ec2.root_volume_size or _type: the AMI's root device is looked up
    placement_groups: bool = True  # a node group has placement_group: true
    notices: bool = True  # cloud.ec2.notices

    @classmethod
    def generic(cls) -> Scope:
        """Placeholders only, every feature on: docs/iam-policy.json."""
        return cls(cluster="CLUSTER")

    @classmethod
    def from_config(cls, cfg: Config, *, account: str | None = None, worker_role: str | None = None) -> Scope:
        ec2 = ec2_settings(cfg)
        groups = cfg.node_groups or []
        templates = [ec2.launch_template, *(ec2_options(g).launch_template for g in groups)]
        return cls(
            cluster=cfg.cluster.name,
            region=ec2.region or "REGION",
            account=account or "ACCOUNT_ID",
            worker_role=worker_role or "WORKER_ROLE",
            subnets=tuple(ec2.subnets),
            images=(ec2.ami,) if ec2.ami else (),
            security_groups=tuple(ec2.security_groups),
            key_name=ec2.key_name,
            launch_templates=tuple(dict.fromkeys(t for t in templates if t is not None)),
            templates=any(t is not None for t in templates),
            fleet=may_use_fleet(cfg),
            spot=ec2.spot or any(g.market == "spot" for g in groups),
            warm_pool=cfg.has_warm_pool,
            root_volume=ec2.root_volume_size is not None or ec2.root_volume_type is not None,
            placement_groups=any(ec2_options(g).placement_group for g in groups),
            notices=ec2.notices,
        )


def may_use_fleet(cfg: Config) -> bool:
    """Whether a node of ``cfg`` may be launched by an instant fleet: the rule of
    ``elb.clouds.ec2.launch_requests.uses_fleet`` (a launch template and more than one instance type or
    subnet, or spot; never into a placement group) applied to the cluster's way of launching
    and to each node group's (``Ec2Cloud.spec_for``)."""
    ec2 = ec2_settings(cfg)

    def several(types: Sequence[str], spot: bool) -> bool:
        return len(types) > 1 or len(ec2.subnets) > 1 or spot

    if ec2.launch_template is not None and several(ec2.instance_types, ec2.spot):
        return True
    for g in cfg.node_groups or ():
        own = ec2_options(g)
        if own.placement_group or (own.launch_template or ec2.launch_template) is None:
            continue
        types = own.instance_types or (ec2.instance_types if own.launch_template is None else ())
        if several(types, g.market == "spot"):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Statement:
    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    why: str
    condition: Mapping[str, Any] = field(default_factory=dict)

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "Sid": self.sid,
            "Effect": "Allow",
            "Action": list(self.actions) if len(self.actions) > 1 else self.actions[0],
            "Resource": list(self.resources) if len(self.resources) > 1 else self.resources[0],
        }
        if self.condition:
            out["Condition"] = dict(self.condition)
        return out


def _arn(scope: Scope, kind: str, name: str, *, service: str = "ec2", account: str | None = None) -> str:
    acct = scope.account if account is None else account
    return (
        f"arn:aws:{service}:{scope.region}:{acct}:{kind}/{name}"
        if kind
        else f"arn:aws:{service}:{scope.region}:{acct}:{name}"
    )


def _worker_tags(key: str, cluster: str) -> dict[str, str]:
    return {f"{key}/{TAG_CLUSTER}": cluster, f"{key}/{TAG_ROLE}": ROLE_WORKER, f"{key}/{TAG_MANAGED_BY}": MANAGED_BY}


def _each(scope: Scope, kind: str, names: Sequence[str], *, account: str | None = None) -> list[str]:
    return [_arn(scope, kind, n, account=account) for n in names] or [_arn(scope, kind, "*", account=account)]


def _templates(scope: Scope) -> list[str]:
    """A template named by id is scoped to it; one named by name can only be launch-template/*
    (its ARN holds the id; give the id in the config for the narrower policy)."""
    if not scope.launch_templates or any(t.id is None for t in scope.launch_templates):
        return [_arn(scope, "launch-template", "*")]
    return [_arn(scope, "launch-template", str(t.id)) for t in scope.launch_templates]


def _unscoped(caller: Caller, scope: Scope) -> tuple[str, ...]:
    """The unscoped calls of ``caller``, less those of the features ``scope`` lacks."""
    lacking = {
        "ec2:DescribeLaunchTemplateVersions": not scope.templates,
        "ec2:DescribePlacementGroups": not scope.placement_groups,
        "ec2:DescribeImages": not scope.root_volume,
    }
    return tuple(c.action for c in CALLS if c.unscoped and caller in c.callers and not lacking.get(c.action))


def daemon_statements(scope: Scope) -> list[Statement]:
    """elb's own identity: the daemon, ``elb ec2-check`` and the inventory; a feature's statements
    only when ``scope`` has it."""
    return [
        Statement(
            "DescribeCallsAwsDoesNotScope",
            _unscoped("daemon", scope),
            ("*",),
            "read the cluster; AWS gives these Describe calls on * only (no resource types), and they only read",
        ),
        *_launch_statements(scope),
        *_placement_group_statements(scope),
        _tag_at_creation(scope),
        *_fleet_volume_statements(scope),
        _group_tag_statement(scope),
        Statement(
            "TerminateOnlyThisClustersWorkers",
            ("ec2:TerminateInstances",),
            (_arn(scope, "instance", "*"),),
            "only instances tagged as this cluster's elb workers",
            {"StringEquals": _worker_tags("aws:ResourceTag", scope.cluster)},
        ),
        *_warm_pool_statements(scope),
        *_console_statements(scope),
        Statement(
            "PassTheWorkersRole",
            ("iam:PassRole",),
            (f"arn:aws:iam::{scope.account}:role/{scope.worker_role}",),
            "launch workers with their instance profile",
            {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        *_notice_statements(scope),
    ]


def _launches(scope: Scope) -> tuple[str, ...]:
    """The calls that launch: RunInstances, and CreateFleet with instant fleets."""
    return ("ec2:RunInstances", "ec2:CreateFleet") if scope.fleet else ("ec2:RunInstances",)


def _placement_arns(scope: Scope) -> list[str]:
    """The node groups' placement groups, named elb-CLUSTER-GROUP (none without them)."""
    return [_arn(scope, "placement-group", f"elb-{scope.cluster}-*")] if scope.placement_groups else []


def _launch_statements(scope: Scope) -> list[Statement]:
    """A launch: only of tagged workers (and tagged fleets), only from the configured resources."""
    tagged = Statement(
        "LaunchOnlyTaggedWorkers",
        _launches(scope),
        (_arn(scope, "instance", "*"),),
        "an instance only with this cluster's elb worker tags at creation",
        {"StringEquals": _worker_tags("aws:RequestTag", scope.cluster)},
    )
    fleets = [
        Statement(
            "LaunchOnlyTaggedFleets",
            ("ec2:CreateFleet",),
            (_arn(scope, "fleet", "*"),),
            "an instant fleet only with this cluster's elb tags",
            {"StringEquals": _worker_tags("aws:RequestTag", scope.cluster)},
        )
    ]
    return [tagged, *(fleets if scope.fleet else []), _launch_resources(scope)]


def _launch_resources(scope: Scope) -> Statement:
    """The resources a launch may use: the configured images, subnets, groups, key and templates,
    the placement groups, and the node's own volume, interface and spot request."""
    images = [f"arn:aws:ec2:{scope.region}::image/{i}" for i in scope.images] or [
        f"arn:aws:ec2:{scope.region}::image/*",
        _arn(scope, "image", "*"),
    ]
    placement = _placement_arns(scope)
    return Statement(
        "LaunchFromTheseResources",
        _launches(scope),
        tuple(
            [
                *images,
                *_each(scope, "subnet", scope.subnets),
                *_each(scope, "security-group", scope.security_groups),
                *_each(scope, "key-pair", [scope.key_name] if scope.key_name else []),
                *(_templates(scope) if scope.templates else []),
                *placement,
                _arn(scope, "network-interface", "*"),
                _arn(scope, "volume", "*"),
                *([_arn(scope, "spot-instances-request", "*")] if scope.spot else []),
            ]
        ),
        "the configured images, subnets, groups, key"
        + (" and launch templates" if scope.templates else "")
        + (", the node groups' placement groups" if placement else "")
        + "; the node's own volume, interface"
        + (", spot request" if scope.spot else "")
        + (" (volumes carry no tag condition: an instant fleet tags them after launch)" if scope.fleet else ""),
    )


def _placement_group_statements(scope: Scope) -> list[Statement]:
    """With node groups in placement groups: making them."""
    if not scope.placement_groups:
        return []
    return [
        Statement(
            "PlacementGroupsOfNodeGroups",
            ("ec2:CreatePlacementGroup",),
            (_arn(scope, "placement-group", f"elb-{scope.cluster}-*"),),
            "a node group's cluster placement group, named elb-CLUSTER-GROUP",
        )
    ]


def _tag_at_creation(scope: Scope) -> Statement:
    """Tags only as part of a launch (or of a placement group's creation)."""
    placement = _placement_arns(scope)
    created_by = [
        "RunInstances",
        *(["CreateFleet"] if scope.fleet else []),
        *(["CreatePlacementGroup"] * bool(placement)),
    ]
    return Statement(
        "TagOnlyAtCreation",
        ("ec2:CreateTags",),
        (
            _arn(scope, "instance", "*"),
            _arn(scope, "volume", "*"),
            *([_arn(scope, "fleet", "*")] if scope.fleet else []),
            *placement,
        ),
        "tags only as part of the launch" + (" (or of a node group's placement group)" if placement else ""),
        {"StringEquals": {"ec2:CreateAction": created_by}},
    )


def _fleet_volume_statements(scope: Scope) -> list[Statement]:
    """With instant fleets: tagging a fleet node's volumes once it runs."""
    if not scope.fleet:
        return []
    cluster = scope.cluster
    return [
        Statement(
            "TagTheVolumesOfFleetWorkers",
            ("ec2:CreateTags",),
            (_arn(scope, "volume", "*"),),
            "a fleet node's volumes get its tags once it runs: only elb's worker tags, only on volumes the "
            f"launch template tagged {TAG_CLUSTER}={cluster} at creation (an instant fleet cannot tag them)",
            {
                "StringEquals": {
                    **_worker_tags("aws:RequestTag", cluster),
                    f"aws:ResourceTag/{TAG_CLUSTER}": cluster,
                }
            },
        )
    ]


def _group_tag_statement(scope: Scope) -> Statement:
    """A worker launched before elb tagged its node group gets that tag afterwards: the one tag
    key, only on this cluster's elb workers."""
    return Statement(
        "TagTheGroupOfThisClustersWorkers",
        ("ec2:CreateTags",),
        (_arn(scope, "instance", "*"),),
        f"a worker launched before elb tagged its node group gets {TAG_GROUP}, no other tag, only on instances "
        "tagged as this cluster's elb workers",
        {
            "StringEquals": _worker_tags("aws:ResourceTag", scope.cluster),
            "ForAllValues:StringEquals": {"aws:TagKeys": [TAG_GROUP]},
        },
    )


def _warm_pool_statements(scope: Scope) -> list[Statement]:
    """With a warm pool: stopping and starting the cluster's workers."""
    if not scope.warm_pool:
        return []
    return [
        Statement(
            "StopAndStartOnlyThisClustersWorkers",
            ("ec2:StopInstances", "ec2:StartInstances"),
            (_arn(scope, "instance", "*"),),
            "a warm pool's stops and starts, only on this cluster's elb workers",
            {"StringEquals": _worker_tags("aws:ResourceTag", scope.cluster)},
        )
    ]


def _console_statements(scope: Scope) -> list[Statement]:
    """With launch templates: reading a worker's console for its SSH host key."""
    if not scope.templates:
        return []
    return [
        Statement(
            "ReadOnlyThisClustersWorkersConsoles",
            ("ec2:GetConsoleOutput",),
            (_arn(scope, "instance", "*"),),
            "the SSH host key of a worker launched from a template, which cloud-init prints on its console",
            {"StringEquals": _worker_tags("aws:ResourceTag", scope.cluster)},
        )
    ]


def _notice_statements(scope: Scope) -> list[Statement]:
    """With notices: reading the cluster's notice queue."""
    if not scope.notices:
        return []
    return [
        Statement(
            "ReadTheNoticeQueue",
            ("sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"),
            (_arn(scope, "", queue_name(scope.cluster), service="sqs"),),
            "EC2's notices (cloud.ec2.notices), from this cluster's queue only",
        )
    ]


def setup_statements(scope: Scope) -> list[Statement]:
    """An admin's, once: ``elb ec2-events setup`` and ``check``."""
    cluster = scope.cluster
    return [
        Statement(
            "MakeTheNoticeQueue",
            ("sqs:CreateQueue", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes"),
            (_arn(scope, "", queue_name(cluster), service="sqs"),),
            "this cluster's notice queue and its policy",
        ),
        Statement(
            "MakeTheNoticeRules",
            ("events:PutRule", "events:PutTargets", "events:DescribeRule", "events:ListTargetsByRule"),
            tuple(_arn(scope, "rule", rule_name(cluster, suffix), service="events") for suffix in RULES),
            "one EventBridge rule per kind of notice, aimed at the queue",
        ),
    ]


def statements(scope: Scope, caller: Caller = "daemon") -> list[Statement]:
    return daemon_statements(scope) if caller == "daemon" else setup_statements(scope)


def policy(scope: Scope, caller: Caller = "daemon") -> dict[str, Any]:
    """The policy document."""
    return {"Version": VERSION, "Statement": [s.render() for s in statements(scope, caller)]}


def render_json(scope: Scope, caller: Caller = "daemon") -> str:
    return json.dumps(policy(scope, caller), indent=2) + "\n"


def render_text(scope: Scope, caller: Caller = "daemon") -> str:
    """One block per statement: its actions, resources, conditions and why."""
    lines: list[str] = []
    for s in statements(scope, caller):
        lines.append(f"{s.sid}: {', '.join(s.actions)}")
        lines.append(f"  why: {s.why}")
        for r in s.resources:
            lines.append(f"  on {r}")
        for op, conds in s.condition.items():
            for key, value in conds.items():
                lines.append(f"  if {op} {key} = {value if isinstance(value, str) else ', '.join(value)}")
    words = (
        ("CLUSTER", "REGION", "ACCOUNT_ID", "WORKER_ROLE")
        if scope == Scope.generic()
        else ("REGION", "ACCOUNT_ID", "WORKER_ROLE")
    )
    placeholders = [p for p in words if p in render_json(scope, caller)]
    if placeholders:
        lines.append(f"placeholders to replace: {', '.join(placeholders)} (see elb iam-policy --help)")
    return "\n".join(lines) + "\n"
