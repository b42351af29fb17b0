"""EC2 as ``cloud.provider: ec2`` (``elb.core.registry.CloudModule``): the adapter, ``elb validate``'s
checks, the reader of EC2's notices and its settings the core reads. boto3 is imported when one of them is asked for."""

# ruff: noqa: PLC0415 (boto3 only when asked)
from __future__ import annotations

from collections.abc import Iterator

from elb.clouds.ec2.config import Ec2Config, ec2_settings
from elb.clouds.ec2.groupoptions import Ec2GroupOptions
from elb.core.checks import Check
from elb.core.config import Config
from elb.core.interfaces import Cloud, CloudError, CloudSettings, NoticeSource

# A node group's own EC2 settings (``elb.core.drivers``): its instance types or launch template,
# its placement group.
GROUP_OPTIONS = Ec2GroupOptions
# EC2's own settings: the config file's ``cloud.ec2``.
CONFIG_SECTION = Ec2Config


def group_options(cfg: Config) -> Ec2GroupOptions:
    """The one group of a config without ``node_groups`` launches ``cloud.ec2.instance_types``
    (none: the workers' type)."""
    return Ec2GroupOptions(instance_types=list(ec2_settings(cfg).instance_types) or None)


def settings(cfg: Config) -> CloudSettings:
    """``cloud.ec2``'s boot time-out."""
    return CloudSettings("EC2", ec2_settings(cfg).boot_timeout)


def make(cfg: Config) -> Cloud:
    from elb.clouds.ec2.cloud import Ec2Cloud

    return Ec2Cloud.from_config(cfg)


def checks(cfg: Config) -> Iterator[Check]:
    """What a launch needs of EC2 (``elb.clouds.ec2.preflight.preflight``)."""
    from elb.clouds.ec2.cloud import Ec2Cloud
    from elb.clouds.ec2.preflight import preflight

    try:
        cloud = Ec2Cloud.from_config(cfg)
    except CloudError as err:
        yield Check("cloud ec2", False, str(err), "set cloud.ec2.region and AWS credentials (elb ec2-check)")
        return
    for c in preflight(cloud, warm_pool=cfg.has_warm_pool, boot=cfg.provision.mode == "boot"):
        yield Check(f"cloud ec2: {c.what}", c.ok, c.detail, "see elb ec2-check and docs/ec2.md's IAM policy")


def notices(cfg: Config) -> NoticeSource | None:
    """The reader of EC2's notice queue when ``cloud.ec2.notices`` is on, else None."""
    if not ec2_settings(cfg).notices:
        return None
    from elb.clouds.ec2.notices import Ec2Notices, queue_url, sqs_client

    client = sqs_client(ec2_settings(cfg))
    return Ec2Notices(client, queue_url(client, cfg.cluster.name))
