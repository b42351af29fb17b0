"""The warm pool's EC2 calls (``Ec2Cloud.stop`` and ``start``) against moto's EC2 server.

moto runs StopInstances, StartInstances and DescribeInstances for real. The stand-ins, through
``FaultyClient`` (conftest.py), are what moto cannot produce: an instance stuck in ``stopping``,
an instance-store root (moto's AMIs are all EBS-backed: the listing is rewritten), and EC2's
capacity error on a start. moto also stops a spot instance, which EC2 refuses: elb must not ask.
"""

from __future__ import annotations

from typing import Any

import pytest

from elb.core.interfaces import CloudError

from .conftest import FakeClock, client_error, state_of
from .test_ec2_cloud import cloud_with, crowd  # noqa: F401 (crowd: a fixture used below)

pytestmark = pytest.mark.moto


def test_stop_keeps_the_instance_and_start_runs_it_again(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    [inst] = cloud.launch(["node001"]).launched

    cloud.stop([inst.instance_id])
    assert state_of(ec2, inst.instance_id) == "stopped"
    assert [(w.name, w.state) for w in cloud.list_workers()] == [("node001", "stopped")]
    cloud.stop([inst.instance_id])  # stopped already: nothing more is sent
    assert len(client.calls_of("stop_instances")) == 1

    result = cloud.start([inst.instance_id])
    assert result.failed == {}
    [again] = result.launched
    assert (again.instance_id, again.name, again.state) == (inst.instance_id, "node001", "running")
    assert again.private_ip
    assert state_of(ec2, inst.instance_id) == "running"


@pytest.mark.parametrize("verb", ["stop", "start"])
@pytest.mark.parametrize("other", ["master", "master_as_worker", "foreign", "admin_worker", "untagged"])
def test_stop_and_start_refuse_anything_but_the_clusters_workers(
    ec2: Any,
    crowd: dict[str, str],  # noqa: F811 (the fixture)
    aws_env: str,
    verb: str,
    other: str,
) -> None:
    cloud, client = cloud_with(aws_env)
    with pytest.raises(CloudError, match="refusing"):
        getattr(cloud, verb)([crowd["mine"], crowd[other]])
    assert client.calls_of(f"{verb}_instances") == []
    assert state_of(ec2, crowd["mine"]) == "running"
    assert state_of(ec2, crowd[other]) == "running"


def test_stop_refuses_malformed_ids_and_terminated_workers(
    ec2: Any,
    crowd: dict[str, str],  # noqa: F811 (the fixture)
    aws_env: str,
) -> None:
    cloud, client = cloud_with(aws_env)
    with pytest.raises(CloudError, match="refusing"):
        cloud.stop(["'; rm -rf /"])
    with pytest.raises(CloudError, match="terminated"):
        cloud.start([crowd["terminated"]])
    assert client.calls_of("stop_instances") == client.calls_of("start_instances") == []


def test_stop_refuses_an_instance_store_root(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    [inst] = cloud.launch(["node001"]).launched

    real = cloud.instances.describe

    def instance_store(filters: Any, doing: str) -> list[Any]:
        return [{**raw, "RootDeviceType": "instance-store"} for raw in real(filters, doing)]

    cloud.instances.describe = instance_store  # type: ignore[method-assign]
    with pytest.raises(CloudError, match="instance-store"):
        cloud.stop([inst.instance_id])
    assert client.calls_of("stop_instances") == []
    assert state_of(ec2, inst.instance_id) == "running"


def test_stop_refuses_a_spot_worker(ec2: Any, ami: str, aws_env: str) -> None:
    """EC2 refuses to stop a spot instance of a one-time request (UnsupportedOperation), which
    is every spot worker elb launches; moto stops it."""
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], spot=True)
    [inst] = cloud.launch(["node001"]).launched
    with pytest.raises(CloudError, match="spot"):
        cloud.stop([inst.instance_id])
    assert client.calls_of("stop_instances") == []
    assert state_of(ec2, inst.instance_id) == "running"


def test_stop_waits_at_most_the_boot_timeout(ec2: Any, ami: str, aws_env: str) -> None:
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, ami=ami, instance_types=["t3.large"], boot_timeout=60)
    [inst] = cloud.launch(["node001"]).launched
    client.rewrite("describe_instances", _looks("stopping"))

    with pytest.raises(CloudError, match="not stopped within 60s") as err:
        cloud.stop([inst.instance_id])
    assert err.value.retryable
    assert sum(clock.sleeps) <= 60.0 + 1e-9


def test_start_without_capacity_is_retryable(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    [inst] = cloud.launch(["node001"]).launched
    cloud.stop([inst.instance_id])
    client.fail(
        "start_instances",
        lambda kw: client_error("InsufficientInstanceCapacity", "no t3.large now", "StartInstances"),
    )
    with pytest.raises(CloudError, match="InsufficientInstanceCapacity") as err:
        cloud.start([inst.instance_id])
    assert err.value.retryable
    assert state_of(ec2, inst.instance_id) == "stopped"


def test_start_that_does_not_run_in_time_is_reported_by_name(ec2: Any, ami: str, aws_env: str) -> None:
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, ami=ami, instance_types=["t3.large"], boot_timeout=60)
    [inst] = cloud.launch(["node001"]).launched
    cloud.stop([inst.instance_id])
    client.rewrite("describe_instances", _looks("pending"))

    result = cloud.start([inst.instance_id])
    assert result.launched == ()
    assert "not running within 60s" in result.failed["node001"]
    assert state_of(ec2, inst.instance_id) != "terminated"  # left as it is: elb decides


def _looks(state: str) -> Any:
    """A describe answer (the waiting polls; the paginated listing is left alone) rewritten so
    that every instance shows ``state``, without an address."""

    def rewrite(kwargs: dict[str, Any], resp: Any) -> Any:
        if kwargs.get("InstanceIds"):
            for res in resp["Reservations"]:
                for i in res["Instances"]:
                    i["State"] = {"Code": 0, "Name": state}
                    i.pop("PrivateIpAddress", None)
        return resp

    return rewrite


def test_template_versions_resolve_latest_and_default_to_numbers(ec2: Any, ami: str, aws_env: str) -> None:
    ec2.create_launch_template(
        LaunchTemplateName="elb-workers", LaunchTemplateData={"ImageId": ami, "InstanceType": "t3.large"}
    )
    ec2.create_launch_template_version(
        LaunchTemplateName="elb-workers", LaunchTemplateData={"ImageId": ami, "InstanceType": "t3.xlarge"}
    )
    latest, _ = cloud_with(aws_env, launch_template={"name": "elb-workers", "version": "$Latest"})
    assert latest.template_versions() == {"default": "2"}
    default, _ = cloud_with(aws_env, launch_template={"name": "elb-workers"})
    assert default.template_versions() == {"default": "1"}
    plain, _ = cloud_with(aws_env, ami=ami)
    assert plain.template_versions() == {}
