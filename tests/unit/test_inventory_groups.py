"""The dynamic EC2 inventory places each worker in its node group by its ``elb:group`` tag and
gives it the variables elb's own plays give a node of that group (``NodePlays.group_vars``), so
that ``site.yml`` run by hand puts it in its group's queues, host group and complex values. A
worker whose group cannot be known is left out, with a warning that says how to tag it.
Read with the contract's stand-in for EC2 (``tests.unit.ec2_scenarios``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elb.clouds.ec2.inventory import ec2_inventory
from elb.core.config import Config, parse_config
from elb.core.drivers import node_plays
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, NodeSpec
from elb.provision.ansible import AnsibleProvisioner
from elb.provision.inventory import Connection, build_inventory

from . import ec2_scenarios
from .ec2_scenarios import CLUSTER, REGION, World

CPU = {"name": "cpu-small", "slots": 2, "max_nodes": 8}
GPU = {
    "name": "gpu",
    "slots": 4,
    "max_nodes": 2,
    "market": "spot",
    "offers": {"gpu": "1"},
    "queues": ["all.q", "gpu.q"],
    "hostgroup": "@gpu",
}
# The gpu group as a Slurm config writes it: Grid Engine's keys are not a Slurm group's.
GPU_SLURM = {k: v for k, v in GPU.items() if k not in ("offers", "queues", "hostgroup")}
GROUP_VARS = ("elb_group", "elb_slots", "sge_exec_queues", "sge_exec_hostgroup", "sge_exec_complex_values")


def config(tmp_path: Path, *groups: dict[str, object], scheduler: str = "sge") -> Config:
    raw: dict[str, Any] = {
        "scheduler": scheduler,
        "state_dir": str(tmp_path),
        "cluster": {"name": CLUSTER},
        "cloud": {"provider": "ec2", "ec2": {"region": REGION}},
        "provision": {"private_data_dir": str(tmp_path / "ansible"), "host_keys_dir": str(tmp_path / "keys")},
    }
    if groups:
        raw["node_groups"] = [dict(g) for g in groups]
    return parse_config(raw)


def worker(world: World, name: str, group: str | None = None, address: str = "10.0.0.10") -> None:
    tags = {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: name}
    if group is not None:
        tags[TAG_GROUP] = group
    inst = world.add([{"Key": k, "Value": v} for k, v in tags.items()], "c6i.large", "running")
    inst["PrivateIpAddress"] = address


def read(world: World, cfg: Config) -> tuple[dict[str, dict[str, Any]], dict[str, Any], list[str]]:
    """The workers' host vars, every group's hosts, and the warnings."""
    result = ec2_inventory(cfg, ec2_scenarios.cloud(world))
    children: dict[str, Any] = result.inventory["all"]["children"]  # type: ignore[index]
    groups = {g: sorted((body or {}).get("hosts", {})) for g, body in children.items()}
    return children["workers"].get("hosts", {}), groups, result.warnings


def test_each_worker_gets_its_groups_queues_hostgroup_complex_values_and_slots(tmp_path: Path) -> None:
    world = World()
    worker(world, "node001", "gpu", "10.0.0.11")
    worker(world, "node002", "cpu-small", "10.0.0.12")
    hosts, groups, warnings = read(world, config(tmp_path, CPU, GPU))
    assert warnings == []
    assert {k: hosts["node001"][k] for k in GROUP_VARS} == {
        "elb_group": "gpu",
        "elb_slots": 4,  # the group's, as elb's plays give it, not the type's vCPUs
        "sge_exec_queues": ["all.q", "gpu.q"],
        "sge_exec_hostgroup": "@gpu",
        "sge_exec_complex_values": {"gpu": "1"},
    }
    assert (hosts["node002"]["sge_exec_queues"], hosts["node002"]["sge_exec_hostgroup"]) == (["all.q"], "@allhosts")
    # EC2 says whether the instance is spot (a spot group's node may have fallen back).
    assert hosts["node001"]["elb_market"] == "on-demand"
    assert groups["elb_group_gpu"] == ["node001"] and groups["elb_group_cpu_small"] == ["node002"]


def test_a_workers_group_vars_are_the_ones_elbs_own_plays_give_it(tmp_path: Path) -> None:
    cfg = config(tmp_path, CPU, GPU)
    world = World()
    worker(world, "node001", "gpu", "10.0.0.11")
    hosts, _groups, _warnings = read(world, cfg)
    prov = AnsibleProvisioner(cfg.provision, cfg.cluster, node_plays(cfg), groups=cfg.groups(1))
    own = build_inventory(Connection(), new_nodes=[prov._of_group(NodeSpec("node001", "10.0.0.11", group="gpu"))])
    theirs = own["all"]["children"]["new_nodes"]["hosts"]["node001"]  # type: ignore[index]
    assert {k: hosts["node001"][k] for k in GROUP_VARS} == {k: theirs[k] for k in GROUP_VARS}


def test_a_worker_whose_group_cannot_be_known_is_left_out_with_a_warning(tmp_path: Path) -> None:
    """No tag (an older elb's worker, or one made by hand) or a group the config no longer has:
    its queues cannot be known, and a repair must not move it into another group's."""
    world = World()
    worker(world, "node001", "gpu")
    worker(world, "node002")
    worker(world, "node003", "old-gpu")
    hosts, groups, warnings = read(world, config(tmp_path, CPU, GPU))
    assert sorted(hosts) == ["node001"]
    assert groups["workers"] == ["node001"]
    (untagged,) = [w for w in warnings if "node002" in w]
    assert "left out" in untagged and f"no {TAG_GROUP} tag" in untagged and "cpu-small, gpu" in untagged
    assert f"{TAG_GROUP}=<group>" in untagged  # how to place it
    (unknown,) = [w for w in warnings if "node003" in w]
    assert "left out" in unknown and "'old-gpu'" in unknown and "no configured node group" in unknown


def test_with_one_node_group_an_untagged_worker_is_of_that_group(tmp_path: Path) -> None:
    world = World()
    worker(world, "node001")
    hosts, groups, warnings = read(world, config(tmp_path, GPU))
    assert warnings == []
    assert (hosts["node001"]["elb_group"], hosts["node001"]["sge_exec_hostgroup"]) == ("gpu", "@gpu")
    assert groups["elb_group_gpu"] == ["node001"]


def test_without_node_groups_every_worker_is_of_the_one_group_with_the_cluster_wide_vars(tmp_path: Path) -> None:
    """As elb's plays: the group ``default``, and no variables of a group (the roles' settings
    of every node, vars of ``all``); the slots from the instance type."""
    world = World()
    worker(world, "node001")
    worker(world, "node002", "gpu")  # a tag from a config that had groups: no group now
    hosts, groups, warnings = read(world, config(tmp_path))
    assert warnings == []
    assert {h: hv["elb_group"] for h, hv in hosts.items()} == {"node001": "default", "node002": "default"}
    assert all("sge_exec_queues" not in hv for hv in hosts.values())
    assert hosts["node001"]["elb_slots"] == 2  # the stand-in's vCPUs of c6i.large
    assert groups["elb_group_default"] == ["node001", "node002"]


def test_slurm_workers_get_their_group_and_no_grid_engine_variables(tmp_path: Path) -> None:
    world = World()
    worker(world, "node001", "gpu")
    hosts, groups, _warnings = read(world, config(tmp_path, CPU, GPU_SLURM, scheduler="slurm"))
    assert hosts["node001"]["elb_group"] == "gpu" and groups["elb_group_gpu"] == ["node001"]
    assert not any(k.startswith("sge_") for k in hosts["node001"])


def test_a_hostile_group_tag_never_reaches_ansible(tmp_path: Path) -> None:
    world = World()
    worker(world, "node001", "{{ lookup('pipe', 'id') }}")
    hosts, groups, warnings = read(world, config(tmp_path, CPU, GPU))
    assert hosts == {} and not any(g.startswith("elb_group_{") for g in groups)
    assert any("node001" in w and "left out" in w for w in warnings)


def test_a_slurm_worker_whose_group_cannot_be_known_is_listed_without_one(tmp_path: Path) -> None:
    """Slurm's plays take nothing of a node's group: leaving the worker out would only keep
    slurm_site.yml from converging it. It is listed, with no elb_group, and a warning."""
    world = World()
    worker(world, "node001")
    hosts, groups, warnings = read(world, config(tmp_path, CPU, GPU_SLURM, scheduler="slurm"))
    assert sorted(hosts) == ["node001"] and "elb_group" not in hosts["node001"]
    assert hosts["node001"]["elb_slots"] == 2  # the instance type's vCPUs
    assert not any(g.startswith("elb_group_") for g in groups)
    (warning,) = warnings
    assert "node001" in warning and f"no {TAG_GROUP} tag" in warning and "listed without elb_group" in warning
