"""Launch templates and instance metadata options, against moto's EC2 server.

moto implements CreateLaunchTemplate, DescribeLaunchTemplateVersions and RunInstances with a
``LaunchTemplate``, and keeps ``MetadataOptions`` on the instance, so these run the real calls;
nothing here is a stand-in.
"""

from __future__ import annotations

from typing import Any

import pytest

from elb.cloud.ec2 import Choice, LaunchSpec, run_arguments
from elb.config import ConfigError, parse_config
from elb.groups import LaunchTemplate

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
    args = run_arguments(spec, Choice("c5.large", None, "spot"), "elb", "node001", "tok")
    assert args["InstanceMarketOptions"]["MarketType"] == "spot"  # type: ignore[typeddict-item]
    assert "ImageId" not in args and "MetadataOptions" not in args and "SubnetId" not in args


@pytest.mark.parametrize("clash", ["ami: ami-12345678", "key_name: k", "security_groups: [sg-1]", "user_data: x"])
def test_settings_the_template_owns_are_refused_beside_it(clash: str) -> None:
    import yaml

    ec2 = {"launch_template": {"name": "elb-workers"}, **yaml.safe_load(clash)}
    with pytest.raises((ConfigError, ValueError), match="set in the launch template"):
        parse_config({"cloud": {"provider": "ec2", "ec2": ec2}})
