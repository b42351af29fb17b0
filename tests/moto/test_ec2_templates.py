"""Launch templates and instance metadata options, against moto's EC2 server.

moto implements CreateLaunchTemplate, DescribeLaunchTemplateVersions and RunInstances with a
``LaunchTemplate``, and keeps ``MetadataOptions`` on the instance, so these run the real calls;
nothing here is a stand-in.
"""

from __future__ import annotations

from typing import Any

import pytest

from elb.clouds.ec2.config import LaunchTemplate
from elb.clouds.ec2.launch_requests import Choice, LaunchSpec, run_arguments
from elb.core.config import ConfigError, parse_config

from .conftest import all_instances
from .test_ec2_cloud import cloud_with, tags

pytestmark = pytest.mark.moto


def template(ec2: Any, ami: str, name: str = "elb-workers", instance_type: str | None = "t3.large") -> str:
    data: dict[str, Any] = {"ImageId": ami, "MetadataOptions": {"HttpTokens": "required"}}
    if instance_type:
        data["InstanceType"] = instance_type
    resp = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)
    return str(resp["LaunchTemplate"]["LaunchTemplateId"])


def test_a_worker_elb_describes_itself_requires_imdsv2(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.micro"])
    result = cloud.launch(["node001"])
    assert result.failed == {}
    (kw,) = client.calls_of("run_instances")
    assert kw["MetadataOptions"] == {"HttpTokens": "required", "HttpEndpoint": "enabled"}
    (inst,) = all_instances(ec2)
    assert inst["MetadataOptions"]["HttpTokens"] == "required"


def test_metadata_tokens_optional_is_an_explicit_choice(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.micro"], metadata_tokens="optional")
    cloud.launch(["node001"])
    assert client.calls_of("run_instances")[0]["MetadataOptions"]["HttpTokens"] == "optional"


def test_a_launch_template_describes_the_worker_and_elb_sets_only_type_subnet_market_tags(
    ec2: Any, ami: str, subnets: list[str], aws_env: str
) -> None:
    lt = template(ec2, ami)
    cloud, client = cloud_with(aws_env, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    result = cloud.launch(["node001"])
    assert result.failed == {}
    (kw,) = client.calls_of("run_instances")
    assert kw["LaunchTemplate"] == {"LaunchTemplateName": "elb-workers", "Version": "$Default"}
    assert set(kw) == {
        "LaunchTemplate",
        "InstanceType",
        "SubnetId",
        "MinCount",
        "MaxCount",
        "ClientToken",
        "TagSpecifications",
    }
    assert kw["InstanceType"] == "t3.large"  # the template's, read with DescribeLaunchTemplateVersions
    (inst,) = all_instances(ec2)
    assert inst["ImageId"] == ami and inst["InstanceType"] == "t3.large" and inst["SubnetId"] == subnets[0]
    assert tags(inst)["Name"] == "node001"
    assert result.launched[0].slots == 2
    assert lt.startswith("lt-")


def test_configured_types_override_the_template_and_a_template_by_id_and_version(
    ec2: Any, ami: str, aws_env: str
) -> None:
    lt = template(ec2, ami, instance_type=None)
    cloud, client = cloud_with(aws_env, launch_template={"id": lt, "version": "1"}, instance_types=["t3.micro"])
    assert cloud.launch(["node001"]).failed == {}
    kw = client.calls_of("run_instances")[0]
    assert kw["LaunchTemplate"] == {"LaunchTemplateId": lt, "Version": "1"}
    assert kw["InstanceType"] == "t3.micro"
    assert client.calls_of("describe_launch_template_versions") == []


def test_a_template_without_a_type_and_no_worker_to_copy_is_a_clear_error(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami, instance_type=None)
    cloud, _client = cloud_with(aws_env, launch_template={"name": "elb-workers"})
    with pytest.raises(Exception, match="launch template sets none"):
        cloud.launch(["node001"])


def test_a_missing_template_is_a_clear_error(ec2: Any, aws_env: str) -> None:
    cloud, _client = cloud_with(aws_env, launch_template={"name": "nowhere"})
    with pytest.raises(Exception, match="launch template"):
        cloud.launch(["node001"])


def test_spot_with_a_template_sets_the_market() -> None:
    spec = LaunchSpec(
        image_id=None,
        instance_types=("c5.large",),
        subnets=(None,),
        spot=True,
        launch_template=LaunchTemplate(name="workers"),
    )
    args = run_arguments(spec, Choice("c5.large", None, "spot"), "elb", "node001")
    assert args["InstanceMarketOptions"]["MarketType"] == "spot"
    assert "ImageId" not in args and "MetadataOptions" not in args and "SubnetId" not in args


@pytest.mark.parametrize("clash", ["ami: ami-12345678", "key_name: k", "security_groups: [sg-1]", "user_data: x"])
def test_settings_the_template_owns_are_refused_beside_it(clash: str) -> None:
    import yaml

    ec2 = {"launch_template": {"name": "elb-workers"}, **yaml.safe_load(clash)}
    with pytest.raises((ConfigError, ValueError), match="set in the launch template"):
        parse_config({"cloud": {"provider": "ec2", "ec2": ec2}})


# --------------------------------------------------------------------------- EC2 Fleet
# moto runs CreateFleet (type instant) for real; it never runs out of capacity, so the answers
# with per-override errors are made by rewriting its answer (FaultyClient.rewrite), a stand-in
# for what only real EC2 produces.


def test_several_types_and_subnets_go_in_one_create_fleet_per_node(
    ec2: Any, ami: str, subnets: list[str], aws_env: str
) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(
        aws_env,
        launch_template={"name": "elb-workers"},
        instance_types=["c5.large", "m5.large"],
        subnets=subnets[:2],
    )
    result = cloud.launch(["node001", "node002"])
    assert result.failed == {}
    assert [i.name for i in result.launched] == ["node001", "node002"]
    fleets = client.calls_of("create_fleet")
    assert len(fleets) == 2 and client.calls_of("run_instances") == []
    kw = fleets[0]
    assert kw["Type"] == "instant"
    assert kw["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"}
    assert kw["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    overrides = kw["LaunchTemplateConfigs"][0]["Overrides"]
    assert [(o["InstanceType"], o["SubnetId"], o["Priority"]) for o in overrides] == [
        ("c5.large", subnets[0], 0.0),
        ("c5.large", subnets[1], 1.0),
        ("m5.large", subnets[0], 2.0),
        ("m5.large", subnets[1], 3.0),
    ]
    names = {tags(i)["Name"] for i in all_instances(ec2)}
    assert names == {"node001", "node002"}
    assert all(tags(i)["elb:cluster"] == "elb" for i in all_instances(ec2))  # tagged at creation


def test_spot_fleet_is_price_capacity_optimized(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(
        aws_env, launch_template={"name": "elb-workers"}, instance_types=["c5.large"], spot=True, spot_max_price="0.1"
    )
    assert cloud.launch(["node001"]).failed == {}
    kw = client.calls_of("create_fleet")[0]
    assert kw["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert kw["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert kw["LaunchTemplateConfigs"][0]["Overrides"] == [{"InstanceType": "c5.large", "MaxPrice": "0.1"}]


def _no_capacity_for(kinds: set[str]) -> Any:
    def rewrite(kwargs: dict[str, Any], resp: Any) -> Any:
        if kwargs["TargetCapacitySpecification"]["DefaultTargetCapacityType"] not in kinds:
            return resp
        errors = [
            {
                "LaunchTemplateAndOverrides": {"Overrides": dict(o)},
                "Lifecycle": kwargs["TargetCapacitySpecification"]["DefaultTargetCapacityType"],
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "no capacity",
            }
            for o in kwargs["LaunchTemplateConfigs"][0]["Overrides"]
        ]
        for entry in resp.get("Instances", []):  # moto started them: take them back, as EC2 would not have
            boto_ec2 = boto3_client()
            boto_ec2.terminate_instances(InstanceIds=entry["InstanceIds"])
        return {**resp, "Instances": [], "Errors": errors}

    return rewrite


def boto3_client() -> Any:
    import boto3

    from .conftest import REGION

    return boto3.client("ec2", region_name=REGION)


def test_a_spot_fleet_without_capacity_backs_off_its_overrides_and_falls_back_to_on_demand(
    ec2: Any, ami: str, aws_env: str
) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(
        aws_env, launch_template={"name": "elb-workers"}, instance_types=["c5.large", "m5.large"], spot=True
    )
    client.rewrite("create_fleet", _no_capacity_for({"spot"}))
    result = cloud.launch(["node001"])
    assert result.failed == {}
    markets = [kw["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for kw in client.calls_of("create_fleet")]
    assert markets == ["spot", "on-demand"]
    from elb.clouds.ec2.launch_requests import Choice

    assert cloud.backed_off(Choice("c5.large", None, "spot")) and cloud.backed_off(Choice("m5.large", None, "spot"))
    assert not cloud.backed_off(Choice("c5.large", None, "on-demand"))
    # the next node does not ask spot again while it is backed off
    client.calls.clear()
    assert cloud.launch(["node002"]).failed == {}
    assert [
        kw["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for kw in client.calls_of("create_fleet")
    ] == ["on-demand"]


def test_no_capacity_in_any_fleet_fails_the_node_and_leaves_nothing(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(
        aws_env, launch_template={"name": "elb-workers"}, instance_types=["c5.large", "m5.large"]
    )
    client.rewrite("create_fleet", _no_capacity_for({"on-demand"}))
    result = cloud.launch(["node001"])
    assert "no capacity" in result.failed["node001"] and "InsufficientInstanceCapacity" in result.failed["node001"]
    live = [i for i in all_instances(ec2) if i["State"]["Name"] not in ("terminated", "shutting-down")]
    assert live == []


def test_a_fleet_error_that_is_not_capacity_stops_the_launch(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(
        aws_env, launch_template={"name": "elb-workers"}, instance_types=["c5.large", "m5.large"]
    )

    def denied(kwargs: dict[str, Any], resp: Any) -> Any:
        for entry in resp.get("Instances", []):
            boto3_client().terminate_instances(InstanceIds=entry["InstanceIds"])
        error = {"ErrorCode": "InvalidLaunchTemplateName.NotFoundException", "ErrorMessage": "gone"}
        return {**resp, "Instances": [], "Errors": [error]}

    client.rewrite("create_fleet", denied)
    with pytest.raises(Exception, match="InvalidLaunchTemplateName"):
        cloud.launch(["node001"])


def test_ec2_check_dry_runs_the_fleet(ec2: Any, ami: str, aws_env: str) -> None:
    from elb.clouds.ec2.preflight import preflight

    template(ec2, ami)
    cloud, client = cloud_with(
        aws_env, launch_template={"name": "elb-workers"}, instance_types=["c5.large", "m5.large"]
    )
    checks = {c.what: c for c in preflight(cloud, warm_pool=True)}
    assert "launch a worker (CreateFleet)" in checks
    assert client.calls_of("create_fleet")[0]["DryRun"] is True
    assert "launched by CreateFleet" in checks["launch settings"].detail
