"""Build the adapters a config names. Imports are lazy so that a dry run loads neither boto3
nor ansible-runner, and the local provider needs no AWS libraries."""

# ruff: noqa: PLC0415
from __future__ import annotations

from typing import TYPE_CHECKING

from elb.core.config import Config

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
    if cfg.scheduler == "slurm":
        from elb.schedulers.slurm.driver import Slurm

        return Slurm(cfg, journal)
    from elb.schedulers.sge.driver import GridEngine

    return GridEngine(cfg)


def scheduler_checks(cfg: Config) -> Iterator[Check]:
    """``elb validate``'s checks of the configured scheduler."""
    if cfg.scheduler == "slurm":
        from elb.schedulers.slurm.driver import checks as slurm_checks

        return slurm_checks(cfg)
    from elb.schedulers.sge.driver import checks as sge_checks

    return sge_checks(cfg)


def scheduler_timeout(cfg: Config) -> tuple[float, str]:
    """The time-out of one command of the configured scheduler, and its config key."""
    if cfg.scheduler == "slurm":
        from elb.schedulers.slurm.driver import command_timeout as slurm_timeout

        return slurm_timeout(cfg)
    from elb.schedulers.sge.driver import command_timeout as sge_timeout

    return sge_timeout(cfg)


def job_uses(cfg: Config, since: float, until: float, accounting: Path | None = None) -> list[JobUse]:
    """The configured scheduler's job uses in [since, until), for ``elb spend`` (``accounting``:
    Grid Engine's accounting file, when not where ``sge.root`` and ``sge.cell`` put it)."""
    if cfg.scheduler == "slurm":
        from elb.schedulers.slurm.driver import job_uses as slurm_uses

        return slurm_uses(cfg, since, until, accounting)
    from elb.schedulers.sge.driver import job_uses as sge_uses

    return sge_uses(cfg, since, until, accounting)


def cloud_checks(cfg: Config) -> Iterator[Check]:
    """``elb validate``'s checks of the configured cloud."""
    from elb.clouds.checks import ec2_checks, local_checks

    return local_checks(cfg) if cfg.cloud.provider == "local" else ec2_checks(cfg)


def make_cloud(cfg: Config) -> Cloud:
    if cfg.cloud.provider == "local":
        from elb.clouds.local import LocalCloud

        return LocalCloud.from_config(cfg)
    from elb.clouds.ec2.cloud import Ec2Cloud

    return Ec2Cloud.from_config(cfg)


def make_notices(cfg: Config) -> NoticeSource | None:
    """The reader of EC2's notice queue when ``cloud.ec2.notices`` is on, else None."""
    if cfg.cloud.provider != "ec2" or not cfg.cloud.ec2.notices:
        return None
    from elb.clouds.ec2.notices import Ec2Notices, queue_url, sqs_client

    client = sqs_client(cfg.cloud.ec2)
    return Ec2Notices(client, queue_url(client, cfg.cluster.name))


def make_provisioner(cfg: Config) -> AnsibleProvisioner:
    from elb.provision import AnsibleProvisioner

    groups = cfg.groups(1) if cfg.node_groups is not None else None  # configured groups carry their slots
    return AnsibleProvisioner(cfg.provision, cfg.cluster, cfg.sge, retention=cfg.retention, groups=groups)


def start_metrics(cfg: Config, balancer: Observed) -> None:
    from elb.service.metrics import start_metrics_server

    assert cfg.metrics_port is not None
    start_metrics_server(str(cfg.metrics_address), cfg.metrics_port, balancer, balancer.metrics)
