"""Slurm's own settings, the config file's ``slurm:`` (``CONFIG_SECTION`` of its driver's module,
``elb.schedulers.slurm.driver``; docs/slurm.md). Read with ``slurm_settings(cfg)``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from elb.core.config import Config
from elb.core.durations import PositiveSeconds
from elb.core.sections import HoldsSections, Section, section


class SlurmConfig(Section):
    """Where elb finds Slurm (``scheduler: slurm``; docs/slurm.md)."""

    conf: Path | None = None  # slurm.conf for the client commands (SLURM_CONF); None: Slurm's default
    bin_dir: Path | None = None  # None: find squeue, sinfo and scontrol on PATH
    timeout: PositiveSeconds = 30.0  # each read (squeue, sinfo, scontrol show)
    update_timeout: PositiveSeconds = 60.0  # each change (scontrol update, scontrol requeue)
    # How long after its add play a node's slurmd has to register with the controller (Slurm no
    # longer shows it powering up and has it up) before elb fails the node: taken out, terminated,
    # and given back to Slurm or launched again under the back-off.
    register_timeout: PositiveSeconds = 120.0
    # The directory elb's resume and suspend programs write Slurm's requests to.
    requests: Path = Path("/var/spool/elb/slurm")
    # The node group of each cloud partition's nodes (partition -> group name); a partition not
    # named here: the first group.
    partition_groups: dict[str, str] = Field(default_factory=dict)
    add_playbook: str = Field("slurm_add_node.yml", pattern=r"^[A-Za-z0-9_.-]+\.ya?ml$")
    remove_playbook: str = Field("slurm_remove_node.yml", pattern=r"^[A-Za-z0-9_.-]+\.ya?ml$")
    # provision.mode boot: the master's part of adding a batch (its hosts lines, exports, the
    # munge key pushed to each node, the batch's file) and what each node runs on itself at boot.
    admit_playbook: str = Field("slurm_admit_nodes.yml", pattern=r"^[A-Za-z0-9_.-]+\.ya?ml$")
    boot_playbook: str = Field("slurm_node_boot.yml", pattern=r"^[A-Za-z0-9_.-]+\.ya?ml$")

    def settled(self, key: str, config: Config) -> Config:
        """Each cloud partition's group (``partition_groups``) is one of the node groups (without
        ``node_groups``: the one group, ``default``)."""
        names = [g.name for g in config.node_groups] if config.node_groups is not None else ["default"]
        for partition, group in self.partition_groups.items():
            if group not in names:
                raise ValueError(
                    f"{key}.partition_groups: partition {partition}: no node group {group!r} ({', '.join(names)})"
                )
        return config


def slurm_settings(cfg: HoldsSections) -> SlurmConfig:
    """``cfg``'s ``slurm:`` (its defaults when the file has none)."""
    return section(cfg, SlurmConfig)
