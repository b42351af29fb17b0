"""elb.clouds.ec2.cloud against moto's EC2 server.

moto runs the real EC2 API calls (launch, tags, describe, terminate, instance types). The only
stand-ins are in ``FaultyClient`` (conftest.py) and the ``before-send`` hook in the throttling
tests, for what moto cannot produce: capacity errors (InsufficientInstanceCapacity,
InstanceLimitExceeded, Unsupported), permission errors (UnauthorizedOperation), throttling
(RequestLimitExceeded), a lost RunInstances answer or connection, an instance that never leaves ``pending``,
and EC2's ClientToken idempotency (moto ignores tokens).
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import EndpointConnectionError

from elb.clouds.ec2.cloud import Ec2Cloud, make_client
from elb.clouds.ec2.config import Ec2Config
from elb.core.config import Config, parse_config
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, Cloud, CloudError

from .conftest import (
    CLUSTER,
    REGION,
    FakeClock,
    FaultyClient,
    all_instances,
    client_error,
    make_instance,
    state_of,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

pytestmark = pytest.mark.moto


def cloud_with(
    aws_env: str, clock: FakeClock | None = None, *, faulty: bool = True, slots: int | None = None, **cfg: Any
) -> tuple[Ec2Cloud, FaultyClient]:
    config = Ec2Config(region=REGION, endpoint_url=aws_env, **cfg)
    client = FaultyClient(make_client(config, total_attempts=2))
    clock = clock or FakeClock()
    cloud = Ec2Cloud(
        config,
        CLUSTER,
        slots_per_node=slots,
        # FaultyClient stands in for the EC2 client: it hands every operation on to the real one.
        client=cast("EC2Client", client) if faulty else client.real,
        clock=clock,
        sleep=clock.sleep,
        poll_interval=5.0,
    )
    return cloud, client


def tags(inst: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags", [])}


def live(ec2: Any) -> list[dict[str, Any]]:
    return [i for i in all_instances(ec2) if i["State"]["Name"] not in ("terminated", "shutting-down")]


# --------------------------------------------------------------------------- launch


def test_launch_tags_waits_and_reports(ec2: Any, ami: str, subnets: list[str], aws_env: str) -> None:
    cloud, client = cloud_with(
        aws_env, ami=ami, instance_types=["t3.large"], subnets=[subnets[1]], extra_tags={"team": "genomics"}
    )
    assert isinstance(cloud, Cloud)
    result = cloud.launch(["node001", "node002"])

    assert result.failed == {}
    assert [i.name for i in result.launched] == ["node001", "node002"]
    for inst in result.launched:
        assert inst.state == "running"
        assert inst.private_ip
        assert inst.instance_type == "t3.large"
        assert inst.image_id == ami
        assert inst.slots == 2  # t3.large has 2 vCPUs in describe_instance_types
    raw = {tags(i)[TAG_NAME]: i for i in all_instances(ec2)}
    assert set(raw) == {"node001", "node002"}
    for name, raw_inst in raw.items():
        assert tags(raw_inst) == {
            TAG_CLUSTER: CLUSTER,
            TAG_ROLE: "worker",
            TAG_MANAGED_BY: "elb",
            TAG_NAME: name,
            "team": "genomics",
        }
        assert raw_inst["SubnetId"] == subnets[1]
    # tags are given at creation, for the instance and its volumes, never added afterwards
    runs = client.calls_of("run_instances")
    assert len(runs) == 2
    for kw in runs:
        kinds = {ts["ResourceType"] for ts in kw["TagSpecifications"]}
        assert kinds == {"instance", "volume"}
    assert client.calls_of("create_tags") == []
    vols = ec2.describe_volumes()["Volumes"]
    assert vols and all(tags(v)[TAG_CLUSTER] == CLUSTER for v in vols)
    # the token is derived from cluster and node name (and the choice): deterministic, distinct
    assert runs[0]["ClientToken"] != runs[1]["ClientToken"]
    assert len(runs[0]["ClientToken"]) <= 64


def test_launch_copies_the_newest_worker_when_config_is_silent(
    ec2: Any, ami: str, subnets: list[str], aws_env: str
) -> None:
    sg = ec2.create_security_group(GroupName="sge", Description="sge workers")["GroupId"]
    ec2.create_key_pair(KeyName="cluster-key")
    make_instance(
        ec2,
        ami,
        {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"},
        SubnetId=subnets[0],
        InstanceType="m5.2xlarge",
    )
    # an admin-made worker (no managed-by tag): the model for new ones, never listed or terminated
    make_instance(
        ec2,
        ami,
        {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_NAME: "node001"},
        SubnetId=subnets[2],
        InstanceType="c5.xlarge",
        SecurityGroupIds=[sg],
        KeyName="cluster-key",
    )
    cloud, _ = cloud_with(aws_env)

    result = cloud.launch(["node002"])

    assert result.failed == {}
    [inst] = result.launched
    assert (inst.instance_type, inst.image_id, inst.slots) == ("c5.xlarge", ami, 4)
    raw = next(i for i in all_instances(ec2) if i["InstanceId"] == inst.instance_id)
    assert raw["SubnetId"] == subnets[2]
    assert raw["KeyName"] == "cluster-key"
    assert [g["GroupId"] for g in raw["SecurityGroups"]] == [sg]
    assert [w.name for w in cloud.list_workers()] == ["node002"]


def test_launch_without_ami_or_workers_is_a_clear_error(ec2: Any, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, instance_types=["t3.large"])
    with pytest.raises(CloudError, match=r"cloud\.ec2\.ami"):
        cloud.launch(["node001"])
    assert client.calls_of("run_instances") == []
    assert all_instances(ec2) == []


def test_launch_refuses_bad_names(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    for names in (["master"], ["node001", "node001"], ["-rf"], ["a b"], [""]):
        with pytest.raises(CloudError):
            cloud.launch(names)
    assert all_instances(ec2) == []


def test_root_volume_and_user_data(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(
        aws_env,
        ami=ami,
        instance_types=["t3.large"],
        root_volume_size=40,
        root_volume_type="gp3",
        user_data="#!/bin/sh\necho elb\n",
    )
    [inst] = cloud.launch(["node001"]).launched
    root = ec2.describe_images(ImageIds=[ami])["Images"][0]["RootDeviceName"]
    [kw] = client.calls_of("run_instances")
    assert kw["BlockDeviceMappings"] == [
        {"DeviceName": root, "Ebs": {"DeleteOnTermination": True, "VolumeSize": 40, "VolumeType": "gp3"}}
    ]
    vols = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [inst.instance_id]}])
    assert [v["Size"] for v in vols["Volumes"]] == [40]
    ud = ec2.describe_instance_attribute(InstanceId=inst.instance_id, Attribute="userData")
    assert base64.b64decode(ud["UserData"]["Value"]).decode() == "#!/bin/sh\necho elb\n"


def test_reserved_extra_tags_are_refused(aws_env: str) -> None:
    for bad in ({TAG_CLUSTER: "x"}, {"Name": "y"}, {"aws:foo": "z"}):
        with pytest.raises(CloudError, match="extra_tags"):
            cloud_with(aws_env, ami="ami-12345678", extra_tags=bad)


# --------------------------------------------------------------------------- idempotence


def test_launch_again_adopts_instead_of_starting_a_second(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    first = cloud.launch(["node001"]).launched[0]
    again = cloud.launch(["node001"]).launched[0]
    assert again.instance_id == first.instance_id
    assert len(live(ec2)) == 1
    assert len(client.calls_of("run_instances")) == 1
    # a retried batch: the node that exists is adopted, only the missing one is started
    both = cloud.launch(["node001", "node002"]).launched
    assert [i.name for i in both] == ["node001", "node002"]
    assert both[0].instance_id == first.instance_id
    assert len(live(ec2)) == 2
    assert len(client.calls_of("run_instances")) == 2


def test_lost_answer_is_not_a_second_instance(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])

    def lose_answer(kwargs: dict[str, Any], resp: Any) -> Any:
        raise EndpointConnectionError(endpoint_url=aws_env)  # moto started it; the answer never came

    client.rewrite("run_instances", lose_answer)
    result = cloud.launch(["node001"])

    assert result.failed == {}
    assert len(result.launched) == 1
    assert len(live(ec2)) == 1
    assert len(client.calls_of("run_instances")) == 1  # found by its tags, not sent again


def test_retries_keep_the_client_token(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    calls = {"n": 0}

    def lost_before_moto(kwargs: dict[str, Any]) -> Exception | None:
        calls["n"] += 1
        return EndpointConnectionError(endpoint_url=aws_env) if calls["n"] == 1 else None

    client.fail("run_instances", lost_before_moto)
    result = cloud.launch(["node001"])
    assert len(result.launched) == 1
    tokens = [kw["ClientToken"] for kw in client.calls_of("run_instances")]
    assert len(tokens) == 2 and tokens[0] == tokens[1]
    assert len(live(ec2)) == 1


def test_reused_name_gets_a_fresh_token(ec2: Any, ami: str, aws_env: str) -> None:
    """EC2 answers a known token with the instance it made, even terminated; moto does not."""
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    seen: dict[str, str] = {}

    def ec2_token_semantics(kwargs: dict[str, Any], resp: Any) -> Any:
        token = kwargs["ClientToken"]
        if token in seen:
            ec2_real = client.real
            ec2_real.terminate_instances(InstanceIds=[resp["Instances"][0]["InstanceId"]])
            old = ec2_real.describe_instances(InstanceIds=[seen[token]])["Reservations"][0]
            return {"Instances": old["Instances"]}
        seen[token] = resp["Instances"][0]["InstanceId"]
        return resp

    client.rewrite("run_instances", ec2_token_semantics)
    old = cloud.launch(["node003"]).launched[0]
    cloud.terminate([old.instance_id])
    new = cloud.launch(["node003"]).launched[0]

    assert new.instance_id != old.instance_id
    assert [i.instance_id for i in cloud.list_workers()] == [new.instance_id]
    tokens = [kw["ClientToken"] for kw in client.calls_of("run_instances")]
    assert len(tokens) == 2 and tokens[0] != tokens[1]  # the ended instance is listed: a new token at once

    # Once EC2 no longer lists the ended instance (about an hour; the token lives longer), the
    # old token comes back: EC2 answers it with the ended instance, and elb takes the next one.
    client.calls.clear()
    cloud.terminate([new.instance_id])
    ENDED = ("terminated", "shutting-down")

    def forget_ended(kwargs: dict[str, Any], resp: Any) -> Any:
        if any(f["Name"] == f"tag:{TAG_NAME}" for f in kwargs.get("Filters", [])):
            for r in resp.get("Reservations", []):
                r["Instances"] = [i for i in r["Instances"] if i["State"]["Name"] not in ENDED]
        return resp

    client.rewrite_pages("describe_instances", forget_ended)
    third = cloud.launch(["node003"]).launched[0]
    assert third.instance_id not in (old.instance_id, new.instance_id)
    again = [kw["ClientToken"] for kw in client.calls_of("run_instances")]
    assert again[0] == tokens[0] and len(set(again)) == 2


# --------------------------------------------------------------------------- waiting


def pending_for(client: FaultyClient, polls: int, *, state: str = "pending") -> dict[str, int]:
    """Make the instances look ``state`` without a private address for the first ``polls`` polls."""
    seen = {"polls": 0}

    def stuck(kwargs: dict[str, Any], resp: Any) -> Any:
        seen["polls"] += 1
        if seen["polls"] <= polls:
            for res in resp["Reservations"]:
                for inst in res["Instances"]:
                    inst["State"] = {"Code": 0, "Name": state}
                    inst.pop("PrivateIpAddress", None)
        return resp

    client.rewrite("describe_instances", stuck)
    return seen


def test_waits_until_running_with_a_private_address(ec2: Any, ami: str, aws_env: str) -> None:
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, ami=ami, instance_types=["t3.large"])
    seen = pending_for(client, 3)
    result = cloud.launch(["node001", "node002"])
    assert result.failed == {}
    assert len(result.launched) == 2
    assert seen["polls"] == 4  # both waited on in one describe per poll
    assert clock.sleeps == [5.0, 5.0, 5.0]


def test_boot_timeout_terminates_and_reports(ec2: Any, ami: str, aws_env: str) -> None:
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, ami=ami, instance_types=["t3.large"], boot_timeout=60)
    pending_for(client, 10**6)
    result = cloud.launch(["node001"])

    assert result.launched == ()
    assert "not running" in result.failed["node001"] and "60s" in result.failed["node001"]
    assert sum(clock.sleeps) == pytest.approx(60.0)
    [inst] = all_instances(ec2)
    assert state_of(ec2, inst["InstanceId"]) in ("shutting-down", "terminated")
    assert cloud.list_workers() == []


def test_instance_that_dies_while_booting_is_reported(ec2: Any, ami: str, aws_env: str) -> None:
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, ami=ami, instance_types=["t3.large"])
    pending_for(client, 1, state="pending")

    def dies(kwargs: dict[str, Any], resp: Any) -> Any:
        for res in resp["Reservations"]:
            for inst in res["Instances"]:
                if tags(inst).get(TAG_NAME) == "node002":
                    inst["State"] = {"Code": 48, "Name": "terminated"}
                    inst["StateReason"] = {"Code": "Server.SpotInstanceTermination", "Message": "spot reclaimed"}
        return resp

    client.rewrite("describe_instances", dies)
    result = cloud.launch(["node001", "node002"])
    assert [i.name for i in result.launched] == ["node001"]
    assert "terminated" in result.failed["node002"] and "spot reclaimed" in result.failed["node002"]


# --------------------------------------------------------------------------- capacity


def capacity_error(
    kind: str, *, when_type: str | None = None, when_subnet: str | None = None, spot: bool | None = None
) -> Any:
    messages = {
        "InsufficientInstanceCapacity": "We currently do not have sufficient capacity in the AZ you requested.",
        "InstanceLimitExceeded": "You have requested more instances than your current instance limit allows.",
        "Unsupported": "Your requested instance type is not supported in your requested Availability Zone.",
    }

    def fault(kwargs: dict[str, Any]) -> Exception | None:
        if when_type is not None and kwargs["InstanceType"] != when_type:
            return None
        if when_subnet is not None and kwargs.get("SubnetId") != when_subnet:
            return None
        if spot is not None and ("InstanceMarketOptions" in kwargs) != spot:
            return None
        return client_error(kind, messages[kind], "RunInstances")

    return fault


@pytest.mark.parametrize("kind", ["InsufficientInstanceCapacity", "InstanceLimitExceeded", "Unsupported"])
def test_capacity_error_moves_to_the_next_type_and_backs_off(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, kind: str
) -> None:
    clock = FakeClock()
    cloud, client = cloud_with(
        aws_env, clock, ami=ami, instance_types=["t3.large", "m5.large"], subnets=[subnets[0]], capacity_backoff=600
    )
    client.fail("run_instances", capacity_error(kind, when_type="t3.large"))

    first = cloud.launch(["node001"])
    assert first.failed == {}
    assert first.launched[0].instance_type == "m5.large"
    assert [kw["InstanceType"] for kw in client.calls_of("run_instances")] == ["t3.large", "m5.large"]

    # within the back-off, t3.large is not even tried
    clock.now += 599
    client.calls.clear()
    second = cloud.launch(["node002"])
    assert second.launched[0].instance_type == "m5.large"
    assert [kw["InstanceType"] for kw in client.calls_of("run_instances")] == ["m5.large"]

    # after it, t3.large is tried first again (and now there is room)
    clock.now += 2
    client.calls.clear()
    client._before.clear()
    third = cloud.launch(["node003"])
    assert third.launched[0].instance_type == "t3.large"
    assert [kw["InstanceType"] for kw in client.calls_of("run_instances")] == ["t3.large"]


def test_unsupported_in_one_az_moves_to_the_next_subnet(ec2: Any, ami: str, subnets: list[str], aws_env: str) -> None:
    cloud, client = cloud_with(
        aws_env, ami=ami, instance_types=["t3.large", "m5.large"], subnets=[subnets[0], subnets[1]]
    )
    client.fail("run_instances", capacity_error("Unsupported", when_type="t3.large", when_subnet=subnets[0]))
    [inst] = cloud.launch(["node001"]).launched
    assert inst.instance_type == "t3.large"  # the same type elsewhere comes before another type
    raw = next(i for i in all_instances(ec2) if i["InstanceId"] == inst.instance_id)
    assert raw["SubnetId"] == subnets[1]


def test_no_capacity_anywhere_fails_the_node_and_starts_nothing(
    ec2: Any, ami: str, subnets: list[str], aws_env: str
) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large", "m5.large"], subnets=subnets[:2])
    client.fail("run_instances", capacity_error("InsufficientInstanceCapacity"))
    result = cloud.launch(["node001", "node002"])
    assert result.launched == ()
    assert set(result.failed) == {"node001", "node002"}
    assert "no capacity" in result.failed["node001"]
    assert result.failed["node001"].count("InsufficientInstanceCapacity") == 4
    assert "backed off" in result.failed["node002"]  # the second node does not hammer EC2 again
    assert len(client.calls_of("run_instances")) == 4
    assert all_instances(ec2) == []


def test_spot_is_requested_and_falls_back_to_on_demand(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], spot=True, spot_max_price="0.05")
    [spot] = cloud.launch(["node001"]).launched
    [kw] = client.calls_of("run_instances")
    assert kw["InstanceMarketOptions"]["MarketType"] == "spot"
    assert kw["InstanceMarketOptions"]["SpotOptions"]["MaxPrice"] == "0.05"
    raw = next(i for i in all_instances(ec2) if i["InstanceId"] == spot.instance_id)
    assert raw.get("InstanceLifecycle") == "spot"

    client.calls.clear()
    client.fail("run_instances", capacity_error("InsufficientInstanceCapacity", spot=True))
    [od] = cloud.launch(["node002"]).launched
    runs = client.calls_of("run_instances")
    assert ["InstanceMarketOptions" in kw for kw in runs] == [True, False]
    raw = next(i for i in all_instances(ec2) if i["InstanceId"] == od.instance_id)
    assert raw.get("InstanceLifecycle") is None


def test_spot_without_fallback_fails(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], spot=True, spot_fallback_on_demand=False)
    client.fail("run_instances", capacity_error("InsufficientInstanceCapacity", spot=True))
    result = cloud.launch(["node001"])
    assert result.launched == ()
    assert "spot" in result.failed["node001"]
    assert len(client.calls_of("run_instances")) == 1


# --------------------------------------------------------------------------- permissions, throttling


DENIED = (
    "You are not authorized to perform this operation. User: arn:aws:sts::123456789012:assumed-role/elb/i-0 "
    "is not authorized to perform: {perm} on resource: arn:aws:ec2:us-east-1:123456789012:instance/* "
    "because no identity-based policy allows the {perm} action. Encoded authorization failure message: XYZ"
)


@pytest.mark.parametrize("perm", ["ec2:RunInstances", "iam:PassRole", "ec2:CreateTags"])
def test_permission_error_names_the_permission_and_is_not_retried(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, perm: str
) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large", "m5.large"], subnets=subnets[:2])
    client.fail(
        "run_instances", lambda kw: client_error("UnauthorizedOperation", DENIED.format(perm=perm), "RunInstances")
    )
    with pytest.raises(CloudError) as info:
        cloud.launch(["node001", "node002"])
    assert perm in str(info.value)
    assert "Encoded authorization" not in str(info.value)
    assert info.value.retryable is False
    assert len(client.calls_of("run_instances")) == 1  # no other type/subnet, no other node
    assert all_instances(ec2) == []


def test_permission_error_after_some_launched_reports_the_rest(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    n = {"calls": 0}

    def second_denied(kwargs: dict[str, Any]) -> Exception | None:
        n["calls"] += 1
        if n["calls"] >= 2:
            return client_error("UnauthorizedOperation", DENIED.format(perm="ec2:RunInstances"), "RunInstances")
        return None

    client.fail("run_instances", second_denied)
    result = cloud.launch(["node001", "node002", "node003"])
    assert [i.name for i in result.launched] == ["node001"]
    assert set(result.failed) == {"node002", "node003"}
    assert "ec2:RunInstances" in result.failed["node003"]
    assert n["calls"] == 2


def test_permission_error_without_a_named_action_names_the_operation(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    client.fail(
        "terminate_instances", lambda kw: client_error("UnauthorizedOperation", "Not allowed.", "TerminateInstances")
    )
    [inst] = cloud.launch(["node001"]).launched
    with pytest.raises(CloudError, match="ec2:TerminateInstances"):
        cloud.terminate([inst.instance_id])


def throttle_hook(times: int) -> tuple[Any, dict[str, int]]:
    """A ``before-send`` handler answering RequestLimitExceeded ``times`` times, at the HTTP level,
    so that botocore's own retry handler (standard mode) sees real throttling responses."""
    count = {"sent": 0, "throttled": 0}
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>RequestLimitExceeded</Code>'
        b"<Message>Request limit exceeded.</Message></Error></Errors><RequestID>x</RequestID></Response>"
    )

    def hook(request: Any, **_: Any) -> AWSResponse | None:
        count["sent"] += 1
        if count["throttled"] < times:
            count["throttled"] += 1
            return AWSResponse(request.url, 503, HTTPHeaders.from_dict({"Content-Type": "text/xml"}), _Raw(body))
        return None

    return hook, count


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body

    def read(self, *_: Any, **__: Any) -> bytes:
        return self.body


def test_throttling_is_retried_by_botocore_standard_mode(ec2: Any, ami: str, aws_env: str) -> None:
    config = Ec2Config(region=REGION, endpoint_url=aws_env, ami=ami, instance_types=["t3.large"])
    client = make_client(config, total_attempts=3)
    # botocore's Config sets its options as attributes at run time; its stubs declare none of them.
    assert client.meta.config.retries["mode"] == "standard"  # type: ignore[attr-defined]
    hook, count = throttle_hook(2)
    client.meta.events.register("before-send.ec2.DescribeInstances", hook)
    cloud = Ec2Cloud(config, CLUSTER, client=client)
    assert cloud.list_workers() == []
    assert count == {"sent": 3, "throttled": 2}


def test_throttling_beyond_the_retries_is_a_retryable_error(ec2: Any, ami: str, aws_env: str) -> None:
    config = Ec2Config(region=REGION, endpoint_url=aws_env, ami=ami, instance_types=["t3.large"])
    client = make_client(config, total_attempts=2)
    hook, count = throttle_hook(100)
    client.meta.events.register("before-send.ec2.DescribeInstances", hook)
    cloud = Ec2Cloud(config, CLUSTER, client=client)
    with pytest.raises(CloudError, match="RequestLimitExceeded") as info:
        cloud.list_workers()
    assert info.value.retryable is True and info.value.throttled is True
    assert count["sent"] == 2  # total attempts, then give up: no storm


def test_a_launch_throttled_after_its_first_node_fails_the_rest_as_throttled(ec2: Any, ami: str, aws_env: str) -> None:
    """RunInstances refused for the request rate (after botocore's retries and elb's second send)
    once a node started: the others failed, and marked throttled for the launch back-off."""
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    calls = {"n": 0}

    def throttled_after_one(kwargs: dict[str, Any]) -> Exception | None:
        calls["n"] += 1
        return (
            client_error("RequestLimitExceeded", "Request limit exceeded.", "RunInstances") if calls["n"] > 1 else None
        )

    client.fail("run_instances", throttled_after_one)
    result = cloud.launch(["node001", "node002", "node003"])
    assert [i.name for i in result.launched] == ["node001"]
    assert set(result.failed) == {"node002", "node003"} and "RequestLimitExceeded" in result.failed["node002"]
    assert result.throttled == {"node002", "node003"}


def test_no_credentials_is_a_clear_error(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    config = Ec2Config(region=REGION, endpoint_url=aws_env)
    cloud = Ec2Cloud(config, CLUSTER, client=make_client(config))
    with pytest.raises(CloudError, match="no AWS credentials") as info:
        cloud.list_workers()
    assert info.value.retryable is False


# --------------------------------------------------------------------------- list and terminate


@pytest.fixture
def crowd(ec2: Any, ami: str, aws_env: str) -> dict[str, str]:
    """A cluster's master and elb worker, and everything around them that elb must leave alone."""
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    mine = cloud.launch(["node001"]).launched[0].instance_id
    ids = {
        "mine": mine,
        "master": make_instance(
            ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master", TAG_MANAGED_BY: "elb"}
        ),
        "master_as_worker": make_instance(
            ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_NAME: "master", TAG_MANAGED_BY: "elb"}
        ),
        "foreign": make_instance(
            ec2, ami, {TAG_CLUSTER: "other", TAG_ROLE: "worker", TAG_NAME: "node001", TAG_MANAGED_BY: "elb"}
        ),
        "admin_worker": make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_NAME: "node009"}),
        "untagged": make_instance(ec2, ami, {"Name": "node002"}),
        "terminated": make_instance(
            ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_NAME: "node000", TAG_MANAGED_BY: "elb"}
        ),
    }
    ec2.terminate_instances(InstanceIds=[ids["terminated"]])
    return ids


def test_list_workers_lists_only_the_clusters_elb_workers(crowd: dict[str, str], aws_env: str) -> None:
    cloud, _ = cloud_with(aws_env)
    workers = cloud.list_workers()
    assert [(w.instance_id, w.name) for w in workers] == [(crowd["mine"], "node001")]
    assert workers[0].tags[TAG_CLUSTER] == CLUSTER
    assert workers[0].launched_at == pytest.approx(dt.datetime.now(dt.UTC).timestamp(), abs=600)


@pytest.mark.parametrize("other", ["master", "master_as_worker", "foreign", "admin_worker", "untagged"])
def test_terminate_refuses_anything_but_the_clusters_workers(
    ec2: Any, crowd: dict[str, str], aws_env: str, other: str
) -> None:
    cloud, client = cloud_with(aws_env)
    with pytest.raises(CloudError, match="refusing"):
        cloud.terminate([crowd["mine"], crowd[other]])
    assert client.calls_of("terminate_instances") == []
    assert state_of(ec2, crowd["mine"]) == "running"
    assert state_of(ec2, crowd[other]) == "running"


def test_terminate_refuses_malformed_and_unknown_ids(ec2: Any, crowd: dict[str, str], aws_env: str) -> None:
    cloud, client = cloud_with(aws_env)
    for bad in (["i-0000000000000dead"], ["'; rm -rf /"], ["sg-12345678"], [crowd["mine"], "x"]):
        with pytest.raises(CloudError, match="refusing"):
            cloud.terminate(bad)
    assert client.calls_of("terminate_instances") == []
    assert state_of(ec2, crowd["mine"]) == "running"


def test_terminate_terminates_and_is_idempotent(ec2: Any, crowd: dict[str, str], aws_env: str) -> None:
    cloud, client = cloud_with(aws_env)
    cloud.terminate([crowd["mine"]])
    assert state_of(ec2, crowd["mine"]) in ("shutting-down", "terminated")
    assert cloud.list_workers() == []
    cloud.terminate([crowd["mine"], crowd["terminated"]])  # already gone: nothing to do, no error
    cloud.terminate([])
    assert [kw["InstanceIds"] for kw in client.calls_of("terminate_instances")] == [[crowd["mine"]]]
    others = [k for k in crowd if k not in ("mine", "terminated")]
    assert all(state_of(ec2, crowd[k]) == "running" for k in others)


# --------------------------------------------------------------------------- slots


def test_slots_from_instance_type_are_cached(ec2: Any, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env)
    assert cloud.slots_for("c5.2xlarge") == 8
    assert cloud.slots_for("c5.2xlarge") == 8
    assert cloud.slots_for("t3.micro") == 2
    assert len(client.calls_of("describe_instance_types")) == 2


def test_configured_slots_win(ec2: Any, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, slots=3)
    assert cloud.slots_for("c5.2xlarge") == 3
    assert client.calls_of("describe_instance_types") == []


def test_unknown_instance_type_is_an_error(ec2: Any, aws_env: str) -> None:
    cloud, _ = cloud_with(aws_env)
    with pytest.raises(CloudError):
        cloud.slots_for("no.such-type")


def test_new_node_slots_from_the_first_configured_type_or_the_newest_worker(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, _ = cloud_with(aws_env, instance_types=["c5.2xlarge", "t3.micro"])
    assert cloud.new_node_slots() == 8  # the type launch tries first
    cloud, _ = cloud_with(aws_env)
    assert cloud.new_node_slots() is None  # no type configured and no worker to copy
    make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_NAME: "node001"}, InstanceType="c5.xlarge")
    assert cloud.new_node_slots() == 4
    assert cloud_with(aws_env, slots=3)[0].new_node_slots() == 3
    assert cloud_with(aws_env, instance_types=["no.such-type"])[0].new_node_slots() is None  # warned, not raised


def test_from_config_takes_cluster_master_and_slots(aws_env: str) -> None:
    cfg: Config = parse_config(
        {
            "cluster": {"name": "lab", "master": "head"},
            "policy": {"slots_per_node": 6},
            "cloud": {"provider": "ec2", "ec2": {"region": REGION, "endpoint_url": aws_env}},
        }
    )
    cloud = Ec2Cloud.from_config(cfg)
    assert (cloud.cluster, cloud.master, cloud.slots_for("t3.micro")) == ("lab", "head", 6)
    assert isinstance(boto3.client("ec2", region_name=REGION), object)


# --------------------------------------------------------------------------- more defaults


def test_instance_profile_by_name_and_copied_from_the_workers(ec2: Any, ami: str, aws_env: str) -> None:
    iam = boto3.client("iam", region_name=REGION, endpoint_url=aws_env)
    iam.create_role(RoleName="sge-worker", AssumeRolePolicyDocument="{}")
    prof = iam.create_instance_profile(InstanceProfileName="sge-worker")["InstanceProfile"]
    iam.add_role_to_instance_profile(InstanceProfileName="sge-worker", RoleName="sge-worker")
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], iam_instance_profile="sge-worker")
    [first] = cloud.launch(["node001"]).launched
    raw = next(i for i in all_instances(ec2) if i["InstanceId"] == first.instance_id)
    assert raw["IamInstanceProfile"]["Arn"] == prof["Arn"]

    # with no profile configured, the next worker gets the newest worker's (by ARN)
    plain, client2 = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    plain.launch(["node002"])
    [kw] = client2.calls_of("run_instances")
    assert kw["IamInstanceProfile"] == {"Arn": prof["Arn"]}


def test_first_worker_goes_to_the_masters_subnet(ec2: Any, ami: str, subnets: list[str], aws_env: str) -> None:
    make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"}, SubnetId=subnets[3])
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    [inst] = cloud.launch(["node001"]).launched
    raw = next(i for i in all_instances(ec2) if i["InstanceId"] == inst.instance_id)
    assert raw["SubnetId"] == subnets[3]


def test_instances_are_not_left_behind_when_they_cannot_be_watched(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    client.fail(
        "describe_instances",
        lambda kw: client_error(
            "UnauthorizedOperation", DENIED.format(perm="ec2:DescribeInstances"), "DescribeInstances"
        ),
    )
    with pytest.raises(CloudError, match="ec2:DescribeInstances"):
        cloud.launch(["node001", "node002"])
    insts = all_instances(ec2)
    assert len(insts) == 2
    assert all(state_of(ec2, i["InstanceId"]) in ("shutting-down", "terminated") for i in insts)


def test_connection_lost_mid_batch_keeps_the_started_and_reports_the_rest(ec2: Any, ami: str, aws_env: str) -> None:
    """node002's RunInstances and the lookups after it fail to connect (injected); node001 runs."""
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    down = {"on": False}

    def connection_down(request: Any, **_: Any) -> None:
        body = request.body or b""
        body = body.encode() if isinstance(body, str) else body
        if down["on"] and b"Filter.1" in body:  # lookups by tag, not the polls
            raise EndpointConnectionError(endpoint_url=aws_env)

    client.real.meta.events.register("before-send.ec2.DescribeInstances", connection_down)

    def node002_lost(kwargs: dict[str, Any]) -> Exception | None:
        names = {t["Value"] for ts in kwargs["TagSpecifications"] for t in ts["Tags"] if t["Key"] == TAG_NAME}
        if "node002" in names:
            down["on"] = True
            return EndpointConnectionError(endpoint_url=aws_env)
        return None

    client.fail("run_instances", node002_lost)
    result = cloud.launch(["node001", "node002", "node003"])

    assert [i.name for i in result.launched] == ["node001"]
    assert set(result.failed) == {"node002", "node003"}
    assert "EndpointConnectionError" in result.failed["node002"]
    sent = [kw["ClientToken"] for kw in client.calls_of("run_instances")]
    assert len(sent) == 3 and sent[1] == sent[2]  # node002 sent twice with one token, node003 never
    assert len(live(ec2)) == 1


def test_a_worker_launched_without_its_group_tag_gets_it_and_keeps_its_others(ec2: Any, ami: str, aws_env: str) -> None:
    """``tag_groups`` adds ``elb:group`` (EC2's ``CreateTags``): the listing shows it, the
    worker's other tags stay."""
    from elb.core.interfaces import TAG_GROUP

    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    old, other = cloud.launch(["node001", "node002"]).launched  # as an elb that set no group tag
    assert all(TAG_GROUP not in i.tags for i in cloud.list_workers())
    cloud.tag_groups({old.instance_id: "gpu", other.instance_id: "cpu"})
    listed = {i.name: i.tags for i in cloud.list_workers()}
    assert (listed["node001"][TAG_GROUP], listed["node002"][TAG_GROUP]) == ("gpu", "cpu")
    assert listed["node001"][TAG_NAME] == "node001" and listed["node001"][TAG_CLUSTER] == CLUSTER
    assert [kw["Resources"] for kw in client.calls_of("create_tags")] == [[old.instance_id], [other.instance_id]]
