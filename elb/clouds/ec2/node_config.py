"""What elb puts on a new node and reads back from it: its cloud-config in its user data (its SSH
host key, its boot; ``elb.clouds.ec2.user_data``) and, for a node of a launch template, whose user
data is the template's, its host key read from its console output (``GetConsoleOutput``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.console import decode_output, host_key_in_console
from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import error_code, to_cloud_error
from elb.clouds.ec2.launch_requests import LaunchSpec
from elb.clouds.ec2.lifecycle import terminate_quietly
from elb.clouds.ec2.templates import Templates
from elb.clouds.ec2.user_data import node_user_data
from elb.core.interfaces import CloudError, Instance, NodeBoot

log = logging.getLogger(__name__)


class NodeConfig:
    """The nodes' own config: issued into their user data, and their host keys kept
    (``ctx.host_keys``; None: nodes make their own keys at first boot, unchecked)."""

    def __init__(self, ctx: Ec2Context, templates: Templates) -> None:
        self.ctx = ctx
        self.templates = templates

    def with_node_config(
        self, name: str, spec: LaunchSpec, *, adopting: bool, boot: NodeBoot | None = None
    ) -> LaunchSpec:
        """``spec`` with elb's cloud-config of the node in its user data (``elb.clouds.ec2.user_data``):
        its host key, when elb describes the worker itself and starts it (an adopted instance has
        the key it was launched with; a launch template holds the user data, so the key of its
        node is read from its console output once it runs, ``console_host_keys``), and its boot.
        A node of a launch template given a boot is launched with user data of its own, which
        replaces the template's: the template version's user data first, then the boot
        (``Templates.user_data``); no host key (read from the console as for the others)."""
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
            key = None if self.ctx.host_keys is None else self.ctx.host_keys.issue(name)
            user_data = node_user_data(spec.user_data, key, boot)
        except ValueError as err:
            raise CloudError(f"cannot launch {name}: {err}") from None
        except OSError as err:
            raise CloudError(f"cannot launch {name}: its host key cannot be kept: {err}") from None
        return dataclasses.replace(spec, user_data=user_data)

    def console_host_keys(
        self, launched: Sequence[Instance], templated: set[str], deadline: float
    ) -> tuple[list[Instance], dict[str, str]]:
        """Read the host key of each node launched from a launch template (its user data is the
        template's) from its console output, where cloud-init prints it, until ``deadline``; the
        nodes whose key did not show are terminated and failed (by name, with why)."""
        if self.ctx.host_keys is None or not templated:
            return list(launched), {}
        waiting = {i.name: i for i in launched if i.name in templated}
        latest: dict[str, bool] = {}  # instance id -> whether EC2 gives its latest output
        why = f"its SSH host key did not show in its console output within {self.ctx.config.boot_timeout:g}s"
        try:
            while waiting:
                for name, inst in list(waiting.items()):
                    key = host_key_in_console(self._console_output(inst.instance_id, latest))
                    if key is not None:
                        self.ctx.host_keys.record(name, key)
                        log.info("%s: host key read from the console of %s", name, inst.instance_id)
                        del waiting[name]
                if not waiting or self.ctx.clock() >= deadline:
                    break
                self.ctx.sleep(min(self.ctx.poll_interval, max(0.0, deadline - self.ctx.clock())))
        except CloudError as err:
            why = f"its SSH host key cannot be read from its console output: {err}"
        terminate_quietly(self.ctx.client, [i.instance_id for i in waiting.values()])
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
            resp = self.ctx.client.get_console_output(**args)
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

    def settle_host_keys(self, launched: Sequence[Instance]) -> None:
        """The private keys of nodes that run with them are needed no more. (A launch that failed
        keeps its key: the same request, with the same token, may be sent again.)"""
        if self.ctx.host_keys is not None:
            for node in launched:
                self.ctx.host_keys.settle(node.name)
