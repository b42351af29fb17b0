"""Ansible inventory plugin ``elb_ec2``: the EC2 instances of one elb cluster.

An installed elb ships it in the collection ``elb.cluster``: ``plugin: elb.cluster.elb_ec2``. In
a checkout, enable it with ``inventory_plugins = plugins/inventory`` in ansible.cfg (or the
environment variable ANSIBLE_INVENTORY_PLUGINS) and ``plugin: elb_ec2``, as
``inventory/elb.elb_ec2.yml`` does. It runs in Ansible's Python, which is elb's (elb depends on
ansible-core), and reads elb's own config file for the cluster name, master, region, endpoint,
SSH user, slots and node groups: one source of truth.
"""

# ruff: noqa: PLC0415  (elb is imported lazily, so that a missing elb is a clear parser error)
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin

DOCUMENTATION = r"""
name: elb_ec2
short_description: The master and workers of one elb cluster on EC2
description:
  - Lists the running EC2 instances tagged C(elb:cluster=<cluster.name>) with C(elb:role) master
    or worker, as groups C(master) and C(workers); host names are the Name tags, C(ansible_host)
    is the private address and C(elb_slots) the slots (configured, else the type's vCPUs).
  - Each worker is of the node group its C(elb:group) tag names (C(elb_group), and a group
    C(elb_group_<name>) per node group) and gets the variables elb's plays give a node of that
    group (Grid Engine its queues, host group, complex values and the group's slots). With
    several C(node_groups), a Grid Engine worker whose group cannot be known (no tag, or a group
    no longer configured) is left out with a warning.
  - Uses the standard boto3 credentials chain (environment, ~/.aws, instance profile).
  - The inventory file name must end in C(elb_ec2.yml) or C(elb_ec2.yaml).
options:
  plugin:
    description: Token that marks the file as this plugin's configuration.
    required: true
    choices: [elb_ec2, elb.cluster.elb_ec2]
  elb_config:
    description: elb's configuration file (cluster, cloud.ec2, provision and policy settings).
    type: path
    default: /etc/elb/elb.yml
    env:
      - name: ELB_CONFIG
  master_local:
    description:
      - True when Ansible runs on the master (as elb does), which is then reached with a local
        connection. False reaches it over SSH at its private address (it must be tagged
        C(elb:role=master)).
    type: bool
    default: true
"""

EXAMPLES = r"""
# inventory/elb.elb_ec2.yml (plugin: elb_ec2 where ansible.cfg sets inventory_plugins)
plugin: elb.cluster.elb_ec2
elb_config: /etc/elb/elb.yml
master_local: true
"""


def _plain(key: str, value: Any) -> Any:
    """Values from inventory plugins are not templated: the master's local Python is this one."""
    if key == "ansible_python_interpreter" and value == "{{ ansible_playbook_python }}":
        return sys.executable
    return value


class InventoryModule(BaseInventoryPlugin):  # type: ignore[misc]
    NAME = "elb_ec2"

    def verify_file(self, path: str) -> bool:
        return bool(super().verify_file(path)) and path.endswith(("elb_ec2.yml", "elb_ec2.yaml"))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            from elb.clouds.ec2.cloud import Ec2Cloud
            from elb.clouds.ec2.inventory import ec2_inventory
            from elb.core.config import ConfigError, load_config
            from elb.core.interfaces import CloudError
            from elb.provision.inventory import InventoryError
        except ImportError as err:
            raise AnsibleParserError(f"elb_ec2 needs the elb package in Ansible's Python: {err}") from err
        config_path = Path(self.get_option("elb_config"))
        try:
            config = load_config(config_path, choose="set elb_config in the inventory file, or ELB_CONFIG")
            cloud = Ec2Cloud.from_config(config)
            result = ec2_inventory(config, cloud, master_local=bool(self.get_option("master_local")))
        except (ConfigError, CloudError, InventoryError) as err:
            raise AnsibleParserError(f"elb_ec2: {err}") from err
        for warning in result.warnings:
            self.display.warning(f"elb_ec2: {warning}")
        self._populate(result.inventory)

    def _populate(self, data: dict[str, Any]) -> None:
        all_ = data["all"]
        for key, value in all_.get("vars", {}).items():
            self.inventory.set_variable("all", key, value)
        for group, body in all_.get("children", {}).items():
            self.inventory.add_group(group)
            for host, hostvars in (body or {}).get("hosts", {}).items():
                # add_host with a group (not add_child): the host "master" in group "master".
                self.inventory.add_host(host, group=group)
                for key, value in (hostvars or {}).items():
                    self.inventory.set_variable(host, key, _plain(key, value))
