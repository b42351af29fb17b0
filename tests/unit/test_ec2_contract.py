"""The contract between elb and AWS: the requests elb sends are the golden ones, pass botocore's
validation against the service models, keep every documented rule in elb.clouds.ec2.contract, and
call nothing the contract (and so the IAM policy) does not list.

Regenerate the golden files after a deliberate change: ``python -m tests.unit.ec2_scenarios --write``.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ParamValidationError
from botocore.validate import validate_parameters

from elb.clouds.ec2 import contract
from elb.clouds.ec2.contract import CALLS, CONSTRAINTS, Constraint, problems

from . import ec2_scenarios
from .ec2_scenarios import SCENARIOS, World, golden_path, record

REPO = Path(__file__).resolve().parents[2]
# Services whose operations the code scan recognises: elb's three and those a new feature would
# most likely reach for, so that a call to one of them is caught too.
SCANNED_SERVICES = ("ec2", "sqs", "events", "iam", "sts", "s3", "autoscaling", "ssm", "cloudwatch", "logs")
# Expressions the scan would take for an AWS call but are not one (EventBridge has CreateConnection).
NOT_AWS = frozenset({"socket.create_connection"})


def golden(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(golden_path(name).read_text())
    return data


def all_golden() -> Iterator[tuple[str, dict[str, Any]]]:
    for name in SCENARIOS:
        for req in golden(name):
            yield name, req


@functools.cache
def service_model(service: str) -> Any:
    # boto3-stubs type client() for each literal service name only, and ``service`` is any of them.
    return boto3.client(service, region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x").meta  # type: ignore[call-overload]


# --------------------------------------------------------------------------- golden requests


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_code_sends_the_golden_requests(name: str) -> None:
    assert record(name) == golden(name), f"regenerate with: python -m tests.unit.ec2_scenarios --write ({name})"


def test_every_scenario_has_its_golden_file_and_no_other_file_is_there() -> None:
    assert {p.stem for p in ec2_scenarios.GOLDEN.glob("*.json")} == set(SCENARIOS)


def test_the_launch_paths_are_all_recorded() -> None:
    """RunInstances with and without a template, on-demand and spot; CreateFleet on-demand and spot."""
    runs = [r["params"] for _n, r in all_golden() if r["operation"] == "RunInstances" and not r["params"].get("DryRun")]
    fleets = [
        r["params"] for _n, r in all_golden() if r["operation"] == "CreateFleet" and not r["params"].get("DryRun")
    ]
    kinds = {("LaunchTemplate" in p, "InstanceMarketOptions" in p) for p in runs}
    assert kinds == {(False, False), (False, True), (True, False), (True, True)}
    assert {p["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for p in fleets} == {"on-demand", "spot"}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_golden_request_passes_botocore_validation(name: str) -> None:
    for req in golden(name):
        meta = service_model(req["service"])
        shape = meta.service_model.operation_model(req["operation"]).input_shape
        validate_parameters(req["params"], shape)  # raises ParamValidationError


def test_botocore_validation_refuses_a_broken_request() -> None:
    (req,) = [r for r in golden("create-fleet-spot") if r["operation"] == "CreateFleet"]
    params = copy.deepcopy(req["params"])
    params["TargetCapacitySpecification"]["TotalTargetCapacity"] = "one"
    shape = service_model("ec2").service_model.operation_model("CreateFleet").input_shape
    with pytest.raises(ParamValidationError):
        validate_parameters(params, shape)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_golden_request_keeps_the_documented_rules(name: str) -> None:
    for req in golden(name):
        assert problems(req["service"], req["operation"], req["params"]) == [], req["operation"]


def test_every_request_is_a_call_of_the_contract_and_every_call_is_recorded() -> None:
    sent = {(r["service"], r["operation"]) for _n, r in all_golden()}
    listed = {(c.service, c.operation) for c in CALLS}
    assert sent <= listed, f"calls missing from elb.clouds.ec2.contract.CALLS: {sorted(sent - listed)}"
    assert listed <= sent, f"calls of the contract no scenario records: {sorted(listed - sent)}"


# --------------------------------------------------------------------------- the code's calls


def referenced(source: str) -> dict[str, set[tuple[str, str]]]:
    """Each botocore method name ``source`` uses (an attribute, or a paginator's name), with the
    (service, operation) pairs it can be among ``SCANNED_SERVICES``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and ast.unparse(node) not in NOT_AWS:
            names.add(node.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get_paginator"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(str(node.args[0].value))
    out: dict[str, set[tuple[str, str]]] = {}
    for name in names:
        for svc in SCANNED_SERVICES:
            op = ec2_scenarios.operations(svc).get(name)
            if op is not None:
                out.setdefault(name, set()).add((svc, op))
    return out


def uncontracted(source: str) -> list[str]:
    listed = {(c.service, c.operation) for c in CALLS}
    return sorted(name for name, ops in referenced(source).items() if not ops & listed)


def test_the_code_calls_no_aws_api_outside_the_contract() -> None:
    files = [*(REPO / "elb").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]
    found = {f.relative_to(REPO).as_posix(): uncontracted(f.read_text()) for f in files}
    assert {f: names for f, names in found.items() if names} == {}


def test_the_scan_sees_a_new_call_a_paginator_and_a_bound_method() -> None:
    source = (
        "client.describe_vpcs(Filters=[])\n"
        "client.get_paginator('describe_subnets')\n"
        "functools.partial(cloud.client.stop_instances, InstanceIds=[])\n"
        "socket.create_connection(('h', 22))\n"
    )
    assert uncontracted(source) == ["describe_subnets", "describe_vpcs"]
    assert ("ec2", "StopInstances") in referenced(source)["stop_instances"]


# --------------------------------------------------------------------------- the constraints


@pytest.mark.parametrize("row", CONSTRAINTS, ids=[c.id for c in CONSTRAINTS])
def test_each_documented_rule_holds_and_its_check_can_fail(row: Constraint) -> None:
    mine = [r for _n, r in all_golden() if f"{r['service']}:{r['operation']}" in row.operations]
    assert mine, f"{row.id}: no golden request of {row.operations}"
    assert all(row.check(r["params"]) == [] for r in mine)
    broken = None
    for r in mine:
        try:
            broken = row.broken(copy.deepcopy(r["params"]))
            break
        except (KeyError, IndexError, TypeError):
            continue
    assert broken is not None, f"{row.id}: the broken example fits no golden request"
    assert row.check(broken), f"{row.id}: the check does not see the broken request"


def test_each_rule_names_its_source_and_is_in_the_docs_table() -> None:
    docs = (REPO / "docs" / "ec2.md").read_text()
    for row in CONSTRAINTS:
        assert "API Reference" in row.source or "Guide" in row.source
    assert contract.constraints_table() in docs, "docs/ec2.md: paste contract.constraints_table()"
    assert contract.calls_table() in docs, "docs/ec2.md: paste contract.calls_table()"
    assert len({c.id for c in CONSTRAINTS}) == len(CONSTRAINTS)
    every_operation = {f"{c.service}:{c.operation}" for c in CALLS}
    assert all(set(row.operations) <= every_operation for row in CONSTRAINTS)


@pytest.mark.parametrize("cluster", ["c" * 63, "lab.example.org", "a"])
def test_the_notice_names_keep_the_rules_for_any_cluster_name(cluster: str) -> None:
    """Cluster names go up to 63 characters and may hold dots; SQS and EventBridge take less."""
    from elb.clouds.ec2.notices import setup_events
    from elb.core.config import ClusterConfig

    ClusterConfig(name=cluster)  # a cluster name elb accepts
    world = World()
    setup_events(ec2_scenarios.Recorder("sqs", world), ec2_scenarios.Recorder("events", world), cluster)
    found = [p for r in world.requests for p in problems(r["service"], r["operation"], r["params"])]
    assert found == []
    names = [r["params"]["Name"] for r in world.requests if r["operation"] == "PutRule"]
    assert len(set(names)) == 4


def test_the_contract_names_each_call_once() -> None:
    keys = [(c.service, c.operation) for c in CALLS]
    assert len(keys) == len(set(keys))
    assert contract.call("ec2", "CreateFleet") is not None and contract.call("ec2", "DescribeVpcs") is None


def test_the_name_limits_are_the_service_models() -> None:
    """botocore's validation checks minimums only: the maximums elb keeps are the model's."""
    events = service_model("events").service_model
    for shape in (events.operation_model("PutRule").input_shape.members["Name"], events.shape_for("TargetId")):
        assert (shape.metadata["min"], shape.metadata["max"]) == (1, 64)
        assert shape.metadata["pattern"] == r"[\.\-_A-Za-z0-9]+"
    (row,) = [c for c in CONSTRAINTS if c.id == "eventbridge-names"]
    assert row.check({"Name": "n" * 64}) == [] and row.check({"Name": "n" * 65})


def test_terminating_more_than_a_call_takes_keeps_the_batch_limit() -> None:
    """TerminateInstances takes up to 1000 ids: a larger scale-down is split."""
    world = World()
    ids = [world.worker(f"node{n:04d}") for n in range(1001)]
    ec2_scenarios.cloud(world, **ec2_scenarios.OWN).terminate(ids)
    sent = [r for r in world.requests if r["operation"] == "TerminateInstances"]
    assert sorted(i for r in sent for i in r["params"]["InstanceIds"]) == sorted(ids)
    assert [problems("ec2", "TerminateInstances", r["params"]) for r in sent] == [[]] * len(sent)


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({f"k{n}": "v" for n in range(46)}, "at most 45"),
        ({"k" * 129: "v"}, "128"),
        ({"team": "v" * 257}, "256"),
    ],
)
def test_extra_tags_ec2_would_refuse_are_refused_at_once(extra: dict[str, str], why: str) -> None:
    """EC2 takes 50 tags per resource (elb sets 5), keys up to 128, values up to 256 characters:
    more would refuse every launch."""
    from elb.core.interfaces import CloudError

    with pytest.raises(CloudError, match=why):
        ec2_scenarios.cloud(World(), ami=ec2_scenarios.AMI, extra_tags=extra)
    ec2_scenarios.cloud(World(), ami=ec2_scenarios.AMI, extra_tags={f"k{n}": "v" for n in range(45)})
