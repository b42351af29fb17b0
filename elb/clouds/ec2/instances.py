"""The cluster's instances as EC2 lists them (``DescribeInstances``), in the core's words
(``Instance``), and the slots of an instance type (``DescribeInstanceTypes``).

Listing is filtered by elb's tags server side, then checked again on the answer
(``is_cluster_worker``): an id that is not an elb-managed worker of this cluster is refused
(``Instances.owned``), and the master never matches.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import error_code, to_cloud_error
from elb.clouds.ec2.tags import MANAGED_BY, ROLE_MASTER, ROLE_WORKER, TEMPLATE_VERSION_TAG, is_cluster_worker, tags_of
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError, Instance, InstanceState

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import FilterTypeDef, InstanceTypeDef

log = logging.getLogger(__name__)

LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
GONE_STATES = frozenset({"shutting-down", "terminated"})
ENDED_STATES = ("shutting-down", "terminated")
# EC2's instance states in the core's words (``InstanceState``); one EC2 does not name here
# counts as existing and not running: it may cost, it serves nothing.
_STATE_WORDS = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPED,
    "shutting-down": InstanceState.GONE,
    "terminated": InstanceState.GONE,
}
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


def instance_state(ec2_state: str) -> InstanceState:
    """EC2's name of an instance's state in the core's words."""
    return _STATE_WORDS.get(ec2_state, InstanceState.STOPPED)


def launch_time(inst: InstanceTypeDef) -> float:
    launched = inst.get("LaunchTime")
    return launched.timestamp() if launched is not None else 0.0


class Instances:
    """The cluster's instances: listed by tag, polled by id, each made an ``Instance`` with its
    slots (the instance type's vCPUs, cached, unless ``slots_per_node`` is configured)."""

    def __init__(self, ctx: Ec2Context) -> None:
        self.ctx = ctx
        self._vcpus: dict[str, int] = {}

    def describe(self, filters: Sequence[FilterTypeDef], doing: str) -> list[InstanceTypeDef]:
        """All instances matching ``filters`` (every page); errors become CloudError."""
        out: list[InstanceTypeDef] = []
        try:
            pages = self.ctx.client.get_paginator("describe_instances").paginate(Filters=list(filters))
            for page in pages:
                for res in page.get("Reservations", []):
                    out.extend(res.get("Instances", []))
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, doing) from None
        return out

    def worker_filters(self, states: Iterable[str] = LIVE_STATES) -> list[FilterTypeDef]:
        """``DescribeInstances`` filters for this cluster's workers that elb manages (their tags),
        in ``states``."""
        return [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.ctx.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_WORKER]},
            {"Name": f"tag:{TAG_MANAGED_BY}", "Values": [MANAGED_BY]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]

    def to_instance(self, raw: InstanceTypeDef) -> Instance:
        """The core's ``Instance`` of one described instance: its name tag, state, launch time
        (now when EC2 gives none), address, type, image, tags, launch template version and
        slots (``slots_for`` its type; None, and a warning, when that cannot be looked up)."""
        tags = tags_of(raw)
        itype = raw.get("InstanceType")
        slots: int | None = None
        if itype:
            try:
                slots = self.slots_for(itype)
            except CloudError as err:
                log.warning("slots of %s unknown: %s", itype, err)
        launched = raw.get("LaunchTime")
        return Instance(
            instance_id=raw.get("InstanceId", ""),
            name=tags.get(TAG_NAME, ""),
            state=instance_state(raw.get("State", {}).get("Name", "unknown")),
            launched_at=launched.timestamp() if launched is not None else self.ctx.clock(),
            private_ip=raw.get("PrivateIpAddress"),
            instance_type=itype,
            image_id=raw.get("ImageId"),
            slots=slots,
            tags=tags,
            template_version=tags.get(TEMPLATE_VERSION_TAG),
        )

    def workers(self) -> list[Instance]:
        """The cluster's elb-managed workers that are not terminated (or terminating)."""
        raws = self.describe(self.worker_filters(), "listing the cluster's workers")
        out = [
            self.to_instance(r)
            for r in raws
            if is_cluster_worker(tags_of(r), self.ctx.cluster, self.ctx.master)
            and r.get("State", {}).get("Name") not in GONE_STATES
        ]
        if self.ctx.host_keys is not None:  # the keys of nodes gone without elb (spot, by hand)
            for name in self.ctx.host_keys.prune({i.name for i in out}, time.time()):  # the files' clock
                log.info("%s: gone; its host key forgotten", name)
        return sorted(out, key=lambda i: (i.name, i.instance_id))

    def slots_for(self, instance_type: str) -> int:
        """Slots of a node of this type: configured, else its default vCPUs (cached)."""
        if self.ctx.slots_per_node is not None:
            return self.ctx.slots_per_node
        if instance_type not in self._vcpus:
            try:
                resp = self.ctx.client.describe_instance_types(InstanceTypes=[instance_type])  # type: ignore[list-item]
            except (BotoCoreError, ClientError) as err:
                raise to_cloud_error(err, f"looking up instance type {instance_type}") from None
            types = resp.get("InstanceTypes", [])
            vcpus = types[0].get("VCpuInfo", {}).get("DefaultVCpus") if types else None
            if not vcpus:
                raise CloudError(f"EC2 does not report the vCPUs of instance type {instance_type}")
            self._vcpus[instance_type] = int(vcpus)
        return self._vcpus[instance_type]

    def reference(self) -> InstanceTypeDef | None:
        """The newest live worker of the cluster (elb's or the admin's): the model for new ones."""
        filters: list[FilterTypeDef] = [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.ctx.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_WORKER]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
        raws = self.describe(filters, "finding the cluster's workers")
        if not raws:
            return None
        return max(raws, key=launch_time)

    def master_subnet(self) -> str | None:
        filters: list[FilterTypeDef] = [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.ctx.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_MASTER]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
        raws = self.describe(filters, "finding the cluster's master")
        return raws[0].get("SubnetId") if raws else None

    def lives_by_names(self, names: Sequence[str]) -> tuple[dict[str, InstanceTypeDef], dict[str, str]]:
        """The cluster's pending or running elb workers with these names, and for each name the
        newest of its ended instances that EC2 still lists (one call)."""
        filters = self.worker_filters(("pending", "running", *ENDED_STATES))
        filters.append({"Name": f"tag:{TAG_NAME}", "Values": list(names)})
        live: dict[str, InstanceTypeDef] = {}
        ended: dict[str, list[InstanceTypeDef]] = {}
        for raw in self.describe(filters, f"looking for {', '.join(names)}"):
            name = tags_of(raw).get(TAG_NAME, "")
            if name not in names or not is_cluster_worker(tags_of(raw), self.ctx.cluster, self.ctx.master):
                continue
            state = raw.get("State", {}).get("Name")
            if state in ("pending", "running"):
                live.setdefault(name, raw)
            elif state in ENDED_STATES:
                ended.setdefault(name, []).append(raw)
        after = {
            n: str(max(raws, key=lambda r: (launch_time(r), r.get("InstanceId", ""))).get("InstanceId", ""))
            for n, raws in ended.items()
        }
        return live, after

    def live_by_name(self, name: str) -> InstanceTypeDef | None:
        return self.lives_by_names([name])[0].get(name)

    def poll(self, ids: list[str]) -> list[InstanceTypeDef]:
        try:
            resp = self.ctx.client.describe_instances(InstanceIds=ids)
        except ClientError as err:
            if error_code(err) == "InvalidInstanceID.NotFound":  # eventual consistency right after launch
                return []
            raise to_cloud_error(err, "waiting for new instances") from None
        except BotoCoreError as err:
            raise to_cloud_error(err, "waiting for new instances") from None
        return [i for r in resp.get("Reservations", []) for i in r.get("Instances", [])]

    def owned(self, ids: Sequence[str], verb: str) -> dict[str, InstanceTypeDef]:
        """The instances ``ids`` (terminated ones included), each an elb-managed worker of this
        cluster; any other id, or a malformed one, refuses the whole call (``CloudError``)."""
        malformed = [i for i in ids if not _INSTANCE_ID.fullmatch(i)]
        if malformed:
            raise CloudError(f"refusing to {verb}: not instance ids: {malformed}")
        filters = self.worker_filters((*LIVE_STATES, "terminated"))
        filters.append({"Name": "instance-id", "Values": list(ids)})
        raws = self.describe(filters, f"checking the instances to {verb}")
        owned = {
            r["InstanceId"]: r
            for r in raws
            if "InstanceId" in r and is_cluster_worker(tags_of(r), self.ctx.cluster, self.ctx.master)
        }
        refused = [i for i in ids if i not in owned]
        if refused:
            raise CloudError(
                f"refusing to {verb} {', '.join(refused)}: not elb-managed workers of cluster {self.ctx.cluster}"
            )
        return owned
