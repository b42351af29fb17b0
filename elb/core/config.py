"""elb's configuration: one YAML file, validated on load.

Every option, its default and its meaning is in docs/configuration.md.
Unknown keys are errors: a typo must not silently fall back to a default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from ipaddress import IPv4Address
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyAddress,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from elb.core import yamlfile
from elb.core.budget import Budget
from elb.core.durations import PacingSeconds, PositiveSeconds, Seconds, parse
from elb.core.groupoptions import cloud_options, scheduler_options
from elb.core.groups import MAX_SLOTS, NodeGroup, NodeGroups, default_group
from elb.core.naming import MAX_NODES
from elb.core.registry import (
    CLOUDS,
    DEFAULT_CLOUD,
    DEFAULT_SCHEDULER,
    SCHEDULERS,
    SHIPPED_CLOUDS,
    SHIPPED_SCHEDULERS,
    known,
)
from elb.core.sections import Holder, Section, take
from elb.core.warmpool import WarmPool

DEFAULT_CONFIG_PATH = Path("/etc/elb/elb.yml")

# Numbers are strict: YAML's true is not 1, 2.5 is not an integer, "60" is not a number. Times
# (``elb.core.durations``: Seconds, PositiveSeconds, PacingSeconds) are a number of seconds or text
# with a unit ("60", "15m"), finite, at most a year; PositiveSeconds more than 0; PacingSeconds at
# least 1 s. Days (retention) are numbers of days, without a unit.
Factor = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
Count = Annotated[int, Field(strict=True, ge=0)]
AtLeastOne = Annotated[int, Field(strict=True, ge=1)]
NodeCount = Annotated[int, Field(strict=True, ge=0, le=MAX_NODES)]
AddCount = Annotated[int, Field(strict=True, ge=1, le=MAX_NODES)]  # nodes: at least one, at most elb manages
Slots = Annotated[int, Field(strict=True, ge=1, le=MAX_SLOTS)]  # a node's slots (elb.core.groups.MAX_SLOTS)
Days = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=36500)]  # a century at most

MINIMUM_CONFIG = f"cloud: {{provider: {DEFAULT_CLOUD}}}"  # the default cloud, named


# The names elb.core.registry has (the shipped ones, and any a driver or an adapter registered).
SchedulerName = Annotated[str, AfterValidator(lambda name: known(SCHEDULERS, name, "scheduler"))]
CloudName = Annotated[str, AfterValidator(lambda name: known(CLOUDS, name, "cloud provider"))]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PolicyConfig(_Strict):
    """When to grow and shrink. Times in seconds."""

    name: Literal["elb", "starcluster", "parallelcluster", "slurm", "static"] = "elb"
    min_nodes: NodeCount = 0
    max_nodes: NodeCount = 10  # at most MAX_NODES
    add_nodes_per_iteration: AddCount = 1
    wait_time: Seconds = 900.0  # oldest eligible job must have waited longer than this
    stabilization_time: Seconds = 180.0
    billing: Literal["hour", "second"] = "hour"
    billing_period: PositiveSeconds = 3600.0
    kill_after: Seconds = 2700.0  # per-period billing: removable this far into the period
    idle_time: Seconds = 600.0  # per-second billing: removable after this long idle
    slots_per_node: Slots | None = None  # None: learn from hosts / instance type
    boot_time: PacingSeconds = 300.0  # expected launch-to-ready time, for planning
    # elb policy only (see docs/policy.md). "forecast": launch at once for demand no slot meets within
    # boot_time; "wait_time": the original balancer's rule (oldest job waited > wait_time, stabilization_time).
    grow: Literal["forecast", "wait_time"] = "forecast"
    # "cost": keep a paid node to the last poll before its next period (hour) / idle idle_factor x boot_time
    # (second); "timer": the original rule, kill_after / idle_time, only when no job waits, stabilization_time.
    shrink: Literal["cost", "timer"] = "cost"
    poll_interval: PacingSeconds = 60.0  # the daemon's poll interval, for planning (match the top level)
    # Between passes, a cheap look at what waits (a driver that can peek: Grid Engine, Slurm) every
    # peek_interval seconds; new waiting work starts a pass at once, never sooner than peek_gap after
    # the last pass began (elb.core.cadence). 0, or not less than poll_interval: plain polling.
    peek_interval: Seconds = 5.0
    peek_gap: Seconds = 10.0
    removal_lead: Seconds = (
        60.0  # shrink=cost, per-period billing: a removal must be done this long before the boundary
    )
    idle_factor: Factor = 0.5  # shrink=cost, per-second billing: keep an idle node this many boot times
    period_horizon: Seconds = 0.0  # grow=forecast, per-period billing: wait up to this for slots freed by h_rt
    launch_delay: Seconds = 0.0  # grow=forecast: count a waiting job as demand once it has waited this long
    # The one group's warm pool without node_groups (elb.core.warmpool, elb.core.poolplan).
    warm_pool: WarmPool = Field(default_factory=WarmPool)
    # At most this much money a day, week or month: launches are paced to it (elb.core.budget; needs
    # node_groups with a price_per_hour). None: no budget.
    budget: Budget | None = None
    # A job requeued by more spot interruptions than this is bound to on-demand nodes, so that it
    # next runs on one (elb.core.interruptions; how: the scheduler's driver). A cloud's section
    # may set it under an older name (its ``settled``: elb.core.sections).
    spot_interruptions_allowed: AtLeastOne = 2

    @property
    def idle_limit(self) -> float:
        """With per-second billing, how long an idle node is kept before the shrink rule may remove
        it: ``idle_time`` under ``shrink: timer``, ``idle_factor`` boot times under ``cost``."""
        return self.idle_time if self.shrink == "timer" else self.idle_factor * self.boot_time

    @model_validator(mode="after")
    def _check(self) -> PolicyConfig:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) is greater than max_nodes ({self.max_nodes})")
        if self.removal_lead >= self.billing_period:
            raise ValueError(
                f"removal_lead ({self.removal_lead:g}) must be less than billing_period ({self.billing_period:g})"
            )
        if 0 < self.peek_interval < 1:
            raise ValueError(f"peek_interval ({self.peek_interval:g}) must be 0 (no peeks) or at least 1 s")
        if self.kill_after >= self.billing_period:
            raise ValueError(
                f"kill_after ({self.kill_after:g}) must be less than billing_period ({self.billing_period:g})"
            )
        return self


class ClusterConfig(_Strict):
    name: str = Field("elb", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    master: str = Field("master", pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")
    node_prefix: str = Field("node", pattern=r"^[a-z][a-z0-9-]{0,40}$")
    node_digits: Annotated[int, Field(strict=True, ge=1, le=6)] = 3
    user: str = Field("sgeuser", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")  # the cluster user


class _HoldsSection(_Strict):
    """A mapping of the config that holds the sections of registered modules (``CONFIG_SECTION``)
    under their names, as ``HOLDER`` says (``elb.core.sections``): read by their models, kept in
    ``_sections`` by name."""

    HOLDER: ClassVar[Holder]
    _sections: dict[str, Section] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _registered_sections(cls, data: object, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """The sections read by their models (``elb.core.sections.take``), the rest by this
        model; the errors of both said together, each section's where its key is among the keys."""
        if not isinstance(data, dict):
            return handler(data)
        rest, given, reader = take(data, cls.HOLDER, cls.model_fields)
        held: dict[str, Section] = {}
        wrong: list[ErrorDetails] = []
        if reader is not None:
            try:
                held = reader.validate_python(given)
            except ValidationError as err:
                wrong = err.errors()
        try:
            out = handler(rest)
        except ValidationError as err:
            raise _joined(cls, err.errors(), wrong) from None
        if wrong:
            raise _joined(cls, [], wrong)
        out._sections = held
        return out._settled()

    @model_serializer(mode="wrap")
    def _with_sections(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """This mapping as its fields dump it, its sections under their names as their models
        dump them (a dumped config, read again, is the same config)."""
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for name, held in self._sections.items():
            data[name] = held.model_dump(
                mode=info.mode,
                by_alias=bool(info.by_alias),
                exclude_unset=info.exclude_unset,
                exclude_defaults=info.exclude_defaults,
                exclude_none=info.exclude_none,
            )
        return data

    def _settled(self) -> Self:
        """This mapping once its sections are read (by default: as it is)."""
        return self

    def _replaced(self, held: Section) -> Self | None:
        """This mapping with ``held`` in place of the section of its model, None when it holds none."""
        for name, old in self._sections.items():
            if type(old) is type(held):
                out = self.model_copy()
                out._sections = {**self._sections, name: held}
                return out
        return None


def _joined(model: type[_HoldsSection], errors: list[ErrorDetails], wrong: list[ErrorDetails]) -> ValidationError:
    """One error of ``model``: ``errors`` of its fields, and ``wrong`` of its sections after those
    of the fields up to the key that names the configured module (where a field would stand)."""
    order = list(model.model_fields)
    at = order.index(model.HOLDER.key) + 1
    before = [e for e in errors if e["loc"] and e["loc"][0] in order[:at]]
    after = [e for e in errors if e not in before]
    return ValidationError.from_exception_data(
        model.__name__,
        [
            {"type": PydanticCustomError(e["type"], e["msg"]), "loc": tuple(e["loc"]), "input": e["input"]}
            for e in before + wrong + after
        ],
    )


class CloudConfig(_HoldsSection):
    # A registered cloud's own settings: ``cloud.<provider>``.
    HOLDER: ClassVar[Holder] = Holder(CLOUDS, SHIPPED_CLOUDS, "provider", DEFAULT_CLOUD, "cloud", "cloud provider")

    provider: CloudName = DEFAULT_CLOUD  # a cloud of elb.core.registry: ec2, local (podman nodes), or one registered


class BootConfig(_Strict):
    """How a node configures itself at boot (``provision.mode: boot``): the command its image
    runs, by the node's boot document (an Ansible inventory elb writes on the node)."""

    # The node image's ansible-playbook and elb's node_boot.yml on it, the roles beside the
    # playbooks as elb ships them (docs/provisioning.md). None: the same paths as elb's own on
    # the master (an image with elb installed where the master has it).
    ansible_playbook: Path | None = None
    playbook: Path | None = None
    # How long elb waits, after the master admitted a node, for the node to have configured
    # itself and its scheduler's daemon (execd, slurmd) to report; then the node is failed,
    # taken out and terminated.
    timeout: PositiveSeconds = 600.0

    @field_validator("ansible_playbook", "playbook")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_absolute():
            raise ValueError(f"{path}: the path on the node's image must be absolute")
        return path


class ProvisionConfig(_Strict):
    playbook_dir: Path | None = None  # None: the playbooks shipped with elb
    # push: the master configures each new node over SSH (add play). boot: the master does only
    # its own part (admit play) and each node configures itself at boot (``boot``).
    mode: Literal["push", "boot"] = "push"
    boot: BootConfig = Field(default_factory=BootConfig)
    # ansible-runner's directory; not set: <state_dir>/ansible (Config fills it in).
    private_data_dir: Path = Path("/var/lib/elb/ansible")
    ssh_user: str = "root"
    ssh_private_key: Path | None = None
    timeout: Seconds = 900.0  # 0: no limit
    forks: AtLeastOne = 10
    extra_vars: dict[str, object] = Field(default_factory=dict)
    # The SSH host keys elb gives its nodes at launch and checks (elb.provision.hostkeys);
    # None: <private_data_dir>/host-keys.
    host_keys_dir: Path | None = None

    @property
    def host_keys_path(self) -> Path:
        return self.host_keys_dir if self.host_keys_dir is not None else self.private_data_dir / "host-keys"

    @field_validator("extra_vars")
    @classmethod
    def _finite(cls, extra: dict[str, object]) -> dict[str, object]:
        """No .nan or .inf at any depth: Ansible's JSON has no such numbers (the key path says where)."""
        where = _not_finite(extra)
        if where is not None:
            raise ValueError(f"{where}: .nan and .inf are not numbers Ansible can take (quote them to pass text)")
        return extra


def _not_finite(value: object, path: str = "") -> str | None:
    """The key path (``a.b[2]``) of the first NaN or infinity in ``value``, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "(the value)"
    if isinstance(value, dict):
        for k, v in value.items():
            found = _not_finite(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _not_finite(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


class BackoffConfig(_Strict):
    """How long launching waits after failed launches or provisionings (doubling per failed round)."""

    initial: PacingSeconds = 60.0
    max: PacingSeconds = 3600.0

    @model_validator(mode="after")
    def _check(self) -> BackoffConfig:
        if self.initial > self.max:
            raise ValueError(f"initial ({self.initial:g}) is greater than max ({self.max:g})")
        return self


class RetentionConfig(_Strict):
    """How long elb keeps what it writes: Ansible run artifacts and journal events."""

    artifacts_days: Days = 14.0  # days: a successful run's artifacts are deleted after this
    artifacts_mb: AtLeastOne = 500  # MB: the oldest artifacts go first past this total
    failed_factor: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=1)] = 4.0  # failed runs kept longer
    journal_days: Days = 90.0  # days: older events are pruned (a live node keeps its last ones)


class Config(_HoldsSection):
    # A registered scheduler's own settings: the top-level key named as it.
    HOLDER: ClassVar[Holder] = Holder(
        SCHEDULERS, SHIPPED_SCHEDULERS, "scheduler", DEFAULT_SCHEDULER, "scheduler", "scheduler"
    )

    poll_interval: PacingSeconds = 60.0
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    # The batch scheduler elb serves: Grid Engine (elb's passes decide growth from the queue) or
    # Slurm (Slurm's power saving asks for nodes; elb launches, provisions and removes them).
    scheduler: SchedulerName = DEFAULT_SCHEDULER  # a scheduler of elb.core.registry: sge, slurm, or one registered
    cloud: CloudConfig = Field(default_factory=CloudConfig)
    provision: ProvisionConfig = Field(default_factory=ProvisionConfig)
    state_dir: Path = Path("/var/lib/elb")
    stats_file: Path | None = None  # None: <state_dir>/stats.csv
    metrics_port: Annotated[int, Field(strict=True, ge=1, le=65535)] | None = None  # None: no metrics endpoint
    metrics_address: IPvAnyAddress = IPv4Address("127.0.0.1")  # where the metrics endpoint listens
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"  # elb -v: debug, whatever this says
    failed_passes_alarm: AtLeastOne = 3  # say so loudly after this many failed passes
    orphan_timeout: Seconds = 600.0  # a tagged worker unknown to the journal and the scheduler this long is terminated
    # A ready node the scheduler can't reach (absent, or all its queue instances unreachable) this
    # long, with no job on it, is deregistered and terminated. (Grid Engine itself marks a silent
    # execd unreachable after its max_unheard, 5 min.)
    unreachable_timeout: Seconds = 600.0
    backoff: BackoffConfig = Field(default_factory=BackoffConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    # The kinds of worker elb adds (elb.core.groups, docs/groups.md). None: one group built from
    # policy.slots_per_node/min_nodes/max_nodes and the scheduler's and cloud's sections
    # (their ``group_options``: elb.core.groupoptions).
    node_groups: list[NodeGroup] | None = Field(None, min_length=1)

    @property
    def sections(self) -> tuple[Section, ...]:
        """The schedulers' and clouds' own settings this config holds (``elb.core.sections.section``
        reads them)."""
        return tuple(s for _, s in self.placed_sections)

    def with_section(self, held: Section) -> Config:
        """This config with ``held`` in place of the section of its model it holds, not checked
        again (``KeyError`` when it holds none)."""
        cloud = self.cloud._replaced(held)
        if cloud is not None:
            return self.model_copy(update={"cloud": cloud})
        out = self._replaced(held)
        if out is None:
            raise KeyError(f"this config holds no {type(held).__name__}")
        return out

    @property
    def placed_sections(self) -> tuple[tuple[str, Section], ...]:
        """The sections this config holds, each with its key (``cloud.`` before a cloud's name)."""
        return tuple(self._sections.items()) + tuple((f"cloud.{k}", s) for k, s in self.cloud._sections.items())

    @field_validator("node_groups")
    @classmethod
    def _slots(cls, groups: list[NodeGroup] | None) -> list[NodeGroup] | None:
        for g in groups or ():
            if g.slots > MAX_SLOTS:
                raise ValueError(f"group {g.name!r}: slots: at most {MAX_SLOTS}, a node's most ({g.slots} given)")
        return groups

    @model_validator(mode="before")
    @classmethod
    def _groups_of_the_drivers(cls, data: object) -> object:
        """Each node group's keys of the configured scheduler and cloud go to their options
        (``elb.core.groups.NodeGroup``): the groups are read here, knowing which they are. A
        scheduler or cloud elb does not know leaves them to its own error."""
        if not isinstance(data, dict) or not isinstance(data.get("node_groups"), list):
            return data
        scheduler = data.get("scheduler", DEFAULT_SCHEDULER)
        cloud = data.get("cloud", {})
        provider = cloud.provider if isinstance(cloud, CloudConfig) else DEFAULT_CLOUD
        if isinstance(cloud, dict):
            provider = cloud.get("provider", DEFAULT_CLOUD)
        if not (
            isinstance(scheduler, str) and scheduler in SCHEDULERS and isinstance(provider, str) and provider in CLOUDS
        ):
            return data
        read = _ReadGroups.model_validate(
            {"node_groups": data["node_groups"]}, context={"scheduler": scheduler, "cloud": provider}
        )
        return {**data, "node_groups": read.node_groups}

    @model_validator(mode="before")
    @classmethod
    def _policy_knows_the_poll(cls, data: object) -> object:
        """The policy plans with the daemon's poll interval: given once, at the top level."""
        if isinstance(data, dict) and "poll_interval" in data:
            policy = data.get("policy")
            if policy is None:
                policy = {}
            if isinstance(policy, dict):
                if "poll_interval" in policy and _seconds_or_same(policy["poll_interval"]) != _seconds_or_same(
                    data["poll_interval"]
                ):
                    raise ValueError(
                        f"policy.poll_interval ({policy['poll_interval']}) differs from poll_interval "
                        f"({data['poll_interval']}); set it once, at the top level"
                    )
                data = {**data, "policy": {**policy, "poll_interval": data["poll_interval"]}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _ansible_under_state_dir(cls, data: object) -> object:
        """``provision.private_data_dir`` not set: ``<state_dir>/ansible``, so that ``state_dir``
        holds everything elb writes (its host keys too, unless ``host_keys_dir``). Without
        ``state_dir`` the default's (``/var/lib/elb/ansible``); a ``state_dir`` of the wrong kind
        is left to its own check."""
        if not isinstance(data, dict) or not isinstance(data.get("state_dir"), str | Path):
            return data
        under = Path(data["state_dir"]) / "ansible"
        provision = data.get("provision", {})
        if isinstance(provision, ProvisionConfig):
            if "private_data_dir" in provision.model_fields_set:
                return data
            return {**data, "provision": provision.model_copy(update={"private_data_dir": under})}
        if isinstance(provision, dict) and "private_data_dir" not in provision:
            return {**data, "provision": {**provision, "private_data_dir": str(under)}}
        return data

    @model_validator(mode="after")
    def _budget_has_prices(self) -> Config:
        """A budget is money: every node group needs its price (``price_per_hour``)."""
        if self.policy.budget is not None and (
            self.node_groups is None or any(g.price_per_hour is None for g in self.node_groups)
        ):
            raise ValueError(
                "policy.budget: a budget needs the nodes' prices: set node_groups, each with a price_per_hour "
                "(US dollars an hour)"
            )
        return self

    def _settled(self) -> Config:
        """The config as its sections settle it (``elb.core.sections.Section.settled``: the
        scheduler's, then the cloud's), then with ``node_groups`` (``_node_groups``)."""
        cfg = self
        for key, held in self.placed_sections:
            settled = held.settled(key, cfg)
            if not isinstance(settled, Config):
                raise TypeError(f"{type(held).__name__}.settled: not a Config")
            cfg = settled
        return cfg._node_groups()

    def _node_groups(self) -> Config:
        """With ``node_groups``, each group says its own size, limits, queues and host group:
        the whole-cluster settings that would contradict them are refused, ``policy.max_nodes``
        (when set) caps all groups together (else the sum of theirs), and ``policy.min_nodes``
        becomes the sum of the groups' minimums."""
        if self.node_groups is None:
            return self
        clash = [
            f"policy.{k}" for k in ("min_nodes", "slots_per_node", "warm_pool") if k in self.policy.model_fields_set
        ]
        clash += [
            f"{key}.{k}" for key, held in self.placed_sections for k in held.GROUP_KEYS if k in held.model_fields_set
        ]
        if clash:
            raise ValueError(
                f"node_groups: {', '.join(clash)} cannot be set with node_groups (each group sets its own "
                "slots, min_nodes, queues, hostgroup and warm_pool; policy.max_nodes caps all groups together)"
            )
        total = None if "max_nodes" not in self.policy.model_fields_set else self.policy.max_nodes
        try:
            groups = NodeGroups(groups=self.node_groups, max_nodes=total)
        except ValidationError as err:
            why = "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
            raise ValueError(f"node_groups: {why}") from None
        policy = self.policy.model_copy(
            update={"min_nodes": sum(g.min_nodes for g in groups.groups), "max_nodes": groups.total_max_nodes}
        )
        return self.model_copy(update={"policy": policy})

    def groups(self, slots_per_node: int) -> NodeGroups:
        """The node groups elb adds nodes of: ``node_groups``, or the one group today's settings
        describe (``slots_per_node``: the size of a new node, as the daemon learnt it). Built
        once per config and size (``_GROUPS``): a pass, and a replay's every decision, asks often."""
        key = (id(self), slots_per_node)
        hit = _GROUPS.get(key)
        if hit is not None and hit[0] is self:
            return hit[1]
        groups = self._groups(slots_per_node)
        if len(_GROUPS) >= _GROUPS_KEPT:
            _GROUPS.pop(next(iter(_GROUPS)))
        _GROUPS[key] = (self, groups)  # the config held: its id is not reused while kept
        return groups

    def _groups(self, slots_per_node: int) -> NodeGroups:
        if self.node_groups is not None:
            return NodeGroups(groups=self.node_groups, max_nodes=self.policy.max_nodes)
        p = self.policy
        group = default_group(
            slots_per_node=slots_per_node,
            max_nodes=p.max_nodes,
            min_nodes=p.min_nodes,
            warm_pool=p.warm_pool,
            scheduler_options=scheduler_options(self.scheduler).of_config(self),
            cloud_options=cloud_options(self.cloud.provider).of_config(self),
        )
        return NodeGroups(groups=[group])

    @property
    def has_warm_pool(self) -> bool:
        """Whether idle nodes are stopped into a warm pool (``policy.warm_pool`` or a node group's)."""
        return self.policy.warm_pool.enabled or any(g.warm_pool.enabled for g in self.node_groups or ())

    @property
    def stats_path(self) -> Path:
        return self.stats_file if self.stats_file is not None else self.state_dir / "stats.csv"

    @property
    def journal_path(self) -> Path:
        return self.state_dir / "journal.sqlite"


def _seconds_or_same(value: object) -> object:
    """A time as seconds when it reads as one (``"1m"`` and ``60`` are the same), else as it is."""
    if isinstance(value, str):
        try:
            return parse(value)
        except ValueError:
            return value
    return value


class _ReadGroups(BaseModel):
    """``node_groups`` read with the configured scheduler and cloud (``Config._groups_of_the_drivers``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_groups: list[NodeGroup] = Field(min_length=1)


# The node groups of the last configs asked (``Config.groups``), by (config id, slots).
_GROUPS: dict[tuple[int, int], tuple[Config, NodeGroups]] = {}
_GROUPS_KEPT = 32


class ConfigError(Exception):
    """The config file cannot be used; the message names the file, the place, the key and the problem."""


def _format_errors(err: ValidationError, doc: yamlfile.Document | None) -> str:
    lines = []
    errors = err.errors()
    top = {e["msg"] for e in errors if tuple(e["loc"]) == ("poll_interval",)}
    for e in errors:
        loc: Sequence[object] = e["loc"]
        if tuple(loc) == ("policy", "poll_interval") and e["msg"] in top:
            continue  # the top level's value, copied into the policy: said once
        msg = e["msg"].removeprefix("Value error, ")
        if not loc:  # a check across keys names the key it is about: "Value error, node_groups: ..."
            named = re.fullmatch(r"([a-z_]+(?:\.[a-z_]+)*): (.*)", msg, re.DOTALL)
            if named is not None:
                loc, msg = tuple(named.group(1).split(".")), named.group(2)
        key = ".".join(str(p) for p in loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        where = doc.position(loc) if doc is not None else None
        lines.append(f"{where}: {key}: {msg}" if where else f"{key}: {msg}")
    return "; ".join(lines)


def parse_config(data: object, source: str = "<config>", doc: yamlfile.Document | None = None) -> Config:
    """Validate already-loaded data (``{}``: every default). ``doc``: where keys are in the file."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_format_errors(err, doc)}") from None


def check_paths(cfg: Config) -> list[tuple[str, str]]:
    """Paths the config names that would stop elb later, as (key, problem)."""
    problems = []
    dirs = [("state_dir", cfg.state_dir), ("provision.private_data_dir", cfg.provision.private_data_dir)]
    if cfg.provision.host_keys_dir is not None:  # else under private_data_dir, checked with it
        dirs.append(("provision.host_keys_dir", cfg.provision.host_keys_dir))
    for key, path in dirs:
        if path.exists() and not path.is_dir():
            problems.append((key, f"{path} exists and is not a directory"))
        elif not path.exists() and any(p.exists() and not p.is_dir() for p in path.parents):
            problems.append((key, f"{path} cannot be created: a parent is not a directory"))
    if cfg.stats_path.is_dir():
        problems.append(("stats_file", f"{cfg.stats_path} is a directory"))
    return problems


def load_config(path: Path | None = None, *, choose: str = "give another with --config") -> Config:
    """Load and validate a config file (``None``: ``DEFAULT_CONFIG_PATH``); ``choose`` says, in a
    missing file's error, how the caller picks another.

    There is no config without a file: elb never runs on defaults alone, and an empty file is
    an error too. Every error is one ``ConfigError`` line: ``config PATH: line L, column C: ...``.
    """
    path = DEFAULT_CONFIG_PATH if path is None else path
    source = f"config {path}"
    try:
        with path.open("rb") as f:
            raw = f.read(yamlfile.MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file (elb needs a config file; {choose})") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a directory, not a file") from None
    except OSError as err:
        raise ConfigError(f"{source}: cannot read: {err.strerror or type(err).__name__}") from None
    if len(raw) > yamlfile.MAX_BYTES:
        raise ConfigError(f"{source}: larger than {yamlfile.MAX_BYTES} bytes: not a config file")
    try:
        doc = yamlfile.load(yamlfile.decode(raw))
    except yamlfile.YamlFileError as err:
        raise ConfigError(f"{source}: {err}") from None
    if doc.data is None or doc.data == {}:
        raise ConfigError(
            f"{source}: the file is empty; a config has at least one key, e.g. '{MINIMUM_CONFIG}' "
            "(every key left out has its default: docs/configuration.md)"
        )
    if not isinstance(doc.data, dict):
        raise ConfigError(
            f"{source}: line 1, column 1: the top level must be a mapping of keys, not a {type(doc.data).__name__}"
        )
    cfg = parse_config(doc.data, source, doc)
    problems = []
    for key, problem in check_paths(cfg):
        where = doc.position(key.split("."))
        problems.append(f"{where}: {key}: {problem}" if where else f"{key}: {problem}")
    if problems:
        raise ConfigError(f"{source}: {'; '.join(problems)}")
    return cfg
