"""Each node group launched its own way, against moto's EC2 server: its instance types, its
market (spot without falling back to on-demand), its launch template, and its cluster placement
group (made with elb's tags when missing). moto implements RunInstances with these options; it
implements neither DescribePlacementGroups nor CreatePlacementGroup (and drops the group name
from the instance), so those two calls alone are answered by a stand-in in the placement test,
which checks what elb asks of them and that RunInstances names the group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from elb.clouds.ec2.cloud import Ec2Cloud, make_client
from elb.clouds.ec2.config import Ec2Config
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.interfaces import TAG_GROUP, TAG_NAME

from .conftest import CLUSTER, REGION, FakeClock, FaultyClient, all_instances
from .test_ec2_cloud import tags
from .test_ec2_templates import template

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

pytestmark = pytest.mark.moto


def grouped_cloud(aws_env: str, groups: list[NodeGroup], **cfg: Any) -> tuple[Ec2Cloud, FaultyClient]:
    config = Ec2Config(region=REGION, endpoint_url=aws_env, **cfg)
    client = FaultyClient(make_client(config, total_attempts=2))
    clock = FakeClock()
    cloud = Ec2Cloud(
        config,
        CLUSTER,
        # FaultyClient stands in for the EC2 client: it hands every operation on to the real one.
        client=cast("EC2Client", client),
        clock=clock,
        sleep=clock.sleep,
        poll_interval=5.0,
        node_groups=NodeGroups(groups=groups),
    )
    return cloud, client


COMPUTE = NodeGroup.model_validate(dict(name="compute", slots=2, instance_types=["c5.large"], max_nodes=4))
BIGMEM = NodeGroup.model_validate(
    dict(name="bigmem", slots=2, instance_types=["r5.large", "r5a.large"], market="spot", max_nodes=2)
)


def test_each_node_is_launched_as_its_group_says(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = grouped_cloud(aws_env, [COMPUTE, BIGMEM], ami=ami, instance_types=["t3.micro"], spot=False)
    result = cloud.launch(["node001", "node002", "node003"], {"node001": "compute", "node002": "bigmem"})
    assert result.failed == {}
    by_name = {tags(i)["Name"]: i for i in all_instances(ec2)}
    assert by_name["node001"]["InstanceType"] == "c5.large" and "InstanceLifecycle" not in by_name["node001"]
    big = by_name["node002"]
    assert big["InstanceType"] == "r5.large" and big.get("InstanceLifecycle") == "spot"
    assert by_name["node003"]["InstanceType"] == "t3.micro"  # no group: the cluster's own way
    # Each carries its group's name, for whoever reads EC2 (the dynamic inventory).
    assert {n: tags(i).get(TAG_GROUP) for n, i in by_name.items()} == {
        "node001": "compute",
        "node002": "bigmem",
        "node003": None,
    }
    run = {
        next(t["Value"] for t in kw["TagSpecifications"][0]["Tags"] if t["Key"] == TAG_NAME): kw
        for kw in client.calls_of("run_instances")
    }
    assert "Placement" not in run["node001"] and "Placement" not in run["node003"]


class PlacementGroups:
    """Stand-in for DescribePlacementGroups and CreatePlacementGroup (moto has neither)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []

    def describe_placement_groups(self, GroupNames: list[str]) -> dict[str, Any]:
        return {"PlacementGroups": [self.groups[n] for n in GroupNames if n in self.groups]}

    def create_placement_group(self, **kw: Any) -> dict[str, Any]:
        self.created.append(kw)
        self.groups[kw["GroupName"]] = {"GroupName": kw["GroupName"], "Strategy": kw["Strategy"]}
        return {}


def test_a_placement_group_is_made_once_and_named_by_each_launch(ec2: Any, ami: str, aws_env: str) -> None:
    mpi = NodeGroup.model_validate(
        dict(name="mpi", slots=2, instance_types=["c5n.large"], placement_group=True, max_nodes=4)
    )
    cloud, client = grouped_cloud(aws_env, [COMPUTE, mpi], ami=ami, instance_types=["t3.micro"])
    pgs = PlacementGroups()
    # FaultyClient has these operations only through __getattr__: set on the instance, they answer in moto's place.
    client.describe_placement_groups = pgs.describe_placement_groups  # type: ignore[attr-defined]
    client.create_placement_group = pgs.create_placement_group  # type: ignore[attr-defined]
    assert cloud.launch(["node001", "node002"], {"node001": "mpi", "node002": "mpi"}).failed == {}
    cloud.launch(["node003"], {"node003": "mpi"})
    (made,) = pgs.created  # once, then known
    assert made["GroupName"] == f"elb-{CLUSTER}-mpi" and made["Strategy"] == "cluster"
    assert {t["Key"]: t["Value"] for t in made["TagSpecifications"][0]["Tags"]}["elb:cluster"] == CLUSTER
    for kw in client.calls_of("run_instances"):
        assert kw["Placement"] == {"GroupName": f"elb-{CLUSTER}-mpi"} and kw["InstanceType"] == "c5n.large"
    assert len(all_instances(ec2)) == 3


def test_a_spot_group_does_not_fall_back_to_on_demand(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, _ = grouped_cloud(aws_env, [COMPUTE, BIGMEM], ami=ami, instance_types=["t3.micro"])
    spec = cloud.spec_for("bigmem")
    assert spec.spot and not spec.spot_fallback_on_demand and spec.instance_types == ("r5.large", "r5a.large")
    assert not cloud.spec_for("compute").spot
    assert cloud.spec_for("no-such-group").instance_types == ("t3.micro",)


def test_a_group_with_its_own_launch_template(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami, name="gpu-workers", instance_type="g4dn.xlarge")
    gpu = NodeGroup.model_validate(dict(name="gpu", slots=4, launch_template={"name": "gpu-workers"}, max_nodes=1))
    cloud, client = grouped_cloud(aws_env, [COMPUTE, gpu], ami=ami, instance_types=["t3.micro"])
    assert cloud.launch(["node001"], {"node001": "gpu"}).failed == {}
    (kw,) = client.calls_of("run_instances")
    assert kw["LaunchTemplate"] == {"LaunchTemplateName": "gpu-workers", "Version": "$Default"}
    assert kw["InstanceType"] == "g4dn.xlarge"  # the group's template's type
    (inst,) = all_instances(ec2)
    assert inst["InstanceType"] == "g4dn.xlarge"
