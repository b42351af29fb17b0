"""The pure parts of the EC2 adapter, elb.clouds.ec2 (no server needed, so not marked ``moto``), and the IAM policy
in docs/iam-policy.json checked against the EC2 calls the adapter really makes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError, NoCredentialsError, ParamValidationError, ReadTimeoutError

from elb.clouds.ec2.errors import missing_permission, to_cloud_error
from elb.clouds.ec2.launch_requests import Choice, LaunchSpec, choices, client_token, run_arguments
from elb.clouds.ec2.tags import is_cluster_worker
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError

from .conftest import client_error

REPO = Path(__file__).resolve().parents[2]


def spec(**kw: object) -> LaunchSpec:
    base: dict[str, object] = {"image_id": "ami-1", "instance_types": ("a", "b"), "subnets": ("s1", "s2")}
    base.update(kw)
    return LaunchSpec(**base)  # type: ignore[arg-type]


def test_choices_try_each_type_in_every_subnet_then_the_next_type() -> None:
    got = [(c.instance_type, c.subnet, c.market) for c in choices(spec())]
    assert got == [
        ("a", "s1", "on-demand"),
        ("a", "s2", "on-demand"),
        ("b", "s1", "on-demand"),
        ("b", "s2", "on-demand"),
    ]


def test_spot_choices_come_first_and_fall_back_only_if_allowed() -> None:
    both = [c.market for c in choices(spec(spot=True))]
    assert both == ["spot"] * 4 + ["on-demand"] * 4
    assert [c.market for c in choices(spec(spot=True, spot_fallback_on_demand=False))] == ["spot"] * 4


def test_client_token_is_a_digest_of_the_request_the_earlier_life_and_the_generation() -> None:
    args = run_arguments(spec(), Choice("t3.large", "subnet-1"), "elb", "node001")
    tok = args["ClientToken"]
    assert tok == run_arguments(spec(), Choice("t3.large", "subnet-1"), "elb", "node001")["ClientToken"]
    assert len(tok) <= 64 and tok.isascii()
    assert client_token({**args, "DryRun": True, "ClientToken": "x"}) == tok  # neither is part of it
    others = {
        run_arguments(spec(), Choice("t3.large", "subnet-1"), "other", "node001")["ClientToken"],
        run_arguments(spec(), Choice("t3.large", "subnet-1"), "elb", "node002")["ClientToken"],
        run_arguments(spec(), Choice("m5.large", "subnet-1"), "elb", "node001")["ClientToken"],
        run_arguments(spec(), Choice("t3.large", "subnet-2"), "elb", "node001")["ClientToken"],
        run_arguments(spec(), Choice("t3.large", "subnet-1", "spot"), "elb", "node001")["ClientToken"],
        run_arguments(spec(image_id="ami-2"), Choice("t3.large", "subnet-1"), "elb", "node001")["ClientToken"],
        run_arguments(spec(), Choice("t3.large", "subnet-1"), "elb", "node001", generation=1)["ClientToken"],
        run_arguments(spec(), Choice("t3.large", "subnet-1"), "elb", "node001", after="i-0abc")["ClientToken"],
    }
    assert tok not in others and len(others) == 8


def test_run_arguments_carry_every_setting() -> None:
    s = spec(
        security_groups=("sg-1",),
        key_name="k",
        iam_instance_profile="arn:aws:iam::1:instance-profile/w",
        root_device_name="/dev/xvda",
        root_volume_size=50,
        user_data="#!/bin/sh\n",
        extra_tags={"team": "x"},
        spot=True,
        spot_max_price="0.1",
    )
    args = run_arguments(s, Choice("a", "s2", "spot"), "elb", "node007")
    # "a" is a made-up instance type, outside the stubs' Literal of EC2's types.
    assert args["ImageId"] == "ami-1" and args["InstanceType"] == "a" and args["SubnetId"] == "s2"  # type: ignore[comparison-overlap]
    assert (args["MinCount"], args["MaxCount"], args["ClientToken"]) == (1, 1, client_token(args))
    assert args["SecurityGroupIds"] == ["sg-1"] and args["KeyName"] == "k"
    assert args["IamInstanceProfile"] == {"Arn": "arn:aws:iam::1:instance-profile/w"}
    assert args["BlockDeviceMappings"] == [
        {"DeviceName": "/dev/xvda", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 50}}
    ]
    assert args["UserData"] == "#!/bin/sh\n"
    assert args["InstanceMarketOptions"]["SpotOptions"]["MaxPrice"] == "0.1"
    for ts in args["TagSpecifications"]:
        tags = {t["Key"]: t["Value"] for t in ts["Tags"]}
        assert tags == {TAG_CLUSTER: "elb", TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: "node007", "team": "x"}
    plain = run_arguments(spec(iam_instance_profile="workers"), Choice("a", None), "elb", "n")
    assert plain["IamInstanceProfile"] == {"Name": "workers"}
    assert "SubnetId" not in plain and "InstanceMarketOptions" not in plain and "BlockDeviceMappings" not in plain


def test_root_volume_without_a_root_device_is_an_error() -> None:
    with pytest.raises(CloudError, match="root device"):
        run_arguments(spec(root_volume_size=10), Choice("a", None), "elb", "n")


def test_missing_permission_is_read_from_the_message() -> None:
    msg = "User: arn:aws:iam::1:user/x is not authorized to perform: iam:PassRole on resource: arn:..."
    assert missing_permission(msg, "RunInstances") == "iam:PassRole"
    assert missing_permission("You are not authorized to perform this operation.", "RunInstances") == (
        "ec2:RunInstances"
    )


def test_errors_are_classified() -> None:
    denied = to_cloud_error(client_error("UnauthorizedOperation", "nope", "TerminateInstances"), "terminating")
    assert not denied.retryable and "ec2:TerminateInstances" in str(denied)
    assert to_cloud_error(client_error("RequestLimitExceeded", "slow down", "RunInstances"), "x").throttled
    assert to_cloud_error(client_error("Throttling", "slow down", "DescribeInstances"), "x").throttled
    busy = to_cloud_error(client_error("InternalError", "oops", "RunInstances"), "x")
    assert busy.retryable and not busy.throttled
    assert not to_cloud_error(client_error("InvalidAMIID.NotFound", "no", "RunInstances"), "x").retryable
    assert to_cloud_error(EndpointConnectionError(endpoint_url="http://x"), "x").retryable
    assert to_cloud_error(ReadTimeoutError(endpoint_url="http://x"), "x").retryable
    assert not to_cloud_error(NoCredentialsError(), "x").retryable
    assert not to_cloud_error(ParamValidationError(report="bad"), "x").retryable


def test_only_managed_workers_of_the_cluster_pass() -> None:
    good = {TAG_CLUSTER: "elb", TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: "node001"}
    assert is_cluster_worker(good, "elb", "master")
    assert not is_cluster_worker({**good, TAG_CLUSTER: "other"}, "elb", "master")
    assert not is_cluster_worker({**good, TAG_ROLE: "master"}, "elb", "master")
    assert not is_cluster_worker({**good, TAG_NAME: "master"}, "elb", "master")
    assert not is_cluster_worker({k: v for k, v in good.items() if k != TAG_MANAGED_BY}, "elb", "master")
    assert not is_cluster_worker({**good, TAG_NAME: ""}, "elb", "master")


def test_iam_policy_allows_every_call_the_adapter_makes() -> None:
    policy = json.loads((REPO / "docs" / "iam-policy.json").read_text())
    allowed: set[str] = set()
    for st in policy["Statement"]:
        assert st["Effect"] == "Allow"
        acts = st["Action"]
        allowed.update([acts] if isinstance(acts, str) else acts)
    # Every module of the adapter but notices.py, whose client is SQS's.
    adapter = [p for p in sorted((REPO / "elb" / "clouds" / "ec2").glob("*.py")) if p.name != "notices.py"]
    source = "".join(p.read_text() for p in adapter)
    methods = set(re.findall(r"client\.(\w+)\(", source)) | set(re.findall(r'get_paginator\("(\w+)"\)', source))
    methods.discard("get_paginator")
    assert methods >= {"run_instances", "describe_instances", "terminate_instances", "describe_instance_types"}
    api = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    needed = {f"ec2:{api.meta.method_to_api_mapping[m]}" for m in methods}
    needed |= {"ec2:CreateTags", "iam:PassRole"}  # tags at creation; instance profiles
    assert needed <= allowed, f"docs/iam-policy.json lacks {sorted(needed - allowed)}"
    text = json.dumps(policy)
    for tag in (TAG_CLUSTER, TAG_ROLE, TAG_MANAGED_BY):
        assert f"aws:ResourceTag/{tag}" in text and f"aws:RequestTag/{tag}" in text
