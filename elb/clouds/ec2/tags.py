"""elb's tags on EC2: the words, the test every listing and termination applies, and the
``CreateTags`` calls.

Every instance elb launches is tagged at creation (``TagSpecifications``) with the cluster, role
``worker``, ``elb:managed-by=elb``, ``Name`` = node name and ``elb:group`` = its node group; the
admin's ``cloud.ec2.extra_tags`` come beside them (``check_extra_tags``). Two tags are given later,
with ``CreateTags``: a worker launched before elb tagged node groups gets its group's
(``tag_groups``), and a fleet node's volumes get the node's tags once it runs (``tag_volumes``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.errors import error_code, to_cloud_error
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import InstanceTypeDef, TagTypeDef

log = logging.getLogger(__name__)

MANAGED_BY = "elb"
ROLE_WORKER = "worker"
ROLE_MASTER = "master"
# The tag EC2 puts on an instance launched from a launch template: the version it was launched with
# (``Instance.template_version``).
TEMPLATE_VERSION_TAG = "aws:ec2launchtemplate:version"

RESERVED_TAGS = frozenset({TAG_CLUSTER, TAG_ROLE, TAG_MANAGED_BY, TAG_NAME, TAG_GROUP})  # elb sets these itself
MAX_TAGS = 50  # tags per EC2 resource
TAG_BATCH = 1000  # resource ids per CreateTags call (EC2 takes at most 1000)


def tags_of(inst: InstanceTypeDef) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags", []) if "Key" in t and "Value" in t}


def is_cluster_worker(tags: Mapping[str, str], cluster: str, master: str) -> bool:
    """The tag test elb applies to everything it lists or terminates."""
    return (
        tags.get(TAG_CLUSTER) == cluster
        and tags.get(TAG_ROLE) == ROLE_WORKER
        and tags.get(TAG_MANAGED_BY) == MANAGED_BY
        and bool(tags.get(TAG_NAME))
        and tags.get(TAG_NAME) != master
    )


def check_extra_tags(extra_tags: Mapping[str, str]) -> None:
    """``CloudError`` unless the admin's ``cloud.ec2.extra_tags`` can go beside elb's on a resource."""
    bad = sorted(k for k in extra_tags if k in RESERVED_TAGS or k.lower().startswith("aws:"))
    if bad:
        raise CloudError(f"cloud.ec2.extra_tags may not set {', '.join(bad)}: elb sets those itself")
    room = MAX_TAGS - len(RESERVED_TAGS)
    if len(extra_tags) > room:
        raise CloudError(
            f"cloud.ec2.extra_tags has {len(extra_tags)} tags: EC2 takes {MAX_TAGS} per resource and "
            f"elb sets {len(RESERVED_TAGS)}, so at most {room}"
        )
    long = sorted(k[:40] for k, v in extra_tags.items() if not 1 <= len(k) <= 128 or len(v) > 256)
    if long:
        raise CloudError(
            f"cloud.ec2.extra_tags {', '.join(long)}: EC2 takes keys of 1 to 128 characters, values of at most 256"
        )


def group_tag_arguments(groups: Mapping[str, str]) -> list[dict[str, Any]]:
    """The keyword arguments of the ``CreateTags`` calls that give each instance (id -> node
    group name) its group's tag (``TAG_GROUP``; pure): one tag set a call, so a call per group
    (in the order the groups first come), of ``TAG_BATCH`` instances at most."""
    ids: dict[str, list[str]] = {}
    for iid, group in groups.items():
        ids.setdefault(group, []).append(iid)
    return [
        {"Resources": members[start : start + TAG_BATCH], "Tags": [{"Key": TAG_GROUP, "Value": group}]}
        for group, members in ids.items()
        for start in range(0, len(members), TAG_BATCH)
    ]


def volume_tag_arguments(volumes: Sequence[str], tags: Sequence[TagTypeDef]) -> dict[str, Any]:
    """The keyword arguments of the ``CreateTags`` that gives a fleet node's volumes the node's
    tags (``worker_tags``; pure): an instant fleet cannot tag volumes at creation."""
    return {"Resources": list(volumes), "Tags": list(tags)}


def volume_ids(inst: Mapping[str, Any]) -> list[str]:
    """The EBS volumes attached to an instance, as DescribeInstances lists them."""
    return [
        str(m["Ebs"]["VolumeId"])
        for m in inst.get("BlockDeviceMappings", [])
        if isinstance(m.get("Ebs"), Mapping) and m["Ebs"].get("VolumeId")
    ]


def tag_groups(client: EC2Client, groups: Mapping[str, str]) -> None:
    """Give each worker (instance id -> node group name) its group's tag, ``TAG_GROUP``
    (``CreateTags``, ``group_tag_arguments``): a worker launched before elb set it. The IAM
    policy lets elb add that tag alone, on the cluster's workers only."""
    for kwargs in group_tag_arguments(groups):
        ids = kwargs["Resources"]
        try:
            client.create_tags(**kwargs)
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, f"tagging {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}") from None


def tag_volumes(client: EC2Client, cluster: str, name: str, raw: InstanceTypeDef, tags: Sequence[TagTypeDef]) -> None:
    """Give a running fleet node's volumes the node's tags (``CreateTags``). A failure is
    logged: the instance, tagged at creation, is what elb lists and terminates by."""
    volumes = volume_ids(raw)
    if not volumes:
        return
    try:
        client.create_tags(**volume_tag_arguments(volumes, tags))
    except (BotoCoreError, ClientError) as err:
        hint = ""
        if isinstance(err, ClientError) and error_code(err) in ("UnauthorizedOperation", "AccessDenied"):
            # elb iam-policy allows this CreateTags only on volumes already tagged as the cluster's.
            hint = (
                f" (elb's IAM policy lets it tag only volumes the launch template tagged "
                f"{TAG_CLUSTER}={cluster} at creation: add that tag to the template's volume tags)"
            )
        why = to_cloud_error(err, "tagging")
        log.warning("%s: volumes %s left untagged: %s%s", name, ", ".join(volumes), why, hint)
