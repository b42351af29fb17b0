"""Build the adapters a config names: the scheduler's and the cloud's by their names in
``elb.core.registry``, the provisioner (with what the scheduler's nodes need of it) and the
metrics server. Imports are lazy so that a dry run loads neither boto3 nor ansible-runner, and
the local provider needs no AWS libraries."""

# ruff: noqa: PLC0415
from __future__ import annotations

from typing import TYPE_CHECKING

from elb.core import assets
from elb.core.config import Config
from elb.core.drivers import cloud_module, node_plays, scheduler_module

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from elb.core.attribution import JobUse
    from elb.core.checks import Check
    from elb.core.interfaces import Cloud, NoticeSource
    from elb.core.scheduler import Scheduler
    from elb.provision import AnsibleProvisioner
    from elb.service.journal import Journal
    from elb.service.metrics import Observed


def make_scheduler(cfg: Config, journal: Journal) -> Scheduler:
    """The driver of the configured scheduler (``scheduler``); ``journal``: where a scheduler
    that asks for nodes by name (Slurm) keeps its asks."""
    return scheduler_module(cfg.scheduler).make(cfg, journal)


def scheduler_checks(cfg: Config) -> Iterator[Check]:
    """``elb validate``'s checks of the configured scheduler."""
    return scheduler_module(cfg.scheduler).checks(cfg)


def scheduler_timeout(cfg: Config) -> tuple[float, str]:
    """The time-out of one command of the configured scheduler, and its config key."""
    return scheduler_module(cfg.scheduler).command_timeout(cfg)


def job_uses(cfg: Config, since: float, until: float, accounting: Path | None = None) -> list[JobUse]:
    """The configured scheduler's job uses in [since, until), for ``elb spend`` (``accounting``:
    Grid Engine's accounting file, when not where ``sge.root`` and ``sge.cell`` put it)."""
    return scheduler_module(cfg.scheduler).job_uses(cfg, since, until, accounting)


def accounting_note(cfg: Config, accounting: Path | None = None) -> str | None:
    """What ``elb spend`` says of the configured scheduler's accounting (None: nothing)."""
    return scheduler_module(cfg.scheduler).accounting_note(cfg, accounting)


def cloud_checks(cfg: Config) -> Iterator[Check]:
    """``elb validate``'s checks of the configured cloud."""
    return cloud_module(cfg.cloud.provider).checks(cfg)


def make_cloud(cfg: Config) -> Cloud:
    return cloud_module(cfg.cloud.provider).make(cfg)


def make_notices(cfg: Config) -> NoticeSource | None:
    """The reader of the configured cloud's notices when it has one and the config turns it on
    (EC2: ``cloud.ec2.notices``), else None."""
    return cloud_module(cfg.cloud.provider).notices(cfg)


def make_provisioner(cfg: Config) -> AnsibleProvisioner:
    """The provisioner, with what the configured scheduler's nodes need of it
    (``elb.core.drivers.node_plays``)."""
    from elb.provision import AnsibleProvisioner

    groups = cfg.groups(1) if cfg.node_groups is not None else None  # configured groups carry their slots
    return AnsibleProvisioner(cfg.provision, cfg.cluster, node_plays(cfg), retention=cfg.retention, groups=groups)


def playbooks_problem(cfg: Config) -> str | None:
    """Why elb cannot provision from the configured playbook directory: a playbook the
    configured scheduler runs on the master is not there (``NodePlays.needed``); None: it can."""
    needed = node_plays(cfg).needed(boot=cfg.provision.mode == "boot")
    return assets.playbook_dir_problem(cfg.provision.playbook_dir, needed)


def start_metrics(cfg: Config, balancer: Observed) -> None:
    from elb.service.metrics import start_metrics_server

    assert cfg.metrics_port is not None
    start_metrics_server(str(cfg.metrics_address), cfg.metrics_port, balancer, balancer.metrics)
