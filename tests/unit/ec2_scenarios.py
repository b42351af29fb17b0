"""The AWS requests elb sends, recorded from elb's own code with a fixed config.

Each scenario runs elb's real code (``Ec2Cloud``, ``preflight``, ``Ec2Notices``,
``setup_events``, the inventory) against ``Recorder``, a stand-in for boto3 clients that writes
down each request (service, operation, parameters) and answers as AWS would for that one
scenario. The recorded requests are the golden files in tests/fixtures/ec2/golden/, which
tests/unit/test_ec2_contract.py compares with what the code sends now and validates with
botocore against the service models. After a deliberate change of a request, regenerate them:

    python -m tests.unit.ec2_scenarios --write
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import functools
import json
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from elb.clouds.ec2.cloud import Ec2Cloud
from elb.clouds.ec2.config import Ec2Config
from elb.clouds.ec2.inventory import ec2_inventory
from elb.clouds.ec2.notices import Ec2Notices, check_events, setup_events
from elb.clouds.ec2.preflight import preflight
from elb.core.config import Config, parse_config
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.interfaces import NodeBoot
from elb.provision.hostkeys import HostKeys

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "ec2" / "golden"
REGION = "eu-west-1"
ACCOUNT = "123456789012"
CLUSTER = "lab"
AMI = "ami-0123456789abcdef0"
TEMPLATE_ID = "lt-0123456789abcdef0"
SUBNETS = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/elb-{CLUSTER}-notices"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:elb-{CLUSTER}-notices"
LAUNCHED = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
# What cloud-init prints on a node's console once it made the node's host keys.
CONSOLE = (
    "[   12.000000] cloud-init[600]: Generating public/private ed25519 key pair.\n"
    "ec2: -----BEGIN SSH HOST KEY KEYS-----\n"
    "ec2: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4 root@ip-10-0-0-11\n"
    "ec2: -----END SSH HOST KEY KEYS-----\n"
)

# The site's own boot steps in the launch template's user data (kept first when elb adds a node's boot).
TEMPLATE_USER_DATA = "#!/bin/sh\necho site\n"
# A node's boot (provision.mode: boot), as elb.provision.boot makes it.
BOOT = NodeBoot(
    files={"/etc/elb/boot-inventory.yml": "all:\n  children: {}\n"},
    argv=("/usr/bin/env", "ANSIBLE_NOCOLOR=1", "/opt/elb/bin/ansible-playbook", "/opt/elb/playbooks/node_boot.yml"),
)

Request = dict[str, Any]  # {"service", "operation", "params"}


@functools.cache
def operations(service: str) -> Mapping[str, str]:
    """boto3 method name -> API operation name, from botocore's service model."""
    # boto3-stubs type client() for each literal service name only, and ``service`` is any of them.
    client = boto3.client(service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")  # type: ignore[call-overload]
    return dict(client.meta.method_to_api_mapping)


class World:
    """What AWS holds in one scenario: instances by id, and the messages in the queue."""

    def __init__(self) -> None:
        self.instances: dict[str, dict[str, Any]] = {}
        self.messages: list[dict[str, str]] = []
        self.requests: list[Request] = []

    def add(self, tags: list[dict[str, str]], itype: str, state: str = "pending") -> dict[str, Any]:
        iid = f"i-{len(self.instances) + 1:017x}"
        inst = {
            "InstanceId": iid,
            "InstanceType": itype,
            "ImageId": AMI,
            "State": {"Name": state},
            "Tags": tags,
            "LaunchTime": LAUNCHED,
            "RootDeviceType": "ebs",
            "SubnetId": SUBNETS[0],
            "BlockDeviceMappings": [
                {"DeviceName": "/dev/xvda", "Ebs": {"VolumeId": f"vol-{len(self.instances) + 1:017x}"}}
            ],
        }
        self.instances[iid] = inst
        return inst

    def worker(self, name: str, state: str = "running") -> str:
        tags = {"elb:cluster": CLUSTER, "elb:role": "worker", "elb:managed-by": "elb", "Name": name}
        inst = self.add([{"Key": k, "Value": v} for k, v in tags.items()], "c6i.large", state)
        inst["PrivateIpAddress"] = "10.0.0.10"
        return str(inst["InstanceId"])

    # ------------------------------------------------------------------ answers

    def answer(self, service: str, operation: str, params: dict[str, Any]) -> Any:
        if params.get("DryRun"):
            raise ClientError({"Error": {"Code": "DryRunOperation", "Message": "would have succeeded"}}, operation)
        return getattr(self, f"_{service}_{operation}", lambda p: {})(params)

    def _matches(self, inst: Mapping[str, Any], filters: list[dict[str, Any]]) -> bool:
        tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
        for f in filters:
            name, values = f["Name"], f["Values"]
            have = (
                tags.get(name[4:])
                if name.startswith("tag:")
                else inst["State"]["Name"]
                if name == "instance-state-name"
                else inst["InstanceId"]
            )
            if have not in values:
                return False
        return True

    def _ec2_DescribeInstances(self, p: dict[str, Any]) -> Any:
        found = (
            [i for i in self.instances.values() if i["InstanceId"] in p["InstanceIds"]] if "InstanceIds" in p else []
        )
        if "Filters" in p:
            found = [i for i in self.instances.values() if self._matches(i, p["Filters"])]
        for inst in found:  # EC2 starts what was pending by the next look
            if inst["State"]["Name"] == "pending":
                inst["State"] = {"Name": "running"}
                inst["PrivateIpAddress"] = "10.0.0.11"
        return {"Reservations": [{"Instances": [dict(i) for i in found]}]}

    def _ec2_RunInstances(self, p: dict[str, Any]) -> Any:
        tags = next(ts["Tags"] for ts in p["TagSpecifications"] if ts["ResourceType"] == "instance")
        return {"Instances": [self.add(tags, p["InstanceType"])]}

    def _ec2_CreateFleet(self, p: dict[str, Any]) -> Any:
        tags = next(ts["Tags"] for ts in p["TagSpecifications"] if ts["ResourceType"] == "instance")
        override = p["LaunchTemplateConfigs"][0]["Overrides"][0]
        inst = self.add(tags, override["InstanceType"])
        market = p["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        return {
            "FleetId": "fleet-1",
            "Instances": [{"InstanceIds": [inst["InstanceId"]], "Lifecycle": market}],
            "Errors": [],
        }

    def _ec2_DescribeInstanceTypes(self, p: dict[str, Any]) -> Any:
        return {"InstanceTypes": [{"InstanceType": t, "VCpuInfo": {"DefaultVCpus": 2}} for t in p["InstanceTypes"]]}

    def _ec2_DescribeImages(self, p: dict[str, Any]) -> Any:
        return {"Images": [{"ImageId": i, "RootDeviceName": "/dev/xvda"} for i in p["ImageIds"]]}

    def _ec2_DescribeLaunchTemplateVersions(self, p: dict[str, Any]) -> Any:
        data = {
            "InstanceType": "c6i.large",
            "MetadataOptions": {"HttpTokens": "required"},
            "UserData": base64.b64encode(TEMPLATE_USER_DATA.encode()).decode(),
        }
        return {"LaunchTemplateVersions": [{"VersionNumber": 3, "LaunchTemplateData": data}]}

    def _ec2_GetConsoleOutput(self, p: dict[str, Any]) -> Any:
        return {"InstanceId": p["InstanceId"], "Output": base64.b64encode(CONSOLE.encode()).decode()}

    def _ec2_DescribePlacementGroups(self, p: dict[str, Any]) -> Any:
        return {"PlacementGroups": []}

    def _ec2_DescribeInstanceStatus(self, p: dict[str, Any]) -> Any:
        ok = {"Status": "ok"}
        return {
            "InstanceStatuses": [{"InstanceId": i, "InstanceStatus": ok, "SystemStatus": ok} for i in p["InstanceIds"]]
        }

    def _set_state(self, ids: list[str], state: str) -> Any:
        for i in ids:
            self.instances[i]["State"] = {"Name": state}
        return {}

    def _ec2_CreateTags(self, p: dict[str, Any]) -> Any:
        """Tags on instances replace those of the same keys (a volume's are not kept here)."""
        for iid in p["Resources"]:
            if iid in self.instances:
                keys = {t["Key"] for t in p["Tags"]}
                kept = [t for t in self.instances[iid]["Tags"] if t["Key"] not in keys]
                self.instances[iid]["Tags"] = kept + [dict(t) for t in p["Tags"]]
        return {}

    def _ec2_TerminateInstances(self, p: dict[str, Any]) -> Any:
        return self._set_state(p["InstanceIds"], "terminated")

    def _ec2_StopInstances(self, p: dict[str, Any]) -> Any:
        return self._set_state(p["InstanceIds"], "stopped")

    def _ec2_StartInstances(self, p: dict[str, Any]) -> Any:
        return self._set_state(p["InstanceIds"], "running")

    def _sqs_GetQueueUrl(self, p: dict[str, Any]) -> Any:
        return {"QueueUrl": QUEUE_URL}

    _sqs_CreateQueue = _sqs_GetQueueUrl

    def _sqs_GetQueueAttributes(self, p: dict[str, Any]) -> Any:
        policy = json.dumps({"Statement": [{"Principal": {"Service": "events.amazonaws.com"}}]})
        return {"Attributes": {"QueueArn": QUEUE_ARN, "Policy": policy}}

    def _sqs_ReceiveMessage(self, p: dict[str, Any]) -> Any:
        batch, self.messages = self.messages[: p["MaxNumberOfMessages"]], self.messages[p["MaxNumberOfMessages"] :]
        return {"Messages": batch}

    def _events_PutRule(self, p: dict[str, Any]) -> Any:
        return {"RuleArn": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{p['Name']}"}

    def _events_DescribeRule(self, p: dict[str, Any]) -> Any:
        return {"Name": p["Name"], "State": "ENABLED"}

    def _events_ListTargetsByRule(self, p: dict[str, Any]) -> Any:
        return {"Targets": [{"Id": "elb-notices", "Arn": QUEUE_ARN}]}


class Recorder:
    """A stand-in for a boto3 client of ``service``: records each request, answers from ``world``."""

    def __init__(self, service: str, world: World) -> None:
        self.service = service
        self.world = world

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        operation = operations(self.service)[method]
        self.world.requests.append({"service": self.service, "operation": operation, "params": params})
        return self.world.answer(self.service, operation, params)

    def get_paginator(self, method: str) -> Any:
        recorder = self

        class Paginator:
            def paginate(self, **params: Any) -> Any:
                return [recorder._call(method, params)]

        return Paginator()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method not in operations(self.service):
            raise AttributeError(method)
        return lambda **params: self._call(method, params)


# --------------------------------------------------------------------------- scenarios


def cloud(world: World, node_groups: NodeGroups | None = None, **cfg: Any) -> Ec2Cloud:
    config = Ec2Config(region=REGION, **cfg)
    recorder: Any = Recorder("ec2", world)
    return Ec2Cloud(
        config, CLUSTER, client=recorder, clock=lambda: 1_800_000_000.0, sleep=lambda _s: None, node_groups=node_groups
    )


OWN: dict[str, Any] = {
    "ami": AMI,
    "instance_types": ["c6i.large"],
    "subnets": SUBNETS[:1],
    "security_groups": ["sg-0123456789abcdef0"],
    "key_name": "cluster",
    "iam_instance_profile": "sge-worker",
    "root_volume_size": 50,
    "root_volume_type": "gp3",
    "user_data": "#!/bin/sh\necho ready\n",
    "extra_tags": {"cost-centre": "4711"},
}
TEMPLATE: dict[str, Any] = {
    "launch_template": {"id": TEMPLATE_ID, "version": "3"},
    "extra_tags": {"cost-centre": "4711"},
}
FLEET: dict[str, Any] = {**TEMPLATE, "instance_types": ["c6i.large", "c5.large"], "subnets": SUBNETS}


def run_instances_own(world: World) -> None:
    cloud(world, **OWN).launch(["node001"])


def run_instances_own_spot(world: World) -> None:
    cloud(world, **OWN, spot=True, spot_max_price="0.20").launch(["node001"])


def run_instances_template(world: World) -> None:
    cloud(world, **TEMPLATE, instance_types=["c6i.large"], subnets=SUBNETS[:1]).launch(["node001"])


def run_instances_template_host_key(world: World) -> None:
    """A node of a launch template: its host key read from its console output once it runs."""
    with tempfile.TemporaryDirectory() as keys:
        c = cloud(world, **TEMPLATE, instance_types=["c6i.large"], subnets=SUBNETS[:1])
        c.host_keys = HostKeys(Path(keys))
        c.launch(["node001"])


def run_instances_template_spot_placement_group(world: World) -> None:
    """A node group in a placement group launches by RunInstances (each node into the group)."""
    group = NodeGroup.model_validate(
        dict(name="mpi", slots=2, instance_types=["c6i.large"], market="spot", placement_group=True, max_nodes=4)
    )
    cloud(world, NodeGroups(groups=[group]), **TEMPLATE, subnets=SUBNETS[:1]).launch(["node001"], {"node001": "mpi"})


def run_instances_template_boot(world: World) -> None:
    """A node of a launch template that configures itself at boot: RunInstances (CreateFleet's
    overrides take no user data) for each choice, even with several types and spot, the
    template's own user data first and the boot after it in the request's UserData."""
    cloud(world, **FLEET, spot=True).launch(["node001"], boot={"node001": BOOT})


def create_fleet_on_demand(world: World) -> None:
    cloud(world, **FLEET).launch(["node001"])


def create_fleet_spot(world: World) -> None:
    cloud(world, **FLEET, spot=True, spot_max_price="0.20").launch(["node001"])


def create_fleet_group(world: World) -> None:
    """A node group's node by an instant fleet: the fleet, the instance and (once it runs, with
    CreateTags) its volumes carry the group's name (elb:group)."""
    group = NodeGroup.model_validate(dict(name="gpu", slots=4, max_nodes=2, queues=["gpu.q"], hostgroup="@gpu"))
    cloud(world, NodeGroups(groups=[group]), **FLEET).launch(["node001"], {"node001": "gpu"})


def workers(world: World) -> None:
    """List, status checks, slots, stop and start (a warm pool), terminate."""
    first, second = world.worker("node001"), world.worker("node002")
    c = cloud(world, **OWN)
    listed = c.list_workers()
    c.health(listed)
    c.stop([first])
    c.start([first])
    c.terminate([first, second])


def group_tags(world: World) -> None:
    """Workers launched before elb tagged their node group get the tag, a call per group."""
    first, second, third = world.worker("node001"), world.worker("node002"), world.worker("node003")
    cloud(world, **OWN).tag_groups({first: "gpu", second: "cpu-small", third: "gpu"})


def template_versions(world: World) -> None:
    cloud(world, **FLEET).template_versions()


def ec2_check(world: World) -> None:
    world.worker("node001")
    preflight(cloud(world, **OWN), warm_pool=True)


def ec2_check_fleet(world: World) -> None:
    preflight(cloud(world, **FLEET), warm_pool=False)


def ec2_check_template_boot(world: World) -> None:
    """The check of a template's nodes that configure themselves at boot: the dry run is the
    RunInstances they launch with (their user data of their own), not a CreateFleet."""
    preflight(cloud(world, **FLEET), warm_pool=False, boot=True)


def inventory(world: World) -> None:
    world.worker("node001")
    config: Config = parse_config(
        {"cluster": {"name": CLUSTER}, "cloud": {"provider": "ec2", "ec2": {"region": REGION}}}
    )
    ec2_inventory(config, cloud(world))


def notices(world: World) -> None:
    event = {
        "source": "aws.ec2",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "time": "2026-01-01T00:00:00Z",
    }
    event["detail"] = {"instance-id": "i-00000000000000001", "instance-action": "terminate"}  # type: ignore[assignment]
    world.messages = [{"MessageId": "m-1", "ReceiptHandle": "rh-1", "Body": json.dumps(event)}]
    Ec2Notices(Recorder("sqs", world), QUEUE_URL).poll()


def ec2_events_setup(world: World) -> None:
    setup_events(Recorder("sqs", world), Recorder("events", world), CLUSTER)


def ec2_events_check(world: World) -> None:
    check_events(Recorder("sqs", world), Recorder("events", world), CLUSTER)


SCENARIOS: dict[str, Callable[[World], None]] = {
    f.__name__.replace("_", "-"): f
    for f in (
        run_instances_own,
        run_instances_own_spot,
        run_instances_template,
        run_instances_template_host_key,
        run_instances_template_spot_placement_group,
        run_instances_template_boot,
        create_fleet_on_demand,
        create_fleet_spot,
        create_fleet_group,
        workers,
        group_tags,
        template_versions,
        ec2_check,
        ec2_check_fleet,
        ec2_check_template_boot,
        inventory,
        notices,
        ec2_events_setup,
        ec2_events_check,
    )
}


def record(name: str) -> list[Request]:
    """The requests scenario ``name`` sends, in order (as JSON has them)."""
    world = World()
    SCENARIOS[name](world)
    requests: list[Request] = json.loads(json.dumps(world.requests))  # tuples as lists, as read back from a file
    return requests


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.json"


def render(requests: list[Request]) -> str:
    return json.dumps(requests, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the golden AWS requests from elb's code.")
    parser.add_argument("--write", action="store_true", help="write tests/fixtures/ec2/golden/*.json")
    args = parser.parse_args(argv)
    if not args.write:
        parser.print_help()
        return 2
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for stale in GOLDEN.glob("*.json"):
        if stale.stem not in SCENARIOS:
            stale.unlink()
    for name in SCENARIOS:
        golden_path(name).write_text(render(record(name)))
        print(golden_path(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
