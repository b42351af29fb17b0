"""EC2's status checks of the workers (``DescribeInstanceStatus``): a notice for each running
worker whose instance or system status check says ``impaired``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.errors import to_cloud_error
from elb.core.interfaces import Instance, InstanceState, Notice, NoticeKind

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

STATUS_BATCH = 100  # instance ids per DescribeInstanceStatus call (EC2 takes at most 100 with ids)


def impaired(status: Mapping[str, Any], now: float) -> Notice | None:
    """A ``DescribeInstanceStatus`` entry as a notice when a status check says ``impaired``."""
    failed = [
        what
        for what, key in (("instance", "InstanceStatus"), ("system", "SystemStatus"))
        if status.get(key, {}).get("Status") == "impaired"
    ]
    iid = status.get("InstanceId")
    if not failed or not isinstance(iid, str):
        return None
    return Notice(NoticeKind.IMPAIRED, iid, now, f"{' and '.join(failed)} status check impaired")


def status_checks(client: EC2Client, instances: Sequence[Instance], clock: Callable[[], float]) -> list[Notice]:
    """EC2's status checks of ``instances`` (``DescribeInstanceStatus``, 100 ids a call): a
    notice for each whose instance or system status check says ``impaired``. Running
    instances only; ``initializing`` and ``insufficient-data`` are no verdict yet."""
    ids = [i.instance_id for i in instances if i.state == InstanceState.RUNNING and i.instance_id]
    out: list[Notice] = []
    try:
        for start in range(0, len(ids), STATUS_BATCH):
            # With instance ids, one answer holds them all (no pages).
            page = client.describe_instance_status(InstanceIds=ids[start : start + STATUS_BATCH])
            statuses: Sequence[Mapping[str, Any]] = page.get("InstanceStatuses", [])
            out.extend(n for st in statuses if (n := impaired(st, clock())))
    except (BotoCoreError, ClientError) as err:
        raise to_cloud_error(err, "reading the workers' status checks") from None
    return out
