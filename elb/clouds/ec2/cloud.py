"""The EC2 cloud: launch, list and terminate the workers of one cluster with boto3.

Safety rules, enforced here whatever the caller passes:

* every instance elb launches is tagged at creation (``TagSpecifications``) with the cluster,
  role ``worker``, ``elb:managed-by=elb``, ``Name`` = node name and ``elb:group`` = its node group;
* listing and terminating are filtered by those tags (server side, then checked again on the
  answer): ids that are not running workers of this cluster are refused, the master never matches;
* launching is idempotent: an existing live worker of the same name is adopted, and the
  ``ClientToken`` is a digest of the request itself and of the node name's earlier life
  (``client_token``), so a retried ``RunInstances`` or ``CreateFleet`` never starts a second
  instance for one node, and a new launch never gets an old answer.

Capacity errors move on to the next instance type / subnet and avoid the failed choice for
``capacity_backoff`` seconds. Throttling is retried by botocore's ``standard`` retry mode;
permission errors raise :class:`CloudError` naming the missing permission, without retrying.

The pure helpers (candidates, run arguments, error classification) take everything as
arguments; :class:`Ec2Cloud` is the thin shell around a boto3 client, with clock and sleep
injected so that tests control time.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from elb.clouds.ec2.config import Ec2Config, LaunchTemplate, ec2_settings
from elb.clouds.ec2.console import decode_output, host_key_in_console
from elb.clouds.ec2.errors import CAPACITY_CODES, TRANSIENT_CODES, error_code, to_cloud_error
from elb.clouds.ec2.groupoptions import ec2_options
from elb.clouds.ec2.launch_requests import (
    Choice,
    LaunchSpec,
    Market,
    choices,
    fleet_arguments,
    fleet_choice,
    run_arguments,
    uses_fleet,
    worker_tags,
)
from elb.clouds.ec2.tags import (
    MANAGED_BY,
    ROLE_MASTER,
    ROLE_WORKER,
    TEMPLATE_VERSION_TAG,
    check_extra_tags,
    is_cluster_worker,
    tag_groups,
    tag_volumes,
    tags_of,
)
from elb.clouds.ec2.user_data import node_user_data
from elb.core.config import Config
from elb.core.groups import NodeGroups
from elb.core.interfaces import (
    TAG_CLUSTER,
    TAG_MANAGED_BY,
    TAG_NAME,
    TAG_ROLE,
    CloudError,
    Instance,
    InstanceState,
    LaunchResult,
    NodeBoot,
    Notice,
    NoticeKind,
)
from elb.provision.hostkeys import HostKeys

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import (
        FilterTypeDef,
        InstanceTypeDef,
        RunInstancesRequestTypeDef,
        TagTypeDef,
    )

log = logging.getLogger(__name__)

_Request = TypeVar("_Request", bound=Mapping[str, Any])

LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
GONE_STATES = frozenset({"shutting-down", "terminated"})
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
_MAX_TOKEN_GENERATIONS = 4
_MAX_SEND_ATTEMPTS = 2  # a launch request is sent with one token (botocore retries inside each)
_ENDED_STATES = ("shutting-down", "terminated")
_NO_FRESH_REQUEST = "no fresh ClientToken: EC2 answered each with an ended instance or another request"


# --------------------------------------------------------------------------- pure helpers


def _start_stop_error(err: Exception, doing: str) -> CloudError:
    """A StartInstances or StopInstances failure: retryable also when EC2 has no capacity to
    start it now, or the instance is between states (IncorrectInstanceState)."""
    out = to_cloud_error(err, doing)
    if isinstance(err, ClientError) and error_code(err) in (*CAPACITY_CODES, "IncorrectInstanceState"):
        out.retryable = True
    return out


def instance_state(ec2_state: str) -> InstanceState:
    """EC2's name of an instance's state in the core's words."""
    return _STATE_WORDS.get(ec2_state, InstanceState.STOPPED)


def _launch_time(inst: InstanceTypeDef) -> float:
    launched = inst.get("LaunchTime")
    return launched.timestamp() if launched is not None else 0.0


STATUS_BATCH = 100  # instance ids per DescribeInstanceStatus call (EC2 takes at most 100 with ids)
TERMINATE_BATCH = 1000  # instance ids per TerminateInstances call (EC2 takes at most 1000)


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


# --------------------------------------------------------------------------- the adapter


class _Fatal(Exception):
    """Stop launching: every further attempt would fail the same way."""

    def __init__(self, error: CloudError) -> None:
        super().__init__(str(error))
        self.error = error


class _NoCapacity(Exception):
    """Every choice for one node failed with a capacity error or is backed off."""


@dataclass(slots=True)
class _Starts:
    """What starting a launch's nodes came to: the instances started (name -> id), the fleet
    nodes' volume tags (``worker_tags``), the nodes failed (name -> why), and the names not started."""

    started: dict[str, str] = field(default_factory=dict)
    volume_tags: dict[str, list[TagTypeDef]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    not_started: tuple[str, ...] = ()
    throttled: set[str] = field(default_factory=set)  # of ``failed``: refused for the request rate


def _group_of(groups: Mapping[str, str] | None, name: str) -> str | None:
    """The node group ``groups`` gives ``name`` (None: the default group)."""
    return None if groups is None else groups.get(name)


def make_client(cfg: Ec2Config, *, total_attempts: int = 5) -> EC2Client:
    """A boto3 EC2 client: the standard credentials chain, standard retry mode, time-outs."""
    boto_cfg = BotoConfig(
        retries={"mode": "standard", "total_max_attempts": total_attempts},
        connect_timeout=10,
        read_timeout=60,
        user_agent_extra="elb",
    )
    try:
        session = boto3.session.Session(region_name=cfg.region)
        return session.client("ec2", endpoint_url=cfg.endpoint_url, config=boto_cfg)
    except (BotoCoreError, ClientError) as err:
        raise to_cloud_error(err, "creating the EC2 client") from None


class Ec2Cloud:
    """:class:`elb.core.interfaces.Cloud` on EC2 for one cluster."""

    # A started instance boots: systemd starts the exec daemon the sge_exec role enabled, and
    # mounts the shared directories from fstab (the nfs_client role's lines).
    restart_runs_services = True

    def __init__(
        self,
        config: Ec2Config,
        cluster: str,
        *,
        master: str = "master",
        slots_per_node: int | None = None,
        client: EC2Client | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval: float = 5.0,
        node_groups: NodeGroups | None = None,
        host_keys: HostKeys | None = None,
    ) -> None:
        check_extra_tags(config.extra_tags)
        bad_sg = [g for g in config.security_groups if not g.startswith("sg-")]
        if bad_sg:
            raise CloudError(f"cloud.ec2.security_groups takes group ids (sg-...), not {', '.join(bad_sg)}")
        self.config = config
        self.cluster = cluster
        self.master = master
        self.slots_per_node = slots_per_node
        self.client: EC2Client = client if client is not None else make_client(config)
        self.clock = clock
        self.sleep = sleep
        self.poll_interval = poll_interval
        self._backoff: dict[Choice, float] = {}  # choice -> avoid until (clock seconds)
        self._vcpus: dict[str, int] = {}
        self._root_devices: dict[str, str | None] = {}
        self.node_groups = node_groups  # config node_groups: each group's types, template, market
        self._placement_groups: set[str] = set()  # known to exist
        # Tokens whose request launched nothing (a capacity error; a fleet of errors only, which
        # EC2 would answer again as it did): never sent again by this process.
        self._spent: set[str] = set()
        # The nodes' SSH host keys: each node elb describes itself gets its key in its user data
        # (``elb.clouds.ec2.user_data``). None: nodes make their own at first boot (unchecked).
        self.host_keys = host_keys

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> Ec2Cloud:
        return cls(
            ec2_settings(config),
            config.cluster.name,
            master=config.cluster.master,
            slots_per_node=config.policy.slots_per_node,
            node_groups=config.groups(config.policy.slots_per_node or 1) if config.node_groups is not None else None,
            **({"host_keys": HostKeys(config.provision.host_keys_path)} | kwargs),
        )

    # ------------------------------------------------------------------ queries

    def describe(self, filters: Sequence[FilterTypeDef], doing: str) -> list[InstanceTypeDef]:
        """All instances matching ``filters`` (every page); errors become CloudError."""
        out: list[InstanceTypeDef] = []
        try:
            pages = self.client.get_paginator("describe_instances").paginate(Filters=list(filters))
            for page in pages:
                for res in page.get("Reservations", []):
                    out.extend(res.get("Instances", []))
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, doing) from None
        return out

    def _worker_filters(self, states: Iterable[str] = LIVE_STATES) -> list[FilterTypeDef]:
        return [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_WORKER]},
            {"Name": f"tag:{TAG_MANAGED_BY}", "Values": [MANAGED_BY]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]

    def _to_instance(self, raw: InstanceTypeDef) -> Instance:
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
            launched_at=launched.timestamp() if launched is not None else self.clock(),
            private_ip=raw.get("PrivateIpAddress"),
            instance_type=itype,
            image_id=raw.get("ImageId"),
            slots=slots,
            tags=tags,
            template_version=tags.get(TEMPLATE_VERSION_TAG),
        )

    def list_workers(self) -> list[Instance]:
        """The cluster's elb-managed workers that are not terminated (or terminating)."""
        raws = self.describe(self._worker_filters(), "listing the cluster's workers")
        out = [
            self._to_instance(r)
            for r in raws
            if is_cluster_worker(tags_of(r), self.cluster, self.master)
            and r.get("State", {}).get("Name") not in GONE_STATES
        ]
        if self.host_keys is not None:  # the keys of nodes gone without elb (spot, by hand)
            for name in self.host_keys.prune({i.name for i in out}, time.time()):  # the files' clock
                log.info("%s: gone; its host key forgotten", name)
        return sorted(out, key=lambda i: (i.name, i.instance_id))

    def health(self, instances: Sequence[Instance]) -> list[Notice]:
        """EC2's status checks of ``instances`` (``DescribeInstanceStatus``, 100 ids a call): a
        notice for each whose instance or system status check says ``impaired``. Running
        instances only; ``initializing`` and ``insufficient-data`` are no verdict yet."""
        ids = [i.instance_id for i in instances if i.state == InstanceState.RUNNING and i.instance_id]
        out: list[Notice] = []
        try:
            for start in range(0, len(ids), STATUS_BATCH):
                # With instance ids, one answer holds them all (no pages).
                page = self.client.describe_instance_status(InstanceIds=ids[start : start + STATUS_BATCH])
                statuses: Sequence[Mapping[str, Any]] = page.get("InstanceStatuses", [])
                out.extend(n for st in statuses if (n := impaired(st, self.clock())))
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, "reading the workers' status checks") from None
        return out

    def tag_groups(self, groups: Mapping[str, str]) -> None:
        """Give each worker (instance id -> node group name) its group's tag (``tags.tag_groups``)."""
        tag_groups(self.client, groups)

    def new_node_slots(self) -> int | None:
        """Slots of the node ``launch`` would start first: configured, else the vCPUs of the first
        instance type (configured, or the newest worker's). None, with a warning, if EC2 can't say."""
        if self.slots_per_node is not None:
            return self.slots_per_node
        try:
            types = self.launch_spec().instance_types if self.config.launch_template else ()
            types = types or self._instance_types(None if self.config.instance_types else self._reference())
            return self.slots_for(types[0]) if types else None
        except CloudError as err:
            log.warning("slots of a new node unknown: %s", err)
            return None

    def slots_for(self, instance_type: str) -> int:
        """Slots of a node of this type: configured, else its default vCPUs (cached)."""
        if self.slots_per_node is not None:
            return self.slots_per_node
        if instance_type not in self._vcpus:
            try:
                resp = self.client.describe_instance_types(InstanceTypes=[instance_type])  # type: ignore[list-item]
            except (BotoCoreError, ClientError) as err:
                raise to_cloud_error(err, f"looking up instance type {instance_type}") from None
            types = resp.get("InstanceTypes", [])
            vcpus = types[0].get("VCpuInfo", {}).get("DefaultVCpus") if types else None
            if not vcpus:
                raise CloudError(f"EC2 does not report the vCPUs of instance type {instance_type}")
            self._vcpus[instance_type] = int(vcpus)
        return self._vcpus[instance_type]

    def _reference(self) -> InstanceTypeDef | None:
        """The newest live worker of the cluster (elb's or the admin's): the model for new ones."""
        filters: list[FilterTypeDef] = [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_WORKER]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
        raws = self.describe(filters, "finding the cluster's workers")
        if not raws:
            return None
        return max(raws, key=_launch_time)

    def _master_subnet(self) -> str | None:
        filters: list[FilterTypeDef] = [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_MASTER]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
        raws = self.describe(filters, "finding the cluster's master")
        return raws[0].get("SubnetId") if raws else None

    def _root_device(self, image_id: str) -> str | None:
        if image_id not in self._root_devices:
            try:
                imgs = self.client.describe_images(ImageIds=[image_id]).get("Images", [])
            except (BotoCoreError, ClientError) as err:
                raise to_cloud_error(err, f"looking up AMI {image_id}") from None
            if not imgs:
                raise CloudError(f"AMI {image_id} not found")
            self._root_devices[image_id] = imgs[0].get("RootDeviceName")
        return self._root_devices[image_id]

    def _instance_types(self, ref: InstanceTypeDef | None) -> tuple[str, ...]:
        """The types to launch, in order: configured, else the reference worker's."""
        return tuple(self.config.instance_types) or ((ref["InstanceType"],) if ref and ref.get("InstanceType") else ())

    def _template_type(self, template: LaunchTemplate | None = None) -> str | None:
        """The instance type the launch template's version sets (``template``, else the
        configured one), if any."""
        template = template or self.config.launch_template
        if template is None:
            return None
        found = self._template_version(template).get("LaunchTemplateData", {}).get("InstanceType")
        return str(found) if found else None

    def template_versions(self) -> dict[str, str]:
        """Each node group's launch template version now (its ``version``, ``$Default`` and
        ``$Latest`` resolved to a number): a node stopped in a warm pool that was launched with
        another one is not restarted. Groups without a template (and the one group without
        ``node_groups``, from ``cloud.ec2.launch_template``) are keyed by group name."""
        groups: list[tuple[str, LaunchTemplate | None]]
        if self.node_groups is not None:
            groups = [(g.name, ec2_options(g).launch_template) for g in self.node_groups.groups]
        else:
            groups = [("default", self.config.launch_template)]
        out: dict[str, str] = {}
        for name, template in groups:
            if template is not None:
                number = self._template_version(template).get("VersionNumber")
                if number is not None:
                    out[name] = str(number)
        return out

    def launch_templates(self) -> list[LaunchTemplate]:
        """The launch templates the config names (``cloud.ec2`` and the node groups'), once each."""
        found = [self.config.launch_template]
        if self.node_groups is not None:
            found += [ec2_options(g).launch_template for g in self.node_groups.groups]
        return list(dict.fromkeys(t for t in found if t is not None))

    def template_version(self, template: LaunchTemplate) -> Any:
        """The launch template version ``template`` names, as DescribeLaunchTemplateVersions has it."""
        return self._template_version(template)

    def _template_version(self, template: LaunchTemplate) -> Any:
        """The launch template version ``template`` names, as DescribeLaunchTemplateVersions has it."""
        key: dict[str, Any] = {"Versions": [template.version]}
        if template.id is not None:
            key["LaunchTemplateId"] = template.id
        else:
            key["LaunchTemplateName"] = template.name
        try:
            resp = self.client.describe_launch_template_versions(**key)
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, "reading the launch template") from None
        versions = resp.get("LaunchTemplateVersions", [])
        if not versions:
            raise CloudError(f"launch template {template.id or template.name} has no version {template.version}")
        return versions[0]

    def template_user_data(self, template: LaunchTemplate) -> str | None:
        """The user data of the launch template's version, as text (None: it has none); a
        CloudError when it is not text (gzip, say: elb cannot put a node's boot beside it)."""
        encoded = self._template_version(template).get("LaunchTemplateData", {}).get("UserData")
        if not encoded:
            return None
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise CloudError(
                f"launch template {template.id or template.name}: its user data is not text, so a node's boot "
                "cannot be added to it (provision.mode: boot)"
            ) from None

    def _template_spec(self, template: LaunchTemplate | None = None, types: Sequence[str] = ()) -> LaunchSpec:
        """A launch template (``template``, a node group's, else ``cloud.ec2.launch_template``)
        describes the worker: the instance types are ``types``, else (the configured template
        only) ``cloud.ec2.instance_types``, else the template's, else the newest worker's;
        subnets configured, else the template's."""
        cfg = self.config
        types = tuple(types) or (tuple(cfg.instance_types) if template is None else ())
        template = template or cfg.launch_template
        if not types:
            found = self._template_type(template)
            ref = None if found else self._reference()
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

    def spec_for(self, group: str | None) -> LaunchSpec:
        """How a node of node group ``group`` is launched: the cluster's way (``launch_spec``)
        with the group's launch template or instance types, its market (spot: without falling
        back to on-demand, which is another group's business) and its placement group. Without
        node groups, or a group not configured: ``launch_spec``. Its nodes are tagged with
        ``group`` (``TAG_GROUP``) whenever it is given."""
        g = None if self.node_groups is None or group is None else self.node_groups.get(group)
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

    def _placement_group(self, group: str) -> str:
        """The cluster placement group of node group ``group`` (``elb-CLUSTER-GROUP``), made
        with elb's tags when missing."""
        name = f"elb-{self.cluster}-{group}"
        if name in self._placement_groups:
            return name
        try:
            try:
                found = self.client.describe_placement_groups(GroupNames=[name]).get("PlacementGroups", [])
            except ClientError as err:
                if error_code(err) != "InvalidPlacementGroup.Unknown":
                    raise
                found = []
            if not found:
                self.client.create_placement_group(
                    GroupName=name,
                    Strategy="cluster",
                    TagSpecifications=[
                        {
                            "ResourceType": "placement-group",
                            "Tags": [
                                {"Key": TAG_CLUSTER, "Value": self.cluster},
                                {"Key": TAG_MANAGED_BY, "Value": MANAGED_BY},
                            ],
                        }
                    ],
                )
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, f"making the placement group {name}") from None
        self._placement_groups.add(name)
        return name

    def launch_spec(self) -> LaunchSpec:
        """Config first; what config leaves open comes from the newest worker (or the master's
        subnet). With a launch template, the template (``_template_spec``)."""
        cfg = self.config
        if cfg.launch_template is not None:
            return self._template_spec()
        ref = self._reference()
        ref_profile = (ref or {}).get("IamInstanceProfile", {}).get("Arn") if ref else None
        image = cfg.ami or (ref.get("ImageId") if ref else None)
        if not image:
            raise CloudError("no AMI: the cluster has no worker to copy from; set cloud.ec2.ami")
        types = self._instance_types(ref)
        if not types:
            raise CloudError("no instance type: the cluster has no worker to copy from; set cloud.ec2.instance_types")
        subnets: tuple[str | None, ...] = tuple(cfg.subnets)
        if not subnets:
            subnet = ref.get("SubnetId") if ref else self._master_subnet()
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

    # ------------------------------------------------------------------ launch

    def backed_off(self, choice: Choice) -> bool:
        until = self._backoff.get(choice)
        return until is not None and self.clock() < until

    def _lives_by_names(self, names: Sequence[str]) -> tuple[dict[str, InstanceTypeDef], dict[str, str]]:
        """The cluster's pending or running elb workers with these names, and for each name the
        newest of its ended instances that EC2 still lists (one call)."""
        filters = self._worker_filters(("pending", "running", *_ENDED_STATES))
        filters.append({"Name": f"tag:{TAG_NAME}", "Values": list(names)})
        live: dict[str, InstanceTypeDef] = {}
        ended: dict[str, list[InstanceTypeDef]] = {}
        for raw in self.describe(filters, f"looking for {', '.join(names)}"):
            name = tags_of(raw).get(TAG_NAME, "")
            if name not in names or not is_cluster_worker(tags_of(raw), self.cluster, self.master):
                continue
            state = raw.get("State", {}).get("Name")
            if state in ("pending", "running"):
                live.setdefault(name, raw)
            elif state in _ENDED_STATES:
                ended.setdefault(name, []).append(raw)
        after = {
            n: str(max(raws, key=lambda r: (_launch_time(r), r.get("InstanceId", ""))).get("InstanceId", ""))
            for n, raws in ended.items()
        }
        return live, after

    def _live_by_name(self, name: str) -> InstanceTypeDef | None:
        return self._lives_by_names([name])[0].get(name)

    def _run(self, args: RunInstancesRequestTypeDef) -> InstanceTypeDef:
        resp = self.client.run_instances(**args)
        insts = resp.get("Instances", [])
        if len(insts) != 1:
            raise CloudError(f"RunInstances returned {len(insts)} instances for one node")
        return insts[0]

    def _start_one(self, name: str, spec: LaunchSpec, found: InstanceTypeDef | None, after: str) -> InstanceTypeDef:
        """Start the instance of one node, or adopt ``found``. ``after``: the newest ended
        instance of the name (``client_token``). Raises _NoCapacity or _Fatal."""
        if found is not None:
            log.info("%s: adopting %s, already %s", name, found.get("InstanceId"), found["State"]["Name"])
            return found
        if uses_fleet(spec):
            return self._start_by_fleet(name, spec, after)
        tried: list[str] = []
        for choice in choices(spec):
            if self.backed_off(choice):
                tried.append(f"{choice.describe()}: backed off")
                continue
            for args in self._fresh(functools.partial(run_arguments, spec, choice, self.cluster, name, after=after)):
                try:
                    answer, inst = self._send(name, "RunInstances", functools.partial(self._run, args))
                except ClientError as err:
                    code = error_code(err)
                    if code == "IdempotentParameterMismatch":  # the token was used for another request
                        continue
                    if code not in CAPACITY_CODES:
                        raise _Fatal(to_cloud_error(err, f"launching {name}")) from None
                    self._spent.add(args["ClientToken"])
                    self._backoff_choice(name, choice, code)
                    tried.append(f"{choice.describe()}: {code}")
                    break
                inst = inst if inst is not None else answer
                if inst.get("State", {}).get("Name") in GONE_STATES:
                    # The token belonged to an earlier life of this name: use the next generation.
                    log.info("%s: token of ended %s, retrying with a new one", name, inst.get("InstanceId"))
                    continue
                log.info("%s: launched %s (%s)", name, inst.get("InstanceId"), choice.describe())
                return inst
            else:
                raise _Fatal(CloudError(f"launching {name}: {_NO_FRESH_REQUEST}"))
        raise _NoCapacity("no capacity: " + "; ".join(tried))

    def _fresh(self, build: Callable[..., _Request]) -> Iterator[_Request]:
        """The requests ``build(generation=0, 1, ...)`` whose tokens this process has not spent,
        at most ``_MAX_TOKEN_GENERATIONS`` of them (``client_token``)."""
        generation = sent = 0
        while sent < _MAX_TOKEN_GENERATIONS:
            args = build(generation=generation)
            generation += 1
            if args["ClientToken"] not in self._spent:
                sent += 1
                yield args

    def _backoff_choice(self, name: str, choice: Choice, code: str) -> None:
        self._backoff[choice] = self.clock() + self.config.capacity_backoff
        log.warning("%s: %s: %s; avoiding it for %gs", name, choice.describe(), code, self.config.capacity_backoff)

    def _start_by_fleet(self, name: str, spec: LaunchSpec, after: str) -> InstanceTypeDef:
        """One ``CreateFleet`` (instant) per market, spot first when asked: EC2 picks among the
        types and subnets not backed off. Overrides that failed for capacity are backed off
        like ``RunInstances`` choices. Raises _NoCapacity or _Fatal."""
        tried: list[str] = []
        for market in dict.fromkeys(c.market for c in choices(spec)):
            options = [c for c in choices(spec) if c.market == market and not self.backed_off(c)]
            tried += [f"{c.describe()}: backed off" for c in choices(spec) if c.market == market and self.backed_off(c)]
            if not options:
                continue
            for args in self._fresh(functools.partial(fleet_arguments, spec, options, self.cluster, name, after=after)):
                outcome = self._fleet_once(name, market, args, tried)
                if outcome == "no capacity":
                    self._spent.add(args["ClientToken"])
                    break
                if outcome != "again":
                    return outcome
            else:
                raise _Fatal(CloudError(f"launching {name}: {_NO_FRESH_REQUEST}"))
        raise _NoCapacity("no capacity: " + "; ".join(tried))

    def _fleet_once(
        self, name: str, market: Market, args: Mapping[str, Any], tried: list[str]
    ) -> InstanceTypeDef | Literal["again", "no capacity"]:
        """Send one ``CreateFleet``: the node's instance, ``"again"`` when EC2 answered the token
        with an ended instance or another request (a new token is needed), ``"no capacity"``
        (noted in ``tried``, capacity errors backed off). Raises _Fatal."""
        doing = f"launching {name} (CreateFleet)"
        try:
            resp, found = self._send(name, "CreateFleet", functools.partial(self.client.create_fleet, **args))
        except ClientError as err:
            code = error_code(err)
            if code == "IdempotentParameterMismatch":
                return "again"
            if code not in CAPACITY_CODES:
                raise _Fatal(to_cloud_error(err, doing)) from None
            tried.append(f"{market} fleet: {code}")
            return "no capacity"
        if found is not None:
            return found
        ids = [i for entry in resp.get("Instances", []) for i in entry.get("InstanceIds", [])]
        self._note_fleet_errors(resp.get("Errors", []), market, tried, fatal=None if ids else doing)
        if not ids:
            return "no capacity"
        return self._fleet_instance(name, market, ids)

    def _note_fleet_errors(
        self, errors: Sequence[Mapping[str, Any]], market: Market, tried: list[str], *, fatal: str | None
    ) -> None:
        """A fleet's errors noted in ``tried``, each capacity error's choice backed off; with
        ``fatal`` (what was being done, when no instance started), any other error raises _Fatal."""
        for e in errors:
            code = str(e.get("ErrorCode", ""))
            choice = fleet_choice(e, market)
            what = choice.describe() if choice is not None else f"{market} fleet"
            tried.append(f"{what}: {code}")
            if code in CAPACITY_CODES and choice is not None:
                self._backoff[choice] = self.clock() + self.config.capacity_backoff
            elif code not in CAPACITY_CODES and fatal is not None:
                raise _Fatal(CloudError(f"{fatal}: {code}: {e.get('ErrorMessage', '')}"))

    def _fleet_instance(self, name: str, market: Market, ids: list[str]) -> InstanceTypeDef | Literal["again"]:
        """The node's instance among those a fleet started (a second one terminated), or
        ``"again"`` when all of them had ended (the token was an earlier life's). Raises _Fatal
        (the instances terminated) when they cannot be listed."""
        try:
            now = {r.get("InstanceId"): r for r in self._poll(ids)}
        except CloudError as err:
            self._terminate_quietly(ids)
            raise _Fatal(err) from None
        # Not listed yet (eventual consistency): taken as just started.
        live = [i for i in ids if now.get(i, {}).get("State", {}).get("Name") not in GONE_STATES]
        if not live:
            # The token belonged to an earlier life of this name: use the next generation.
            log.info("%s: token of ended %s, retrying with a new one", name, ", ".join(ids))
            return "again"
        if len(live) > 1:  # one node, one instance: never keep a second one billing
            self._terminate_quietly(live[1:])
        log.info("%s: launched %s by CreateFleet (%s)", name, live[0], market)
        return now.get(live[0]) or {"InstanceId": live[0], "State": {"Code": 0, "Name": "pending"}}

    def _send(self, name: str, operation: str, call: Callable[[], Any]) -> tuple[Any, InstanceTypeDef | None]:
        """Send a launch request with one token: ``(answer, None)``; a lost answer is looked up
        by tag before sending again: ``(None, the instance found)``."""
        last: Exception | None = None
        for _ in range(_MAX_SEND_ATTEMPTS):
            try:
                return call(), None
            except ClientError as err:
                if error_code(err) not in TRANSIENT_CODES:
                    raise
                last = err
            except BotoCoreError as err:
                if not isinstance(err, BotoConnectionError | HTTPClientError):
                    raise _Fatal(to_cloud_error(err, f"launching {name}")) from None
                last = err
            log.warning("%s: %s failed (%s); checking whether it started anyway", name, operation, last)
            try:
                found = self._live_by_name(name)
            except CloudError as err:
                # Cannot look: sending again with the same ClientToken is still safe.
                log.warning("%s: %s", name, err)
                found = None
            if found is not None:
                return None, found
        assert last is not None
        raise _Fatal(to_cloud_error(last, f"launching {name}"))

    def _check_names(self, names: Sequence[str]) -> None:
        """``CloudError`` unless ``names`` are distinct plain host names, none the master's."""
        if len(set(names)) != len(names):
            raise CloudError(f"duplicate node names in {list(names)}")
        bad = [n for n in names if not n or n == self.master or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", n)]
        if bad:
            raise CloudError(f"refusing to launch nodes named {bad}")

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        """Start one worker per name and wait until each runs with a private address; each as
        its node group says (``groups``: name -> group; ``spec_for``), with its boot (``boot``)
        in its user data for cloud-init. Once ``stopping`` is set, no other instance is started
        (the names left are ``not_started``); the ones started are waited for.

        Nodes that find no capacity, or do not run within ``boot_timeout`` (then terminated),
        are in ``failed``. A permission or configuration error stops launching; if nothing was
        started it raises :class:`CloudError`, else the rest are reported failed with the reason.
        A node launched by ``CreateFleet`` has its volumes tagged once it runs.
        """
        self._check_names(names)
        if not names:
            return LaunchResult(launched=())
        if stopping is not None and stopping.is_set():
            return LaunchResult(launched=(), not_started=tuple(names))
        specs = {group: self.spec_for(group) for group in dict.fromkeys(_group_of(groups, n) for n in names)}
        started_at = self.clock()
        starts = self._start_all(names, groups, specs, boot, stopping)
        launched, boot_failed = self._wait_running(
            starts.started, started_at + self.config.boot_timeout, starts.volume_tags
        )
        failed = starts.failed | boot_failed
        templated = {n for n in starts.started if specs[_group_of(groups, n)].launch_template}
        launched, unkeyed = self._console_host_keys(launched, templated, started_at + self.config.boot_timeout)
        failed.update(unkeyed)
        self._settle_host_keys(launched)
        return LaunchResult(
            launched=tuple(launched),
            failed=failed,
            not_started=starts.not_started,
            throttled=frozenset(starts.throttled),
        )

    def _start_all(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None,
        specs: Mapping[str | None, LaunchSpec],
        boot: Mapping[str, NodeBoot] | None,
        stopping: threading.Event | None,
    ) -> _Starts:
        """Start each node in turn (a retry after a crash adopts its live instance, never starts
        a second); until ``stopping`` is set, the names left then not started. A node with no
        capacity fails alone; a permission or configuration error raises when nothing started,
        else fails the rest."""
        existing, ended = self._lives_by_names(names)  # a retry after a crash: adopt, don't start twice
        out = _Starts()
        for i, name in enumerate(names):
            if stopping is not None and stopping.is_set():
                out.not_started = tuple(names[i:])
                break
            try:
                spec = specs[_group_of(groups, name)]
                spec = self._with_node_config(name, spec, adopting=name in existing, boot=(boot or {}).get(name))
                inst = self._start_one(name, spec, existing.get(name), ended.get(name, ""))
            except _NoCapacity as err:
                out.failed[name] = str(err)
                continue
            except (_Fatal, CloudError) as err:
                error = err.error if isinstance(err, _Fatal) else err
                if not out.started:
                    raise error from None
                for rest in names[i:]:
                    out.failed[rest] = str(error)
                if error.throttled:
                    out.throttled.update(names[i:])
                break
            out.started[name] = inst["InstanceId"]
            if uses_fleet(spec):
                out.volume_tags[name] = worker_tags(spec, self.cluster, name)
        return out

    def _console_host_keys(
        self, launched: Sequence[Instance], templated: set[str], deadline: float
    ) -> tuple[list[Instance], dict[str, str]]:
        """Read the host key of each node launched from a launch template (its user data is the
        template's) from its console output, where cloud-init prints it, until ``deadline``; the
        nodes whose key did not show are terminated and failed (by name, with why)."""
        if self.host_keys is None or not templated:
            return list(launched), {}
        waiting = {i.name: i for i in launched if i.name in templated}
        latest: dict[str, bool] = {}  # instance id -> whether EC2 gives its latest output
        why = f"its SSH host key did not show in its console output within {self.config.boot_timeout:g}s"
        try:
            while waiting:
                for name, inst in list(waiting.items()):
                    key = host_key_in_console(self._console_output(inst.instance_id, latest))
                    if key is not None:
                        self.host_keys.record(name, key)
                        log.info("%s: host key read from the console of %s", name, inst.instance_id)
                        del waiting[name]
                if not waiting or self.clock() >= deadline:
                    break
                self.sleep(min(self.poll_interval, max(0.0, deadline - self.clock())))
        except CloudError as err:
            why = f"its SSH host key cannot be read from its console output: {err}"
        self._terminate_quietly([i.instance_id for i in waiting.values()])
        failed = {
            n: f"instance {i.instance_id}: {why} (a node of a launch template; terminated)" for n, i in waiting.items()
        }
        return [i for i in launched if i.name not in waiting], failed

    def _console_output(self, instance_id: str, latest: dict[str, bool]) -> str:
        """The instance's console output as text ("" for none yet): the latest (Nitro instances),
        else what EC2 buffered at its start. CloudError when it cannot be read."""
        args: dict[str, Any] = {"InstanceId": instance_id}
        if latest.get(instance_id, True):
            args["Latest"] = True
        try:
            resp = self.client.get_console_output(**args)
        except ClientError as err:
            code = error_code(err)
            if code == "InvalidInstanceID.NotFound":
                return ""
            if code in ("UnsupportedOperation", "InvalidParameterValue", "InvalidParameterCombination") and args.get(
                "Latest"
            ):
                latest[instance_id] = False  # not a Nitro instance: its buffered output
                return ""
            raise to_cloud_error(err, f"reading the console output of {instance_id}") from None
        except BotoCoreError as err:
            raise to_cloud_error(err, f"reading the console output of {instance_id}") from None
        return decode_output(str(resp.get("Output") or ""))

    def _settle_host_keys(self, launched: Sequence[Instance]) -> None:
        """The private keys of nodes that run with them are needed no more. (A launch that failed
        keeps its key: the same request, with the same token, may be sent again.)"""
        if self.host_keys is not None:
            for node in launched:
                self.host_keys.settle(node.name)

    def _with_node_config(
        self, name: str, spec: LaunchSpec, *, adopting: bool, boot: NodeBoot | None = None
    ) -> LaunchSpec:
        """``spec`` with elb's cloud-config of the node in its user data (``elb.clouds.ec2.user_data``):
        its host key, when elb describes the worker itself and starts it (an adopted instance has
        the key it was launched with; a launch template holds the user data, so the key of its
        node is read from its console output once it runs, ``_console_host_keys``), and its boot.
        A node of a launch template given a boot is launched with user data of its own, which
        replaces the template's: the template version's user data first, then the boot
        (``template_user_data``); no host key (read from the console as for the others)."""
        if spec.launch_template is not None:
            if boot is None or adopting:
                return spec
            try:
                user_data = node_user_data(self.template_user_data(spec.launch_template), None, boot)
            except ValueError as err:
                raise CloudError(f"cannot launch {name}: {err}") from None
            return dataclasses.replace(spec, user_data=user_data)
        if adopting:
            return spec
        try:
            key = None if self.host_keys is None else self.host_keys.issue(name)
            user_data = node_user_data(spec.user_data, key, boot)
        except ValueError as err:
            raise CloudError(f"cannot launch {name}: {err}") from None
        except OSError as err:
            raise CloudError(f"cannot launch {name}: its host key cannot be kept: {err}") from None
        return dataclasses.replace(spec, user_data=user_data)

    def _wait_running(
        self, started: Mapping[str, str], deadline: float, volume_tags: Mapping[str, Sequence[TagTypeDef]]
    ) -> tuple[list[Instance], dict[str, str]]:
        """Poll until every instance runs with a private IP; terminate those that don't in time.
        The volumes of the nodes in ``volume_tags`` get their tags once they run."""
        waiting = dict(started)
        ready: list[Instance] = []
        failed: dict[str, str] = {}
        to_kill: list[str] = []
        try:
            while waiting:
                for raw in self._poll(list(waiting.values())):
                    iid = raw.get("InstanceId", "")
                    name = next((n for n, i in waiting.items() if i == iid), None)
                    if name is None:
                        continue
                    state = raw.get("State", {}).get("Name", "unknown")
                    if state == "running" and raw.get("PrivateIpAddress"):
                        ready.append(self._to_instance(raw))
                        del waiting[name]
                        if name in volume_tags:
                            tag_volumes(self.client, self.cluster, name, raw, volume_tags[name])
                    elif state not in ("pending", "running"):
                        reason = raw.get("StateReason", {}).get("Message", "")
                        failed[name] = f"instance {iid} went {state} while booting {reason}".strip()
                        to_kill.append(iid)
                        del waiting[name]
                if not waiting:
                    break
                if self.clock() >= deadline:
                    for name, iid in waiting.items():
                        failed[name] = (
                            f"instance {iid} not running with a private address within "
                            f"{self.config.boot_timeout:g}s; terminated"
                        )
                        to_kill.append(iid)
                    waiting.clear()
                    break
                self.sleep(min(self.poll_interval, max(0.0, deadline - self.clock())))
        except CloudError:
            # Cannot watch them any more: do not leave them behind.
            self._terminate_quietly([*waiting.values(), *to_kill])
            raise
        self._terminate_quietly(to_kill)
        return ready, failed

    def _poll(self, ids: list[str]) -> list[InstanceTypeDef]:
        try:
            resp = self.client.describe_instances(InstanceIds=ids)
        except ClientError as err:
            if error_code(err) == "InvalidInstanceID.NotFound":  # eventual consistency right after launch
                return []
            raise to_cloud_error(err, "waiting for new instances") from None
        except BotoCoreError as err:
            raise to_cloud_error(err, "waiting for new instances") from None
        return [i for r in resp.get("Reservations", []) for i in r.get("Instances", [])]

    def _terminate_quietly(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        try:
            self.client.terminate_instances(InstanceIds=list(ids))
            log.warning("terminated %s", ", ".join(ids))
        except (BotoCoreError, ClientError) as err:
            log.error("could not terminate %s: %s", ", ".join(ids), to_cloud_error(err, "terminating"))

    # ------------------------------------------------------------------ terminate, stop, start

    def _owned(self, ids: Sequence[str], verb: str) -> dict[str, InstanceTypeDef]:
        """The instances ``ids`` (terminated ones included), each an elb-managed worker of this
        cluster; any other id, or a malformed one, refuses the whole call (``CloudError``)."""
        malformed = [i for i in ids if not _INSTANCE_ID.fullmatch(i)]
        if malformed:
            raise CloudError(f"refusing to {verb}: not instance ids: {malformed}")
        filters = self._worker_filters((*LIVE_STATES, "terminated"))
        filters.append({"Name": "instance-id", "Values": list(ids)})
        raws = self.describe(filters, f"checking the instances to {verb}")
        owned = {
            r["InstanceId"]: r
            for r in raws
            if "InstanceId" in r and is_cluster_worker(tags_of(r), self.cluster, self.master)
        }
        refused = [i for i in ids if i not in owned]
        if refused:
            raise CloudError(
                f"refusing to {verb} {', '.join(refused)}: not elb-managed workers of cluster {self.cluster}"
            )
        return owned

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Terminate workers of this cluster. Any other id refuses the whole call (nothing terminated)."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return
        raws = self._owned(ids, "terminate")
        owned = {i: r.get("State", {}).get("Name", "") for i, r in raws.items()}
        live = [i for i in ids if owned[i] != "terminated"]
        for start in range(0, len(live), TERMINATE_BATCH):
            batch = live[start : start + TERMINATE_BATCH]
            try:
                self.client.terminate_instances(InstanceIds=batch)
            except (BotoCoreError, ClientError) as err:
                raise to_cloud_error(err, f"terminating {', '.join(batch)}") from None
            log.info("terminating %s", ", ".join(batch))
        if self.host_keys is not None:  # the nodes are gone: so are their keys
            self.host_keys.forget(n for n in (tags_of(raws[i]).get(TAG_NAME) for i in ids) if n)

    def stop(self, instance_ids: Sequence[str]) -> None:
        """Stop workers of this cluster (``StopInstances``) and wait until they are stopped, at
        most ``boot_timeout``. An instance-store root (lost on stop) is refused, as is a spot
        worker (EC2 refuses to stop a one-time request's instance) and any id that is not a
        worker of this cluster: nothing is stopped. Stopped ones are left as they are."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return
        owned = self._owned(ids, "stop")
        gone = [i for i in ids if owned[i].get("State", {}).get("Name") in GONE_STATES]
        if gone:
            raise CloudError(f"cannot stop {', '.join(gone)}: terminated")
        store = [i for i in ids if owned[i].get("RootDeviceType") == "instance-store"]
        if store:
            raise CloudError(f"refusing to stop {', '.join(store)}: an instance-store root is lost on stop")
        spot = [i for i in ids if owned[i].get("InstanceLifecycle") == "spot"]
        if spot:
            raise CloudError(
                f"refusing to stop {', '.join(spot)}: EC2 stops no spot instance of a one-time request (elb's spot "
                "workers are all such)"
            )
        todo = [i for i in ids if owned[i].get("State", {}).get("Name") not in ("stopping", "stopped")]
        if todo:
            try:
                self.client.stop_instances(InstanceIds=todo)
            except (BotoCoreError, ClientError) as err:
                raise _start_stop_error(err, f"stopping {', '.join(todo)}") from None
            log.info("stopping %s", ", ".join(todo))
        waited = self._wait_state(ids, "stopped", self.clock() + self.config.boot_timeout, "stopping")
        if waited[1]:
            raise CloudError("; ".join(waited[1].values()), retryable=True)

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        """Start stopped workers of this cluster (``StartInstances``) and wait until each runs
        with a private address, at most ``boot_timeout``; the address may differ from the one it
        had. Any id that is not a worker of this cluster refuses the whole call. An instance that
        does not run in time is in ``failed`` (by node name) and left as it is."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return LaunchResult(launched=())
        owned = self._owned(ids, "start")
        gone = [i for i in ids if owned[i].get("State", {}).get("Name") in GONE_STATES]
        if gone:
            raise CloudError(f"cannot start {', '.join(gone)}: terminated")
        todo = [i for i in ids if owned[i].get("State", {}).get("Name") in ("stopped", "stopping")]
        if todo:
            try:
                self.client.start_instances(InstanceIds=todo)
            except (BotoCoreError, ClientError) as err:
                raise _start_stop_error(err, f"starting {', '.join(todo)}") from None
            log.info("starting %s", ", ".join(todo))
        running, failed = self._wait_state(ids, "running", self.clock() + self.config.boot_timeout, "starting")
        names = {i: tags_of(r).get(TAG_NAME, i) for i, r in owned.items()}
        return LaunchResult(launched=tuple(running), failed={names[i]: why for i, why in failed.items()})

    def _wait_state(
        self, ids: Sequence[str], target: str, deadline: float, doing: str
    ) -> tuple[list[Instance], dict[str, str]]:
        """Poll until each instance is in ``target`` (running: with a private address): those
        that are, and why each other is not (by id), once all are or at ``deadline``."""
        waiting = set(ids)
        done: list[Instance] = []
        failed: dict[str, str] = {}
        while waiting:
            for raw in self._poll(sorted(waiting)):
                iid = raw.get("InstanceId", "")
                state = raw.get("State", {}).get("Name", "unknown")
                if iid not in waiting:
                    continue
                if state == target and (target != "running" or raw.get("PrivateIpAddress")):
                    done.append(self._to_instance(raw))
                    waiting.discard(iid)
                elif state in GONE_STATES:
                    failed[iid] = f"instance {iid} went {state} while {doing}"
                    waiting.discard(iid)
            if not waiting:
                break
            if self.clock() >= deadline:
                for iid in sorted(waiting):
                    failed[iid] = f"instance {iid} not {target} within {self.config.boot_timeout:g}s of {doing}"
                break
            self.sleep(min(self.poll_interval, max(0.0, deadline - self.clock())))
        return done, failed
