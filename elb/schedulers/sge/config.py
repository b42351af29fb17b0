"""Grid Engine's own settings, the config file's ``sge:`` (``CONFIG_SECTION`` of its driver's
module, ``elb.schedulers.sge.driver``), and the names they are written in, here and in its node
groups' settings (``elb.schedulers.sge.groupoptions``): a cluster queue (no wildcard, no @host)
and a host group. Read with ``sge_settings(cfg)``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field

from elb.core.durations import PositiveSeconds
from elb.core.sections import HoldsSections, Section, section

QueueName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")]
HostgroupName = Annotated[str, Field(pattern=r"^@[A-Za-z0-9_][A-Za-z0-9_.-]*$")]


class SgeConfig(Section):
    """Where elb finds Grid Engine, and where the one group's nodes join it (without ``node_groups``)."""

    # Each node group says its own queues and host group: these are refused beside node_groups.
    GROUP_KEYS: ClassVar[tuple[str, ...]] = ("queue", "hostgroup")

    root: Path = Path("/var/lib/gridengine")
    cell: str = "default"
    bin_dir: Path | None = None  # None: find qstat on PATH
    timeout: PositiveSeconds = 30.0
    queue: QueueName = "all.q"
    hostgroup: HostgroupName = "@allhosts"

    def role_vars(self) -> dict[str, object]:
        """These settings under the variable names of Grid Engine's roles (``sge_exec``,
        ``sge_decommission``: roles/*/defaults). (With a non-default root or cell, also set
        ``nfs_server_exports`` and ``nfs_client_mounts`` in ``provision.extra_vars``.)"""
        out: dict[str, object] = {}
        for role in ("sge_exec", "sge_decommission"):
            out[f"{role}_root"] = str(self.root)
            out[f"{role}_cell"] = self.cell
            out[f"{role}_queue"] = self.queue
            out[f"{role}_hostgroup"] = self.hostgroup
        return out


def sge_settings(cfg: HoldsSections) -> SgeConfig:
    """``cfg``'s ``sge:`` (its defaults when the file has none)."""
    return section(cfg, SgeConfig)
