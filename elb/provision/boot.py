"""The boot document of a node that configures itself at boot (``provision.mode: boot``; pure).

The master does its own part of adding the node (Grid Engine: ``playbooks/admit_nodes.yml``,
hosts lines, exports, the exec host registration; Slurm: ``playbooks/slurm_admit_nodes.yml``,
hosts lines, exports, the munge key pushed over SSH) and the node the rest, on itself, by running
its boot playbook (``playbooks/node_boot.yml``, ``playbooks/slurm_node_boot.yml``) from its
image at its first boot. What the node needs to know then
is an Ansible inventory written on the node (``BOOT_INVENTORY``):

- group ``new_nodes``: the node alone, reached with a local connection, with its node group's
  market (``elb_market``, for the spot agent);
- group ``master``: the master's name and the address the nodes reach it at;
- vars of ``all``: the node's batch (the nodes launched together: the master publishes one file
  of hosts lines and users' ids per batch, named after its first node), elb's role variables and
  those of ``provision.extra_vars`` that the node's roles read: those every node runs
  (``NODE_VAR_PREFIXES``) and its scheduler's own (``elb.core.drivers.NodePlays.boot_vars``).

The document travels as EC2 user data, which the node and whoever may describe the instance can
read: nothing else of ``provision.extra_vars`` goes into it, and no key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from elb.core.interfaces import NodeBoot
from elb.provision.inventory import InventoryError, check_address, check_extra_vars, check_host_name, check_market

BOOT_INVENTORY = "/etc/elb/boot-inventory.yml"
# The roles every node's boot playbook runs on the node, whatever its scheduler: their variables
# go to the node, with those of the scheduler's own roles (``NodePlays.boot_vars``), and no others.
NODE_VAR_PREFIXES = ("etc_hosts_", "nfs_client_", "cluster_user_", "spot_agent_", "node_boot_")


def node_vars(variables: Mapping[str, object], prefixes: tuple[str, ...] = NODE_VAR_PREFIXES) -> dict[str, object]:
    """The variables of ``variables`` that the node's own roles read (``prefixes``: their names'
    beginnings, those of the roles of the node's boot playbook)."""
    return {k: v for k, v in check_extra_vars(variables).items() if k.startswith(prefixes)}


def batch_of(names: Sequence[str]) -> str:
    """The name of a batch: its first node's (what admit_nodes.yml names its file after)."""
    if not names:
        raise InventoryError("a batch of no node")
    return min(names)


def boot_inventory(
    name: str,
    batch: str,
    *,
    master: str,
    master_address: str,
    market: str | None = None,
    variables: Mapping[str, object] | None = None,
    prefixes: tuple[str, ...] = NODE_VAR_PREFIXES,
) -> dict[str, object]:
    """The inventory node ``name`` runs its boot playbook with (``prefixes``: of the variables
    that playbook's roles read). Raises InventoryError on bad input."""
    check_host_name(name, "node name")
    check_host_name(batch, "batch name")
    node: dict[str, object] = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
    }
    if market is not None:
        node["elb_market"] = check_market(market, f"node {name}")
    all_vars = node_vars(variables or {}, prefixes) | {"node_boot_batch": batch}
    return {
        "all": {
            "vars": all_vars,
            "children": {
                "master": {
                    "hosts": {
                        check_host_name(master, "master host name"): {
                            "ansible_host": check_address(master_address, "master")
                        }
                    }
                },
                "new_nodes": {"hosts": {name: node}},
            },
        }
    }


def node_boot(inventory: Mapping[str, object], *, ansible_playbook: Path, playbook: Path) -> NodeBoot:
    """The node's boot: the inventory written, then ansible-playbook run on it (an argument list),
    with the roles found beside the playbooks (``<playbook's directory>/../roles``, as elb ships
    them)."""
    text = yaml.safe_dump(dict(inventory), sort_keys=True, default_flow_style=False)
    roles = playbook.parent.parent / "roles"
    return NodeBoot(
        files={BOOT_INVENTORY: text},
        argv=(
            "/usr/bin/env",
            f"ANSIBLE_ROLES_PATH={roles}",
            "ANSIBLE_NOCOLOR=1",
            str(ansible_playbook),
            "-i",
            BOOT_INVENTORY,
            str(playbook),
        ),
    )
