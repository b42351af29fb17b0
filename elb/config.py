"""elb's configuration: one YAML file, validated on load.

Every option, its default and its meaning is in the README ("Configuration").
Unknown keys are errors: a typo must not silently fall back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_CONFIG_PATH = Path("/etc/elb/elb.yml")

Seconds = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PolicyConfig(_Strict):
    """When to grow and shrink. Times in seconds."""

    name: Literal["elb", "starcluster", "parallelcluster", "slurm", "static"] = "elb"
    min_nodes: int = Field(0, ge=0)
    max_nodes: int = Field(10, ge=0)
    add_nodes_per_iteration: int = Field(1, ge=1)
    wait_time: Seconds = 900.0  # oldest eligible job must have waited longer than this
    stabilization_time: Seconds = 180.0
    billing: Literal["hour", "second"] = "hour"
    billing_period: float = Field(3600.0, gt=0)
    kill_after: Seconds = 2700.0  # per-period billing: removable this far into the period
    idle_time: Seconds = 600.0  # per-second billing: removable after this long idle
    slots_per_node: int | None = Field(None, ge=1)  # None: learn from hosts / instance type
    boot_time: Seconds = 300.0  # expected launch-to-ready time, for planning
    # Issue 8 (elb policy only; see docs/policy.md). "forecast": launch at once for demand no slot meets
    # within boot_time; "wait_time": issue 2's rule (oldest job waited > wait_time, stabilization_time).
    grow: Literal["forecast", "wait_time"] = "forecast"
    # "cost": keep a paid node to the last poll before its next period (hour) / idle idle_factor x boot_time
    # (second); "timer": issue 2's kill_after / idle_time, only when no job waits, stabilization_time.
    shrink: Literal["cost", "timer"] = "cost"
    poll_interval: float = Field(60.0, gt=0)  # the daemon's poll interval, for planning (match the top level)
    removal_lead: Seconds = (
        60.0  # shrink=cost, per-period billing: a removal must be done this long before the boundary
    )
    idle_factor: float = Field(0.5, ge=0)  # shrink=cost, per-second billing: keep an idle node this many boot times
    period_horizon: Seconds = 0.0  # grow=forecast, per-period billing: wait up to this for slots freed by h_rt
    launch_delay: Seconds = 0.0  # grow=forecast: count a waiting job as demand once it has waited this long

    @model_validator(mode="after")
    def _check(self) -> PolicyConfig:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) is greater than max_nodes ({self.max_nodes})")
        if self.removal_lead >= self.billing_period:
            raise ValueError(
                f"removal_lead ({self.removal_lead:g}) must be less than billing_period ({self.billing_period:g})"
            )
        if self.kill_after >= self.billing_period:
            raise ValueError(
                f"kill_after ({self.kill_after:g}) must be less than billing_period ({self.billing_period:g})"
            )
        return self


class ClusterConfig(_Strict):
    name: str = Field("elb", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    master: str = Field("master", pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")
    node_prefix: str = Field("node", pattern=r"^[a-z][a-z0-9-]{0,40}$")
    node_digits: int = Field(3, ge=1, le=6)
    user: str = Field("sgeuser", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")  # the cluster user


class SgeConfig(_Strict):
    root: Path = Path("/var/lib/gridengine")
    cell: str = "default"
    bin_dir: Path | None = None  # None: find qstat on PATH
    timeout: float = Field(30.0, gt=0)
    queue: str = "all.q"
    hostgroup: str = "@allhosts"


class Ec2Config(_Strict):
    region: str | None = None
    ami: str | None = None  # None: the AMI of the existing workers
    instance_types: list[str] = Field(default_factory=list)  # ordered; empty: the workers' type
    subnets: list[str] = Field(default_factory=list)  # ordered; empty: the workers' subnet
    security_groups: list[str] = Field(default_factory=list)
    key_name: str | None = None
    iam_instance_profile: str | None = None
    root_volume_size: int | None = Field(None, ge=1)  # GiB
    root_volume_type: str | None = None
    extra_tags: dict[str, str] = Field(default_factory=dict)
    user_data: str | None = None
    spot: bool = False
    spot_max_price: str | None = None
    spot_fallback_on_demand: bool = True
    boot_timeout: Seconds = 600.0
    capacity_backoff: Seconds = 600.0
    endpoint_url: str | None = None  # for tests against moto


class LocalConfig(_Strict):
    """The podman-backed provider of the test cluster (see ``elb testcluster``)."""

    image: str = "localhost/elb-node:latest"
    network: str = "elb"
    boot_timeout: Seconds = 120.0


class CloudConfig(_Strict):
    provider: Literal["ec2", "local"] = "ec2"
    ec2: Ec2Config = Field(default_factory=Ec2Config)
    local: LocalConfig = Field(default_factory=LocalConfig)


class ProvisionConfig(_Strict):
    playbook_dir: Path | None = None  # None: the playbooks shipped with elb
    private_data_dir: Path = Path("/var/lib/elb/ansible")
    ssh_user: str = "root"
    ssh_private_key: Path | None = None
    timeout: Seconds = 900.0
    forks: int = Field(10, ge=1)
    extra_vars: dict[str, object] = Field(default_factory=dict)


class BackoffConfig(_Strict):
    """How long launching waits after failed launches or provisionings (doubling per failed round)."""

    initial: float = Field(60.0, gt=0, allow_inf_nan=False)
    max: float = Field(3600.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check(self) -> BackoffConfig:
        if self.initial > self.max:
            raise ValueError(f"initial ({self.initial:g}) is greater than max ({self.max:g})")
        return self


class Config(_Strict):
    poll_interval: float = Field(60.0, gt=0)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    sge: SgeConfig = Field(default_factory=SgeConfig)
    cloud: CloudConfig = Field(default_factory=CloudConfig)
    provision: ProvisionConfig = Field(default_factory=ProvisionConfig)
    state_dir: Path = Path("/var/lib/elb")
    stats_file: Path | None = None  # None: <state_dir>/stats.csv
    metrics_port: int | None = Field(None, ge=1, le=65535)  # None: no metrics endpoint
    log_format: Literal["text", "json"] = "text"
    failed_passes_alarm: int = Field(3, ge=1)  # say so loudly after this many failed passes
    orphan_timeout: Seconds = 600.0  # a tagged worker unknown to journal and SGE this long is terminated
    # A ready node SGE can't reach (absent, or all its queues in state u) this long, with no job
    # on it, is deregistered and terminated. SGE itself marks a silent execd u after max_unheard (5 min).
    unreachable_timeout: Seconds = 600.0
    backoff: BackoffConfig = Field(default_factory=BackoffConfig)

    @model_validator(mode="before")
    @classmethod
    def _policy_knows_the_poll(cls, data: object) -> object:
        """The policy plans with the daemon's poll interval: given once, at the top level."""
        if isinstance(data, dict) and "poll_interval" in data:
            policy = data.get("policy")
            if policy is None:
                policy = {}
            if isinstance(policy, dict):
                if "poll_interval" in policy and policy["poll_interval"] != data["poll_interval"]:
                    raise ValueError(
                        f"policy.poll_interval ({policy['poll_interval']}) differs from poll_interval "
                        f"({data['poll_interval']}); set it once, at the top level"
                    )
                data = {**data, "policy": {**policy, "poll_interval": data["poll_interval"]}}
        return data

    @property
    def stats_path(self) -> Path:
        return self.stats_file if self.stats_file is not None else self.state_dir / "stats.csv"

    @property
    def boot_timeout(self) -> float:
        """Launch-to-ready limit of the configured provider."""
        c = self.cloud
        return c.local.boot_timeout if c.provider == "local" else c.ec2.boot_timeout

    @property
    def journal_path(self) -> Path:
        return self.state_dir / "journal.sqlite"


class ConfigError(Exception):
    """The config file cannot be used; the message names the key and the problem."""


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc}: {msg}")
    return "; ".join(lines)


def parse_config(data: object, source: str = "<config>") -> Config:
    """Validate already-loaded YAML data."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_format_errors(err)}") from None


def load_config(path: Path | None) -> Config:
    """Load and validate a config file. ``None``: the default path if it exists, else defaults."""
    if path is None:
        if not DEFAULT_CONFIG_PATH.exists():
            return Config()
        path = DEFAULT_CONFIG_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return parse_config(data, str(path))
