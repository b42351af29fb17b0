"""The EC2 cloud: launch, list, stop, start and terminate the workers of one cluster with boto3.

:class:`Ec2Cloud` is the adapter the rest of elb uses (``elb.core.interfaces.Cloud`` and the
capabilities it declares); it checks its settings, makes the EC2 client and hands each call to
the part that holds it, all of them sharing one :class:`Ec2Context` (the client, the settings, the
clock and sleep injected so that tests control time):

* ``instances.Instances``: listing by tag and polling by id (``DescribeInstances``), the slots of
  an instance type (``DescribeInstanceTypes``);
* ``templates.Templates`` and ``specs.Specs``: how a node of each node group is launched
  (``LaunchSpec``), from the config, the newest worker and the launch templates;
* ``launcher.Launcher``: one instance per node, ``RunInstances`` over its choices or
  ``CreateFleet``, with capacity back-off and idempotent tokens (``launch_requests``);
* ``node_config.NodeConfig``: the node's cloud-config and SSH host key;
* ``lifecycle.Lifecycle``: waiting for new instances to run, terminate, stop and start;
* ``health`` and ``tags``: status checks, and the ``CreateTags`` of node groups.

Safety rules, enforced by those parts whatever the caller passes: every instance elb launches
is tagged at creation with the cluster, role, ``elb:managed-by``, node name and node group;
listing and terminating are filtered by those tags (server side, then checked again on the
answer), the master never matches; launching is idempotent (a live worker of the same name is
adopted; ``launch_requests.client_token``). Throttling is retried by botocore's ``standard``
retry mode; permission errors raise :class:`CloudError` naming the missing permission
(``errors``), without retrying.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.config import Ec2Config, LaunchTemplate, ec2_settings
from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import to_cloud_error
from elb.clouds.ec2.health import status_checks
from elb.clouds.ec2.instances import Instances
from elb.clouds.ec2.launch_requests import Choice, LaunchSpec
from elb.clouds.ec2.launcher import Launcher, group_of
from elb.clouds.ec2.lifecycle import Lifecycle
from elb.clouds.ec2.node_config import NodeConfig
from elb.clouds.ec2.specs import Specs
from elb.clouds.ec2.tags import check_extra_tags, tag_groups
from elb.clouds.ec2.templates import Templates
from elb.core.config import Config
from elb.core.groups import NodeGroups
from elb.core.interfaces import CloudError, Instance, LaunchResult, NodeBoot, Notice
from elb.provision.hostkeys import HostKeys

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import FilterTypeDef, InstanceTypeDef


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
        self.context = Ec2Context(
            config=config,
            cluster=cluster,
            master=master,
            slots_per_node=slots_per_node,
            client=client if client is not None else make_client(config),
            clock=clock,
            sleep=sleep,
            poll_interval=poll_interval,
            node_groups=node_groups,
            host_keys=host_keys,
        )
        self.instances = Instances(self.context)
        self.lifecycle = Lifecycle(self.context, self.instances)
        self.templates = Templates(self.context)
        self.specs = Specs(self.context, self.instances, self.templates)
        self.node_config = NodeConfig(self.context, self.templates)
        self.launcher = Launcher(self.context, self.instances, self.node_config)

    # What the adapter's parts share lives in its ``context``; the adapter shows what its callers
    # read, and takes the client and the host keys a caller sets after it is made (tests, a
    # stubbed client), so that every part sees them.
    @property
    def config(self) -> Ec2Config:
        return self.context.config

    @property
    def cluster(self) -> str:
        return self.context.cluster

    @property
    def master(self) -> str:
        return self.context.master

    @property
    def node_groups(self) -> NodeGroups | None:
        return self.context.node_groups

    @property
    def clock(self) -> Callable[[], float]:
        return self.context.clock

    @property
    def client(self) -> EC2Client:
        return self.context.client

    @client.setter
    def client(self, client: EC2Client) -> None:
        self.context.client = client

    @property
    def host_keys(self) -> HostKeys | None:
        return self.context.host_keys

    @host_keys.setter
    def host_keys(self, keys: HostKeys | None) -> None:
        self.context.host_keys = keys

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
        return self.instances.describe(filters, doing)

    def list_workers(self) -> list[Instance]:
        """The cluster's elb-managed workers that are not terminated (or terminating)."""
        return self.instances.workers()

    def health(self, instances: Sequence[Instance]) -> list[Notice]:
        """EC2's status checks of ``instances``: a notice for each impaired one (``health.status_checks``)."""
        return status_checks(self.client, instances, self.clock)

    def tag_groups(self, groups: Mapping[str, str]) -> None:
        """Give each worker (instance id -> node group name) its group's tag (``tags.tag_groups``)."""
        tag_groups(self.client, groups)

    def slots_for(self, instance_type: str) -> int:
        """Slots of a node of this type: configured, else its default vCPUs (cached)."""
        return self.instances.slots_for(instance_type)

    def new_node_slots(self) -> int | None:
        """Slots of the node ``launch`` would start first (``Specs.new_node_slots``)."""
        return self.specs.new_node_slots()

    def template_versions(self) -> dict[str, str]:
        """Each node group's launch template version now, by group name (``Templates.versions``)."""
        return self.templates.versions()

    def launch_templates(self) -> list[LaunchTemplate]:
        """The launch templates the config names (``cloud.ec2`` and the node groups'), once each."""
        return self.templates.launch_templates()

    def template_version(self, template: LaunchTemplate) -> Any:
        """The launch template version ``template`` names, as DescribeLaunchTemplateVersions has it."""
        return self.templates.version(template)

    def template_user_data(self, template: LaunchTemplate) -> str | None:
        """The user data of the launch template's version, as text (None: it has none)."""
        return self.templates.user_data(template)

    def launch_spec(self) -> LaunchSpec:
        """How a node is launched without node groups (``Specs.launch_spec``)."""
        return self.specs.launch_spec()

    def spec_for(self, group: str | None) -> LaunchSpec:
        """How a node of node group ``group`` is launched (``Specs.spec_for``)."""
        return self.specs.spec_for(group)

    # ------------------------------------------------------------------ launch

    def backed_off(self, choice: Choice) -> bool:
        """Whether ``choice`` failed for capacity within ``capacity_backoff`` (``Launcher.backed_off``)."""
        return self.launcher.backed_off(choice)

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
        specs = {group: self.spec_for(group) for group in dict.fromkeys(group_of(groups, n) for n in names)}
        started_at = self.clock()
        starts = self.launcher.start_all(names, groups, specs, boot, stopping)
        launched, boot_failed = self.lifecycle.wait_running(
            starts.started, started_at + self.config.boot_timeout, starts.volume_tags
        )
        failed = starts.failed | boot_failed
        templated = {n for n in starts.started if specs[group_of(groups, n)].launch_template}
        launched, unkeyed = self.node_config.console_host_keys(
            launched, templated, started_at + self.config.boot_timeout
        )
        failed.update(unkeyed)
        self.node_config.settle_host_keys(launched)
        return LaunchResult(
            launched=tuple(launched),
            failed=failed,
            not_started=starts.not_started,
            throttled=frozenset(starts.throttled),
        )

    # ------------------------------------------------------------------ terminate, stop, start

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Terminate workers of this cluster. Any other id refuses the whole call (nothing terminated)."""
        self.lifecycle.terminate(instance_ids)

    def stop(self, instance_ids: Sequence[str]) -> None:
        """Stop workers of this cluster and wait until they are stopped (``Lifecycle.stop``)."""
        self.lifecycle.stop(instance_ids)

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        """Start stopped workers of this cluster and wait until each runs (``Lifecycle.start``)."""
        return self.lifecycle.start(instance_ids)
