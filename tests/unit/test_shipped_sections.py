"""The shipped schedulers' and clouds' settings are their modules' sections (``CONFIG_SECTION``),
read as a registered one's; the file's format and its errors are what they were when they were
fields of the config."""

from __future__ import annotations

import pytest

from elb.clouds.ec2.config import Ec2Config, ec2_settings
from elb.clouds.local import local_settings
from elb.core.config import ConfigError, parse_config
from elb.core.sections import section
from elb.schedulers.sge.config import SgeConfig, sge_settings
from elb.schedulers.slurm.config import SlurmConfig, slurm_settings


def test_a_shipped_section_is_read_whichever_scheduler_and_cloud_are_configured() -> None:
    cfg = parse_config(
        {"scheduler": "slurm", "sge": {"timeout": 5}, "cloud": {"provider": "local", "ec2": {"region": "eu-west-1"}}}
    )
    assert sge_settings(cfg).timeout == 5.0 and slurm_settings(cfg) == SlurmConfig()
    assert ec2_settings(cfg).region == "eu-west-1" and local_settings(cfg).boot_timeout == 120.0
    with pytest.raises(ConfigError, match=r"^<config>: sge\.timeout: more than 0 s"):
        parse_config({"scheduler": "slurm", "sge": {"timeout": 0}})


def test_a_config_without_a_section_reads_its_defaults() -> None:
    cfg = parse_config({})
    assert sge_settings(cfg) == SgeConfig() and ec2_settings(cfg) == Ec2Config()
    assert section(cfg, SlurmConfig) is section(cfg, SlurmConfig)  # made once


def test_the_sections_errors_are_said_with_the_others_in_the_order_of_the_keys() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "provision": {"forks": 0},
                "sge": {"timeout": "soon"},
                "poll_interval": "often",
                "cloud": {"ec2": {"spot": 1}, "provider": "ec2", "local": {"nets": 1}},
            }
        )
    keys = [part.split(": ")[0] for part in str(err.value).removeprefix("<config>: ").split("; ")]
    assert keys == ["poll_interval", "sge.timeout", "cloud.ec2.spot", "cloud.local.nets", "provision.forks"]


def test_a_section_is_replaced_typed_and_a_section_not_held_is_a_key_error() -> None:
    cfg = parse_config({"sge": {"timeout": 5}, "cloud": {"provider": "local"}})
    faster = cfg.with_section(sge_settings(cfg).model_copy(update={"timeout": 1.0}))
    assert sge_settings(faster).timeout == 1.0 and sge_settings(cfg).timeout == 5.0
    local = cfg.with_section(local_settings(cfg).model_copy(update={"boot_timeout": 9.0}))
    assert local_settings(local).boot_timeout == 9.0 and sge_settings(local).timeout == 5.0
    with pytest.raises(KeyError, match="SlurmConfig"):
        cfg.with_section(SlurmConfig(timeout=2))


def test_a_dumped_config_read_again_is_the_same_config_its_sections_included() -> None:
    """The tests and tools that write a config file from a ``Config`` (``model_dump``) lost the
    drivers' sections: an elb started on that file read Slurm's default requests directory."""
    import yaml

    from elb.core.config import parse_config

    cfg = parse_config(
        {
            "scheduler": "slurm",
            "slurm": {"requests": "/srv/requests", "register_timeout": 10},
            "cloud": {"provider": "local", "local": {"network": "lab"}},
        }
    )
    dumped = cfg.model_dump(mode="json", exclude_none=True)
    assert dumped["slurm"]["requests"] == "/srv/requests" and dumped["cloud"]["local"]["network"] == "lab"
    assert parse_config(yaml.safe_load(yaml.safe_dump(dumped))) == cfg
