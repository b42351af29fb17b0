"""``elb ec2-check`` and ``elb validate``'s EC2 checks: credentials, settings and permissions,
tried without starting or stopping anything (``preflight``).

Each call that would change something is sent with ``DryRun=True``: EC2 checks the IAM policy
(tag conditions and ``iam:PassRole`` included) and the parameters, and answers a permitted one
with the error ``DryRunOperation``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.config import LaunchTemplate
from elb.clouds.ec2.errors import error_code, to_cloud_error
from elb.clouds.ec2.launch_requests import LaunchSpec, choices, fleet_arguments, run_arguments, uses_fleet
from elb.clouds.ec2.tags import group_tag_arguments
from elb.clouds.ec2.user_data import node_user_data
from elb.core.interfaces import TAG_GROUP, CloudError, Instance, NodeBoot

if TYPE_CHECKING:
    from elb.clouds.ec2.cloud import Ec2Cloud


@dataclass(frozen=True, slots=True)
class Check:
    """One line of ``elb ec2-check``."""

    what: str
    ok: bool
    detail: str


def _dry_run(call: Callable[[], object], what: str) -> Check:
    """EC2 answers a permitted dry run with the error DryRunOperation."""
    try:
        call()
    except ClientError as err:
        if error_code(err) == "DryRunOperation":
            return Check(what, True, "allowed")
        return Check(what, False, str(to_cloud_error(err, what)))
    except BotoCoreError as err:
        return Check(what, False, str(to_cloud_error(err, what)))
    return Check(what, False, "the dry run was not refused: the endpoint ignores DryRun")


def _group_tag_check(cloud: Ec2Cloud, iid: str) -> Check:
    """The tag the daemon gives a worker launched before elb tagged its node group (``tag_groups``),
    tried with ``DryRun`` on ``iid``: the IAM policy must allow it (an older policy does not)."""
    group = cloud.node_groups.groups[0].name if cloud.node_groups is not None else "default"
    (kwargs,) = group_tag_arguments({iid: group})
    return _dry_run(
        lambda: cloud.client.create_tags(**kwargs, DryRun=True),
        f"tag a worker launched before {TAG_GROUP} with its node group (CreateTags on {iid})",
    )


def _image_or_template(spec: LaunchSpec) -> str:
    t = spec.launch_template
    if t is None:
        return str(spec.image_id)
    return f"launch template {t.id or t.name} version {t.version}"


def imds_problem(template: LaunchTemplate, data: Mapping[str, Any]) -> str | None:
    """Why a launch template version's data lets a worker use IMDSv1, with the fix; None when
    it requires IMDSv2 (``MetadataOptions.HttpTokens: required``). Pure."""
    tokens = data.get("MetadataOptions", {}).get("HttpTokens")
    if tokens == "required":
        return None
    which = f"--launch-template-id {template.id}" if template.id else f"--launch-template-name {template.name}"
    said = f"is {tokens!r}" if tokens else "is not set (the AMI's or the account's default applies)"
    return (
        f"MetadataOptions.HttpTokens {said}, so a worker answers IMDSv1 requests; elb requires 'required': "
        f"aws ec2 create-launch-template-version {which} --source-version {template.version} "
        """--launch-template-data '{"MetadataOptions":{"HttpTokens":"required"}}', then make it the """
        "default (aws ec2 modify-launch-template --default-version N) or name it in version:"
    )


def template_imds_check(template: LaunchTemplate, cloud: Ec2Cloud) -> Check:
    """One ``elb ec2-check`` line: does the launch template version require IMDSv2?"""
    what = f"IMDSv2 in launch template {template.id or template.name} version {template.version}"
    try:
        version = cloud.template_version(template)
    except CloudError as err:
        return Check(what, False, str(err))
    problem = imds_problem(template, version.get("LaunchTemplateData", {}))
    return Check(what, problem is None, problem or "HttpTokens required")


# What the preflight's dry run gives a template's node that configures itself at boot: a boot of
# the right shape (a file, a command); the node's own is made at its launch.
PREFLIGHT_BOOT = NodeBoot(files={"/etc/elb/boot-inventory.yml": "{}\n"}, argv=("/bin/true",))


def preflight(cloud: Ec2Cloud, *, warm_pool: bool, boot: bool = False) -> list[Check]:
    """Check credentials, settings and permissions without starting or stopping anything.

    Each launch template the config names must require IMDSv2 (``imds_problem``).
    ``RunInstances``, ``TerminateInstances``, ``CreateTags`` of a worker's node group when one
    lacks it (``tag_groups``) and, with a ``warm_pool`` (which the config's IAM
    policy then allows), ``StopInstances`` and ``StartInstances`` are called with ``DryRun=True``: EC2 checks the
    IAM policy (tag conditions and ``iam:PassRole`` included) and the parameters, and starts nothing.
    ``boot`` (``provision.mode: boot``): a launch template's nodes are launched with user data of
    their own (``RunInstances``, the template's user data first), and that is what is tried.
    """
    checks: list[Check] = []
    try:
        workers = cloud.list_workers()
    except CloudError as err:
        return [Check("read the cluster (DescribeInstances)", False, str(err))]
    checks.append(Check("read the cluster (DescribeInstances)", True, f"{len(workers)} elb workers running"))
    try:
        spec = cloud.launch_spec()
        if boot and spec.launch_template is not None:
            site = cloud.template_user_data(spec.launch_template)
            spec = dataclasses.replace(spec, user_data=node_user_data(site, None, PREFLIGHT_BOOT))
    except (CloudError, ValueError) as err:
        checks.append(Check("launch settings", False, str(err)))
        return checks
    subnets = ", ".join(s or "default" for s in spec.subnets)
    checks.append(
        Check(
            "launch settings",
            True,
            f"{_image_or_template(spec)}; types {', '.join(spec.instance_types)}; subnets {subnets}"
            + ("; spot" if spec.spot else "")
            + ("; launched by CreateFleet" if uses_fleet(spec) else ""),
        )
    )
    checks += _launch_checks(cloud, spec)
    checks += _worker_checks(cloud, workers, warm_pool=warm_pool)
    return checks


def _launch_checks(cloud: Ec2Cloud, spec: LaunchSpec) -> list[Check]:
    """The preflight's checks of a launch: the first choice's slots, each launch template's IMDS
    setting, and the launch itself with ``DryRun=True`` (``CreateFleet`` or ``RunInstances``)."""
    checks: list[Check] = []
    first = choices(spec)[0]
    try:
        checks.append(Check("slots (DescribeInstanceTypes)", True, f"{cloud.slots_for(first.instance_type)}"))
    except CloudError as err:
        checks.append(Check("slots (DescribeInstanceTypes)", False, str(err)))
    for template in cloud.launch_templates():
        checks.append(template_imds_check(template, cloud))
    if uses_fleet(spec):
        options = [c for c in choices(spec) if c.market == first.market]
        fleet = fleet_arguments(spec, options, cloud.cluster, "elb-preflight")
        fleet["DryRun"] = True
        checks.append(_dry_run(lambda: cloud.client.create_fleet(**fleet), "launch a worker (CreateFleet)"))
    else:
        args = run_arguments(spec, first, cloud.cluster, "elb-preflight")
        args["DryRun"] = True
        checks.append(_dry_run(lambda: cloud.client.run_instances(**args), "launch a worker (RunInstances)"))
    return checks


def _worker_checks(cloud: Ec2Cloud, workers: Sequence[Instance], *, warm_pool: bool) -> list[Check]:
    """The preflight's checks on a running worker, with ``DryRun=True``: its termination, with a
    ``warm_pool`` its stop and start, and its node group's tag where one lacks it; none tried
    without a worker."""
    if not workers:
        checks = [Check("terminate a worker (TerminateInstances)", True, "not tried: no elb worker running")]
        if warm_pool:
            what = "stop and start a worker (StopInstances, StartInstances)"
            checks.append(Check(what, True, "not tried: no elb worker running"))
        return checks
    iid = workers[0].instance_id
    checks = [
        _dry_run(
            lambda: cloud.client.terminate_instances(InstanceIds=[iid], DryRun=True),
            f"terminate a worker (TerminateInstances on {iid})",
        )
    ]
    pool = (("stop", cloud.client.stop_instances), ("start", cloud.client.start_instances)) if warm_pool else ()
    for verb, call in pool:
        api = f"{verb.capitalize()}Instances"
        checks.append(
            _dry_run(
                functools.partial(call, InstanceIds=[iid], DryRun=True),
                f"{verb} a worker, for a warm pool ({api} on {iid})",
            )
        )
    untagged = [w for w in workers if TAG_GROUP not in w.tags]
    if untagged:
        checks.append(_group_tag_check(cloud, untagged[0].instance_id))
    return checks
