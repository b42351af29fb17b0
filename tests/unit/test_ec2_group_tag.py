"""Each worker elb launches carries its node group's name in the tag ``elb:group``, on every
launch path (``RunInstances`` with and without a launch template, an instant ``CreateFleet``
and the ``CreateTags`` of a fleet node's volumes), so that whoever reads EC2 (the dynamic
inventory, an admin) can tell which group a worker is of. Recorded with the contract's
stand-in for EC2 (``tests.unit.ec2_scenarios``)."""

from __future__ import annotations

from typing import Any

import pytest

from elb.clouds.ec2.contract import problems
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.interfaces import TAG_GROUP, CloudError

from . import ec2_scenarios
from .ec2_scenarios import FLEET, OWN, TEMPLATE, World

GPU = NodeGroup.model_validate(dict(name="gpu", slots=4, max_nodes=2, queues=["gpu.q"], hostgroup="@gpu"))
CPU = NodeGroup(name="cpu-small", slots=2, max_nodes=8)
GROUPS = NodeGroups(groups=[CPU, GPU])


def tag_sets(world: World, operation: str) -> list[dict[str, str]]:
    """The tags of every resource the requests of ``operation`` tag, each as a dict."""
    out = []
    for req in world.requests:
        if req["operation"] != operation or req["params"].get("DryRun"):
            continue
        params: dict[str, Any] = req["params"]
        if "TagSpecifications" in params:
            out += [{t["Key"]: t["Value"] for t in ts["Tags"]} for ts in params["TagSpecifications"]]
        else:
            out.append({t["Key"]: t["Value"] for t in params["Tags"]})
    return out


def test_the_tag_is_named_like_elbs_other_tags() -> None:
    assert TAG_GROUP == "elb:group"


@pytest.mark.parametrize(
    "settings",
    [pytest.param(OWN, id="own"), pytest.param({**TEMPLATE, "instance_types": ["c6i.large"]}, id="template")],
)
def test_run_instances_tags_the_instance_and_its_volumes_with_the_nodes_group(settings: dict[str, Any]) -> None:
    world = World()
    ec2_scenarios.cloud(world, GROUPS, **settings).launch(
        ["node001", "node002"], {"node001": "gpu", "node002": "cpu-small"}
    )
    tags = tag_sets(world, "RunInstances")
    assert len(tags) == 4  # instance and volume, of each node
    assert {(t["Name"], t[TAG_GROUP]) for t in tags} == {("node001", "gpu"), ("node002", "cpu-small")}


def test_a_fleet_tags_the_fleet_the_instance_and_then_the_volumes_with_the_nodes_group() -> None:
    world = World()
    ec2_scenarios.cloud(world, GROUPS, **FLEET).launch(["node001"], {"node001": "gpu"})
    fleet, tagged = tag_sets(world, "CreateFleet"), tag_sets(world, "CreateTags")
    assert len(fleet) == 2 and len(tagged) == 1  # fleet and instance at creation; the volumes once it runs
    assert [t[TAG_GROUP] for t in fleet + tagged] == ["gpu"] * 3


def test_without_node_groups_a_node_is_tagged_with_the_group_the_daemon_gives_it() -> None:
    """Without node_groups the daemon launches every node in the one group, ``default``."""
    world = World()
    ec2_scenarios.cloud(world, **OWN).launch(["node001"], {"node001": "default"})
    assert {t[TAG_GROUP] for t in tag_sets(world, "RunInstances")} == {"default"}


def test_a_launch_that_names_no_group_sets_no_group_tag() -> None:
    world = World()
    ec2_scenarios.cloud(world, **OWN).launch(["node001"])
    assert all(TAG_GROUP not in t for t in tag_sets(world, "RunInstances"))


def test_extra_tags_may_not_set_the_group_tag() -> None:
    with pytest.raises(CloudError, match=f"may not set {TAG_GROUP}"):
        ec2_scenarios.cloud(World(), ami=ec2_scenarios.AMI, extra_tags={TAG_GROUP: "gpu"})


def test_the_longest_group_name_with_the_most_extra_tags_keeps_ec2s_tag_rules() -> None:
    """A node group's name is at most 63 characters (elb.core.groups): with the 45 extra tags
    elb allows, each launch request is within EC2's 50 tags and its key and value limits."""
    longest = NodeGroup(name="g" * 63, slots=2, max_nodes=1)
    extra = {f"k{n}": "v" for n in range(45)}
    world = World()
    settings = {**FLEET, "extra_tags": extra}
    ec2_scenarios.cloud(world, NodeGroups(groups=[longest]), **settings).launch(["node001"], {"node001": longest.name})
    sent = [r for r in world.requests if r["operation"] in ("CreateFleet", "CreateTags")]
    assert {r["operation"] for r in sent} == {"CreateFleet", "CreateTags"}
    assert all(len(t) == 50 for t in tag_sets(world, "CreateFleet"))
    assert [problems("ec2", r["operation"], r["params"]) for r in sent] == [[]] * len(sent)
    with pytest.raises(ValueError, match="name"):
        NodeGroup(name="g" * 64, slots=2, max_nodes=1)
