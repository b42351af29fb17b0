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

import dataclasses
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

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
from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import CAPACITY_CODES, TRANSIENT_CODES, error_code, to_cloud_error
from elb.clouds.ec2.health import status_checks
from elb.clouds.ec2.instances import GONE_STATES, Instances
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
from elb.clouds.ec2.lifecycle import Lifecycle, terminate_quietly
from elb.clouds.ec2.specs import Specs
from elb.clouds.ec2.tags import (
    check_extra_tags,
    tag_groups,
)
from elb.clouds.ec2.templates import Templates
from elb.clouds.ec2.user_data import node_user_data
from elb.core.config import Config
from elb.core.groups import NodeGroups
from elb.core.interfaces import (
    CloudError,
    Instance,
    LaunchResult,
    NodeBoot,
    Notice,
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
T = TypeVar("T")

_MAX_TOKEN_GENERATIONS = 4
_MAX_SEND_ATTEMPTS = 2  # a launch request is sent with one token (botocore retries inside each)
_NO_FRESH_REQUEST = "no fresh ClientToken: EC2 answered each with an ended instance or another request"


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


class _Shared(Generic[T]):
    """An attribute of the adapter that its parts share: kept in its ``context``, read and set there."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, cloud: Ec2Cloud, owner: type | None = None) -> T:
        return cast("T", getattr(cloud.context, self.name))

    def __set__(self, cloud: Ec2Cloud, value: T) -> None:
        setattr(cloud.context, self.name, value)


class Ec2Cloud:
    """:class:`elb.core.interfaces.Cloud` on EC2 for one cluster."""

    # A started instance boots: systemd starts the exec daemon the sge_exec role enabled, and
    # mounts the shared directories from fstab (the nfs_client role's lines).
    restart_runs_services = True

    config: _Shared[Ec2Config] = _Shared()
    cluster: _Shared[str] = _Shared()
    master: _Shared[str] = _Shared()
    slots_per_node: _Shared[int | None] = _Shared()
    client: _Shared[EC2Client] = _Shared()
    clock: _Shared[Callable[[], float]] = _Shared()
    sleep: _Shared[Callable[[float], None]] = _Shared()
    poll_interval: _Shared[float] = _Shared()
    node_groups: _Shared[NodeGroups | None] = _Shared()
    host_keys: _Shared[HostKeys | None] = _Shared()

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
        self._backoff: dict[Choice, float] = {}  # choice -> avoid until (clock seconds)
        # Tokens whose request launched nothing (a capacity error; a fleet of errors only, which
        # EC2 would answer again as it did): never sent again by this process.
        self._spent: set[str] = set()

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
        until = self._backoff.get(choice)
        return until is not None and self.clock() < until

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
            now = {r.get("InstanceId"): r for r in self.instances.poll(ids)}
        except CloudError as err:
            terminate_quietly(self.client, ids)
            raise _Fatal(err) from None
        # Not listed yet (eventual consistency): taken as just started.
        live = [i for i in ids if now.get(i, {}).get("State", {}).get("Name") not in GONE_STATES]
        if not live:
            # The token belonged to an earlier life of this name: use the next generation.
            log.info("%s: token of ended %s, retrying with a new one", name, ", ".join(ids))
            return "again"
        if len(live) > 1:  # one node, one instance: never keep a second one billing
            terminate_quietly(self.client, live[1:])
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
                found = self.instances.live_by_name(name)
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
        launched, boot_failed = self.lifecycle.wait_running(
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
        existing, ended = self.instances.lives_by_names(names)  # a retry after a crash: adopt, don't start twice
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
        terminate_quietly(self.client, [i.instance_id for i in waiting.values()])
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
                user_data = node_user_data(self.templates.user_data(spec.launch_template), None, boot)
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
