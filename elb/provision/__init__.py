"""Provisioning behind elb.core.interfaces.Provisioner: Ansible playbooks through ansible-runner.

Imports ``elb.core`` only.
"""

from elb.provision.ansible import AnsibleProvisioner, ProvisionError, RunReport, role_vars
from elb.provision.inventory import InventoryError, build_inventory
from elb.provision.outcomes import RunEnd, summarize

__all__ = [
    "AnsibleProvisioner",
    "InventoryError",
    "ProvisionError",
    "RunEnd",
    "RunReport",
    "build_inventory",
    "role_vars",
    "summarize",
]
