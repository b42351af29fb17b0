"""What the provisioner ``elb.service.factory.make_provisioner`` builds hands to the plays, pinned
for a Grid Engine config and a Slurm config: the variables of ``all`` in every play's inventory
(elb's settings under the roles' names), the extra vars, and a node's boot document and command
(``provision.mode: boot``). The values are written out in full: a change to what either
scheduler's plays get shows here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from elb.core.config import Config, ConfigError, parse_config
from elb.core.interfaces import NodeSpec
from elb.provision.boot import BOOT_INVENTORY
from elb.provision.inventory import Connection, build_inventory
from elb.service import factory

EXTRA_VARS = {
    "etc_hosts_master_address": "10.77.0.1",
    "nfs_client_mounts": ["/home"],
    "sge_exec_spool": "/var/spool/sge",
    "slurm_node_options": ["-b"],
    "munge_key_path": "/etc/munge/munge.key",
    "munge_key": "SECRET-KEY",
    "spot_agent_interval": 2,
    "node_boot_wait": 30,
    "ansible_become_password": "SECRET-PASS",
}
# What Grid Engine's settings below put in every play's inventory.
SGE_ROLE_VARS = {
    "cluster_user_name": "hpc",
    "sge_exec_root": "/opt/sge",
    "sge_exec_cell": "c1",
    "sge_exec_queue": "big.q",
    "sge_exec_hostgroup": "@big",
    "sge_decommission_root": "/opt/sge",
    "sge_decommission_cell": "c1",
    "sge_decommission_queue": "big.q",
    "sge_decommission_hostgroup": "@big",
}
# Of those and the extra vars, what each scheduler's boot document holds.
SHARED_BOOT_VARS = {
    "cluster_user_name": "hpc",
    "etc_hosts_master_address": "10.77.0.1",
    "nfs_client_mounts": ["/home"],
    "node_boot_batch": "node001",
    "node_boot_wait": 30,
    "spot_agent_interval": 2,
}


def config(tmp: Path, scheduler: str) -> Config:
    return parse_config(
        {
            "scheduler": scheduler,
            "state_dir": str(tmp / "state"),
            "cluster": {"master": "localhost", "user": "hpc"},
            "cloud": {"provider": "local"},
            "sge": {"root": "/opt/sge", "cell": "c1", "queue": "big.q", "hostgroup": "@big"},
            "slurm": {"requests": str(tmp / "requests")},
            "provision": {"mode": "boot", "private_data_dir": str(tmp / "ansible"), "extra_vars": EXTRA_VARS},
        }
    )


def plays_get(cfg: Config) -> tuple[dict[str, object], dict[str, object], dict[str, Any], str]:
    """The vars of ``all`` of a play's inventory, the extra vars, node002's boot document (of a
    batch with node001) and the playbook its command runs."""
    prov = factory.make_provisioner(cfg)
    plan = prov.boot_plans(["node002", "node001"])["node002"]
    assert plan.argv[:4] == (
        "/usr/bin/env",
        f"ANSIBLE_ROLES_PATH={prov.playbook_dir.parent / 'roles'}",
        "ANSIBLE_NOCOLOR=1",
        str(prov.boot_ansible_playbook),
    )
    assert plan.argv[4:6] == ("-i", BOOT_INVENTORY)
    assert list(plan.files) == [BOOT_INVENTORY]
    document = yaml.safe_load(plan.files[BOOT_INVENTORY])
    return dict(prov.role_vars), dict(prov.extra_vars), document, str(Path(plan.argv[6]).relative_to(prov.playbook_dir))


def boot_document(variables: dict[str, object]) -> dict[str, Any]:
    return {
        "all": {
            "vars": variables,
            "children": {
                "master": {"hosts": {"localhost": {"ansible_host": "10.77.0.1"}}},
                "new_nodes": {
                    "hosts": {
                        "node002": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        }
                    }
                },
            },
        }
    }


def test_grid_engines_plays_get_its_settings_and_its_nodes_boot_its_roles_variables(tmp_path: Path) -> None:
    role_vars, extra_vars, document, playbook = plays_get(config(tmp_path, "sge"))
    assert role_vars == SGE_ROLE_VARS
    assert extra_vars == EXTRA_VARS
    assert playbook == "node_boot.yml"
    assert document == boot_document({**SHARED_BOOT_VARS, "sge_exec_root": "/opt/sge", "sge_exec_cell": "c1",
                                      "sge_exec_queue": "big.q", "sge_exec_hostgroup": "@big",
                                      "sge_exec_spool": "/var/spool/sge"})  # fmt: skip


def test_slurms_plays_get_no_grid_engine_settings_and_its_nodes_boot_its_roles_variables(tmp_path: Path) -> None:
    role_vars, extra_vars, document, playbook = plays_get(config(tmp_path, "slurm"))
    assert role_vars == {"cluster_user_name": "hpc"}
    assert extra_vars == EXTRA_VARS
    assert playbook == "slurm_node_boot.yml"
    assert document == boot_document(
        {**SHARED_BOOT_VARS, "slurm_node_options": ["-b"], "munge_key_path": "/etc/munge/munge.key"}
    )


def group_host_vars(tmp: Path, scheduler: str) -> dict[str, object]:
    """The inventory's host vars of a node of a configured node group (for Grid Engine: queues
    big.q and gpu.q, host group @gpu, complex value gpu=1) as the provisioner the factory builds
    makes them."""
    given = config(tmp, scheduler).model_dump(mode="json", exclude_unset=True)
    group = {"name": "gpu", "slots": 4, "max_nodes": 2, "market": "spot"}
    if scheduler == "sge":  # Grid Engine's own keys of the group (another scheduler's group has none)
        group |= {"queues": ["big.q", "gpu.q"], "hostgroup": "@gpu", "offers": {"gpu": "1"}}
    given["sge"] = {"root": "/opt/sge", "cell": "c1"}  # queue and host group: the group's own
    cfg = parse_config({**given, "node_groups": [group]})
    prov = factory.make_provisioner(cfg)
    inventory = build_inventory(Connection(), new_nodes=[prov._of_group(NodeSpec("node002", "10.0.0.2", group="gpu"))])
    return dict(inventory["all"]["children"]["new_nodes"]["hosts"]["node002"])  # type: ignore[index]


def test_grid_engines_node_of_a_group_joins_its_groups_queues_hostgroup_and_complex_values(tmp_path: Path) -> None:
    assert group_host_vars(tmp_path, "sge") == {
        "ansible_host": "10.0.0.2",
        "elb_slots": 4,
        "elb_group": "gpu",
        "elb_market": "spot",
        "sge_exec_queues": ["big.q", "gpu.q"],
        "sge_exec_hostgroup": "@gpu",
        "sge_exec_complex_values": {"gpu": "1"},
    }


def test_slurms_node_group_refuses_grid_engines_keys(tmp_path: Path) -> None:
    given = config(tmp_path, "slurm").model_dump(mode="json", exclude_unset=True)
    group = {"name": "gpu", "slots": 4, "max_nodes": 2, "queues": ["gpu.q"]}
    with pytest.raises(
        ConfigError,
        match=r"^<config>: node_groups\.0\.queues: a setting of the sge scheduler's node groups; "
        r"this config's scheduler is slurm$",
    ):
        parse_config({**given, "node_groups": [group]})
    group = {"name": "gpu", "slots": 4, "max_nodes": 2, "queus": ["gpu.q"]}  # no one's key: unknown
    with pytest.raises(ConfigError, match=r"^<config>: node_groups\.0\.queus: unknown key$"):
        parse_config({**given, "node_groups": [group]})


def test_slurms_node_of_a_group_gets_no_grid_engine_host_vars(tmp_path: Path) -> None:
    assert group_host_vars(tmp_path, "slurm") == {
        "ansible_host": "10.0.0.2",
        "elb_slots": 4,
        "elb_group": "gpu",
        "elb_market": "spot",
    }
