"""The launch templates the config names (``cloud.ec2.launch_template`` and the node groups'),
and their versions as EC2 has them (``DescribeLaunchTemplateVersions``): the version number a
node group launches now, the instance type a version sets, its user data.
"""

from __future__ import annotations

import base64
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.config import LaunchTemplate
from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import to_cloud_error
from elb.clouds.ec2.groupoptions import ec2_options
from elb.core.interfaces import CloudError


class Templates:
    """The cluster's launch templates, each version read from EC2 when asked."""

    def __init__(self, ctx: Ec2Context) -> None:
        self.ctx = ctx

    def launch_templates(self) -> list[LaunchTemplate]:
        """The launch templates the config names (``cloud.ec2`` and the node groups'), once each."""
        found = [self.ctx.config.launch_template]
        if self.ctx.node_groups is not None:
            found += [ec2_options(g).launch_template for g in self.ctx.node_groups.groups]
        return list(dict.fromkeys(t for t in found if t is not None))

    def versions(self) -> dict[str, str]:
        """Each node group's launch template version now (its ``version``, ``$Default`` and
        ``$Latest`` resolved to a number): a node stopped in a warm pool that was launched with
        another one is not restarted. Groups without a template (and the one group without
        ``node_groups``, from ``cloud.ec2.launch_template``) are keyed by group name."""
        groups: list[tuple[str, LaunchTemplate | None]]
        if self.ctx.node_groups is not None:
            groups = [(g.name, ec2_options(g).launch_template) for g in self.ctx.node_groups.groups]
        else:
            groups = [("default", self.ctx.config.launch_template)]
        out: dict[str, str] = {}
        for name, template in groups:
            if template is not None:
                number = self.version(template).get("VersionNumber")
                if number is not None:
                    out[name] = str(number)
        return out

    def version(self, template: LaunchTemplate) -> Any:
        """The launch template version ``template`` names, as DescribeLaunchTemplateVersions has it."""
        key: dict[str, Any] = {"Versions": [template.version]}
        if template.id is not None:
            key["LaunchTemplateId"] = template.id
        else:
            key["LaunchTemplateName"] = template.name
        try:
            resp = self.ctx.client.describe_launch_template_versions(**key)
        except (BotoCoreError, ClientError) as err:
            raise to_cloud_error(err, "reading the launch template") from None
        versions = resp.get("LaunchTemplateVersions", [])
        if not versions:
            raise CloudError(f"launch template {template.id or template.name} has no version {template.version}")
        return versions[0]

    def instance_type(self, template: LaunchTemplate | None = None) -> str | None:
        """The instance type the launch template's version sets (``template``, else the
        configured one), if any."""
        template = template or self.ctx.config.launch_template
        if template is None:
            return None
        found = self.version(template).get("LaunchTemplateData", {}).get("InstanceType")
        return str(found) if found else None

    def user_data(self, template: LaunchTemplate) -> str | None:
        """The user data of the launch template's version, as text (None: it has none); a
        CloudError when it is not text (gzip, say: elb cannot put a node's boot beside it)."""
        encoded = self.version(template).get("LaunchTemplateData", {}).get("UserData")
        if not encoded:
            return None
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise CloudError(
                f"launch template {template.id or template.name}: its user data is not text, so a node's boot "
                "cannot be added to it (provision.mode: boot)"
            ) from None
