"""EC2's own settings, the config file's ``cloud.ec2`` (``CONFIG_SECTION`` of its adapter's
module, ``elb.clouds.ec2.entry``), and what they name, here and in its node groups' settings
(``elb.clouds.ec2.groupoptions``): an instance type (c5.2xlarge, r6i.metal, u-6tb1.metal) and a
launch template. Read with ``ec2_settings(cfg)``."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator, model_validator

from elb.core.config import AtLeastOne, Config
from elb.core.durations import PositiveSeconds, Seconds
from elb.core.groups import SPOT_NOT_STOPPED, unique
from elb.core.sections import HoldsSections, Section, section

# What EC2's settings name, here and in its node groups' settings (``elb.clouds.ec2.groupoptions``):
# an instance type (c5.2xlarge, r6i.metal, u-6tb1.metal) and a launch template.
InstanceType = Annotated[str, Field(pattern=r"^[a-z0-9-]+\.[a-z0-9-]+$")]


class LaunchTemplate(BaseModel):
    """An EC2 launch template, by id or by name, and its version."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str | None = Field(None, pattern=r"^lt-[0-9a-f]{8,17}$")
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9()./_-]{3,128}$")
    version: str = Field("$Default", pattern=r"^(\$Default|\$Latest|[1-9][0-9]*)$")

    @model_validator(mode="after")
    def _one_key(self) -> LaunchTemplate:
        if (self.id is None) == (self.name is None):
            raise ValueError("give the launch template's id or its name (exactly one)")
        return self


class Ec2Config(Section):
    """How elb launches EC2 workers (``cloud.provider: ec2``), and the one group's (without ``node_groups``)."""

    region: str | None = None
    ami: str | None = None  # None: the AMI of the existing workers
    instance_types: list[InstanceType] = Field(default_factory=list)  # ordered, each once; empty: the workers' type
    subnets: list[str] = Field(default_factory=list)  # ordered; empty: the workers' subnet
    security_groups: list[str] = Field(default_factory=list)
    key_name: str | None = None
    iam_instance_profile: str | None = None
    # The root volume's type and size in GiB, within EC2's bounds for the type (ROOT_VOLUME_GIB;
    # None: the AMI's). io1/io2 need IOPS elb does not set, st1/sc1 cannot boot: a launch template.
    root_volume_type: Literal["gp3", "gp2", "standard"] | None = None
    root_volume_size: AtLeastOne | None = None
    extra_tags: dict[str, str] = Field(default_factory=dict)
    user_data: str | None = None
    spot: StrictBool = False
    spot_max_price: str | None = None  # US dollars an hour, more than 0 ("0.05"); None: the on-demand price
    spot_fallback_on_demand: StrictBool = True
    boot_timeout: PositiveSeconds = 600.0
    capacity_backoff: Seconds = 600.0
    endpoint_url: str | None = None  # for tests against moto
    # A launch template describes the worker; elb then sets only the instance type, the subnet,
    # the market and its tags (so the settings the template owns are refused here).
    launch_template: LaunchTemplate | None = None
    # Instance metadata of a worker elb describes itself: IMDSv2 only ("required") by default.
    metadata_tokens: Literal["required", "optional"] = "required"
    # Read EC2's notices about workers (spot interruptions, scheduled changes) each pass from the
    # queue `elb ec2-events setup` makes (elb-<cluster.name>-notices).
    notices: StrictBool = False
    # The older name of policy.spot_interruptions_allowed, still read (``settled`` sets the
    # policy's from it); None: not given here.
    spot_interruptions_allowed: AtLeastOne | None = None

    @field_validator("instance_types", "subnets", "security_groups")
    @classmethod
    def _each_once(cls, items: list[str]) -> list[str]:
        unique(items)
        return items

    @field_validator("root_volume_size")
    @classmethod
    def _volume_bounds(cls, size: int | None, info: ValidationInfo) -> int | None:
        kind = info.data.get("root_volume_type")
        most = ROOT_VOLUME_GIB.get(kind or "gp3", ROOT_VOLUME_GIB["gp3"])
        if size is not None and size > most:
            raise ValueError(
                f"at most {most} GiB for a {kind} volume" if kind else f"at most {most} GiB (EC2's largest gp2/gp3)"
            )
        return size

    @field_validator("spot_max_price", mode="before")
    @classmethod
    def _price(cls, price: object) -> object:
        if isinstance(price, int | float) and not isinstance(price, bool):
            price = repr(price)  # 0.05 written unquoted
        if price is None:
            return None
        if not isinstance(price, str) or not _PRICE.fullmatch(price) or float(price) <= 0:
            raise ValueError(f"{price!r}: a price in US dollars an hour, a number more than 0 ('0.05')")
        return price

    @model_validator(mode="after")
    def _template_owns(self) -> Ec2Config:
        if self.launch_template is None:
            return self
        owned = {
            "ami": self.ami,
            "security_groups": self.security_groups or None,
            "key_name": self.key_name,
            "iam_instance_profile": self.iam_instance_profile,
            "root_volume_size": self.root_volume_size,
            "root_volume_type": self.root_volume_type,
            "user_data": self.user_data,
        }
        clash = [k for k, v in owned.items() if v is not None]
        if clash:
            raise ValueError(
                f"{', '.join(clash)}: set in the launch template, not here (with a launch template elb "
                "sets only the instance type, the subnet, the market and its tags)"
            )
        if "metadata_tokens" in self.model_fields_set:
            raise ValueError("metadata_tokens: set the template's metadata options instead")
        return self

    def settled(self, key: str, config: Config) -> Config:
        """``spot_interruptions_allowed``, the setting's older name, is
        ``policy.spot_interruptions_allowed``: given here, the policy takes it (both given: the
        same number, else an error). The one group's warm pool stops idle nodes; with ``spot``
        its nodes are one-time spot instances, which EC2 cannot stop (node groups check their own
        market)."""
        old = self.spot_interruptions_allowed
        if old is not None:
            given = config.policy.spot_interruptions_allowed
            if "spot_interruptions_allowed" in config.policy.model_fields_set and given != old:
                raise ValueError(
                    f"policy.spot_interruptions_allowed: {given} differs from {key}.spot_interruptions_allowed "
                    f"({old}), its older name; set it once, under policy"
                )
            policy = config.policy.model_copy(update={"spot_interruptions_allowed": old})
            config = config.model_copy(update={"policy": policy})
        if config.node_groups is None and self.spot and config.policy.warm_pool.enabled:
            raise ValueError(f"policy.warm_pool: {SPOT_NOT_STOPPED} ({key}.spot is true)")
        return config


# EC2's largest root volume of each type elb sets, in GiB (gp2/gp3: 16 TiB; magnetic: 1 TiB).
ROOT_VOLUME_GIB = {"gp3": 16384, "gp2": 16384, "standard": 1024}
_PRICE = re.compile(r"[0-9]{1,6}(\.[0-9]{1,10})?")


def ec2_settings(cfg: HoldsSections) -> Ec2Config:
    """``cfg``'s ``cloud.ec2`` (its defaults when the file has none)."""
    return section(cfg, Ec2Config)
