"""The CreateFleet path as EC2 behaves, against moto's server.

moto accepts what EC2 refuses (a ``volume`` tag specification on an instant fleet) and ignores
``ClientToken``s, so what EC2 does with them is checked on the requests elb sends and, where an
answer matters, made by rewriting moto's answer (``FaultyClient.rewrite``): EC2 answers a token
it has seen with the fleet it made then, whatever became of its instances.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from elb.clouds.ec2.launch_requests import Choice
from elb.clouds.ec2.preflight import preflight

from .conftest import FaultyClient, all_instances
from .test_ec2_cloud import cloud_with, live, tags
from .test_ec2_templates import template

pytestmark = pytest.mark.moto

FLEET: dict[str, Any] = {"launch_template": {"name": "elb-workers"}, "instance_types": ["c5.large", "m5.large"]}


def all_reservations(ec2: Any) -> list[dict[str, Any]]:
    return list(ec2.describe_instances()["Reservations"])


def tokens(client: FaultyClient) -> list[str]:
    return [kw["ClientToken"] for kw in client.calls_of("create_fleet")]


def ec2_fleet_tokens(client: FaultyClient) -> dict[str, dict[str, Any]]:
    """EC2's idempotency on CreateFleet: a token seen before gets the first answer again (its
    instances as they are now); moto's new instance for it is taken back."""
    seen: dict[str, dict[str, Any]] = {}

    def rewrite(kwargs: dict[str, Any], resp: Any) -> Any:
        token = kwargs["ClientToken"]
        if token not in seen:
            seen[token] = resp
            return resp
        made = [i for e in resp.get("Instances", []) for i in e.get("InstanceIds", [])]
        if made:
            client.real.terminate_instances(InstanceIds=made)
        return seen[token]

    client.rewrite("create_fleet", rewrite)
    return seen


def test_the_fleet_request_tags_only_what_an_instant_fleet_may_tag(ec2: Any, ami: str, aws_env: str) -> None:
    """CreateFleet (instant) takes the resource types ``fleet`` and ``instance`` only."""
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)
    assert cloud.launch(["node001"]).failed == {}
    (kw,) = client.calls_of("create_fleet")
    assert {ts["ResourceType"] for ts in kw["TagSpecifications"]} == {"fleet", "instance"}


def test_the_volumes_of_a_fleet_node_get_its_tags_once_it_runs(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, extra_tags={"team": "x"}, **FLEET)
    (node,) = cloud.launch(["node001"]).launched
    (raw,) = [i for i in all_instances(ec2) if i["InstanceId"] == node.instance_id]
    volume_ids = [m["Ebs"]["VolumeId"] for m in raw["BlockDeviceMappings"]]
    assert volume_ids
    for vol in ec2.describe_volumes(VolumeIds=volume_ids)["Volumes"]:
        assert tags(vol) == {**tags(raw)}, "each volume carries the instance's tags"
    (kw,) = client.calls_of("create_tags")
    assert sorted(kw["Resources"]) == sorted(volume_ids)


def test_relaunching_a_name_whose_instance_ended_uses_a_new_token(ec2: Any, ami: str, aws_env: str) -> None:
    """Slurm reuses node names: the second life of node001 must not get the first one's answer."""
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)
    ec2_fleet_tokens(client)
    (first,) = cloud.launch(["node001"]).launched
    cloud.terminate([first.instance_id])
    result = cloud.launch(["node001"])
    assert result.failed == {}
    (second,) = result.launched
    assert second.instance_id != first.instance_id and second.state == "running"
    assert len(set(tokens(client))) == 2


def test_a_token_whose_fleet_instance_ended_is_replaced(ec2: Any, ami: str, aws_env: str) -> None:
    """When the earlier life is no longer listed (EC2 lists terminated instances for about an
    hour; the token lives longer), EC2's answer names an ended instance: elb sends a new token."""
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)
    ec2_fleet_tokens(client)
    (first,) = cloud.launch(["node001"]).launched
    cloud.terminate([first.instance_id])

    def forget_ended(kwargs: dict[str, Any], resp: Any) -> Any:
        if not any(f["Name"] == "tag:Name" for f in kwargs.get("Filters", [])):
            return resp
        for r in resp.get("Reservations", []):
            r["Instances"] = [i for i in r["Instances"] if i["State"]["Name"] not in ("terminated", "shutting-down")]
        return resp

    client.rewrite_pages("describe_instances", forget_ended)
    result = cloud.launch(["node001"])
    assert result.failed == {}
    (second,) = result.launched
    assert second.instance_id != first.instance_id
    sent = tokens(client)
    assert sent[0] == sent[1] != sent[2], "the old token once (answered with the ended instance), then a new one"


def test_another_set_of_overrides_is_another_token(ec2: Any, ami: str, aws_env: str) -> None:
    """A back-off takes an override out: the request differs, so its token must differ (EC2
    refuses one token with other parameters: IdempotentParameterMismatch)."""
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)
    (first,) = cloud.launch(["node001"]).launched
    cloud.terminate([first.instance_id])
    cloud.launcher.backoff[Choice("c5.large", None, "on-demand")] = cloud.clock() + 600
    assert cloud.launch(["node001"]).failed == {}
    overrides = [
        [o["InstanceType"] for o in kw["LaunchTemplateConfigs"][0]["Overrides"]]
        for kw in client.calls_of("create_fleet")
    ]
    assert overrides == [["c5.large", "m5.large"], ["m5.large"]]
    assert len(set(tokens(client))) == 2


def test_a_retry_of_one_attempt_keeps_its_token(ec2: Any, ami: str, aws_env: str) -> None:
    """The answer is lost before EC2 saw the request: elb looks for the node by its tags, finds
    none, and sends the same request with the same token (safe if EC2 did start it)."""
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)
    sent = {"n": 0}

    def lost_once(kwargs: dict[str, Any]) -> Exception | None:
        sent["n"] += 1
        return EndpointConnectionError(endpoint_url=aws_env) if sent["n"] == 1 else None

    client.fail("create_fleet", lost_once)
    result = cloud.launch(["node001"])
    assert result.failed == {}
    sent_tokens = tokens(client)
    assert len(sent_tokens) == 2 and sent_tokens[0] == sent_tokens[1]
    assert len(live(ec2)) == 1


def test_a_lost_fleet_answer_is_found_by_its_tags_not_sent_again(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)

    def lose_answer(kwargs: dict[str, Any], resp: Any) -> Any:
        raise EndpointConnectionError(endpoint_url=aws_env)  # moto started it; the answer never came

    client.rewrite("create_fleet", lose_answer)
    result = cloud.launch(["node001"])
    assert result.failed == {} and len(result.launched) == 1
    assert len(client.calls_of("create_fleet")) == 1 and len(live(ec2)) == 1


# --------------------------------------------------------------------------- IMDSv2 in the template


@pytest.mark.parametrize("tokens_setting", ["optional", None])
def test_ec2_check_fails_a_template_that_allows_imdsv1(
    ec2: Any, ami: str, aws_env: str, tokens_setting: str | None
) -> None:
    data: dict[str, Any] = {"ImageId": ami, "InstanceType": "t3.large"}
    if tokens_setting is not None:
        data["MetadataOptions"] = {"HttpTokens": tokens_setting}
    ec2.create_launch_template(LaunchTemplateName="elb-workers", LaunchTemplateData=data)
    cloud, _client = cloud_with(aws_env, launch_template={"name": "elb-workers"})
    (check,) = [c for c in preflight(cloud, warm_pool=True) if "IMDSv2" in c.what]
    assert not check.ok
    assert "HttpTokens" in check.detail and "required" in check.detail
    assert "create-launch-template-version" in check.detail  # the fix, spelt out


def test_ec2_check_passes_a_template_that_requires_imdsv2(ec2: Any, ami: str, aws_env: str) -> None:
    template(ec2, ami)
    cloud, _client = cloud_with(aws_env, launch_template={"name": "elb-workers"})
    (check,) = [c for c in preflight(cloud, warm_pool=True) if "IMDSv2" in c.what]
    assert check.ok, check.detail


def test_a_fleet_that_launched_nothing_does_not_send_its_token_again(ec2: Any, ami: str, aws_env: str) -> None:
    """An instant fleet with only errors is still a fleet: EC2 answers its token with the same
    errors. Once the back-off is over, the same overrides go out with another token."""
    from .conftest import FakeClock
    from .test_ec2_templates import _no_capacity_for

    template(ec2, ami)
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, **FLEET)
    answers = {"n": 0}

    def no_capacity_once(kwargs: dict[str, Any], resp: Any) -> Any:
        answers["n"] += 1
        return _no_capacity_for({"on-demand"})(kwargs, resp) if answers["n"] == 1 else resp

    client.rewrite("create_fleet", no_capacity_once)
    ec2_fleet_tokens(client)  # after the rewrite above: EC2 keeps the answer it gave
    # moto did start an instance for the first fleet (then taken back): EC2 would not have, so
    # the lookups by name do not see it.
    started: set[str] = set()

    def note(kwargs: dict[str, Any], resp: Any) -> Any:
        if answers["n"] == 1:
            started.update(i["InstanceId"] for r in all_reservations(ec2) for i in r["Instances"])
        return resp

    def unseen(kwargs: dict[str, Any], resp: Any) -> Any:
        for r in resp.get("Reservations", []):
            r["Instances"] = [i for i in r["Instances"] if i["InstanceId"] not in started]
        return resp

    client.rewrite("create_fleet", note)
    client.rewrite_pages("describe_instances", unseen)
    assert "no capacity" in cloud.launch(["node001"]).failed["node001"]
    clock.now += 601  # capacity_backoff is over: the same overrides again
    result = cloud.launch(["node001"])
    assert result.failed == {}, result.failed
    sent = tokens(client)
    assert len(sent) == 2 and sent[0] != sent[1]


def test_a_fleet_answer_with_two_instances_keeps_one_and_one_that_ended_is_not_the_node(
    ec2: Any, ami: str, aws_env: str
) -> None:
    """Not expected for a target of 1, but never two instances billing for one node, and never
    an ended instance taken for the node: the answer is made by adding ids to moto's."""
    from .conftest import make_instance, state_of

    template(ec2, ami)
    cloud, client = cloud_with(aws_env, **FLEET)
    ended = make_instance(ec2, ami, {"Name": "elsewhere"})
    ec2.terminate_instances(InstanceIds=[ended])
    spare = make_instance(ec2, ami, {"Name": "elsewhere"})

    def two_more(kwargs: dict[str, Any], resp: Any) -> Any:
        resp["Instances"][0]["InstanceIds"] = [ended, *resp["Instances"][0]["InstanceIds"], spare]
        return resp

    client.rewrite("create_fleet", two_more)
    (node,) = cloud.launch(["node001"]).launched
    assert node.instance_id not in (ended, spare) and node.state == "running"
    assert state_of(ec2, spare) in ("shutting-down", "terminated")
