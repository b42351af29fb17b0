"""``elb iam-policy -c FILE`` prints the least the config needs: each feature's permissions
(a warm pool's stops and starts, a launch template's reads, spot requests, instant fleets,
placement groups, the notice queue) only when the config has the feature. What a feature needs
is what its launch path sends: the requests recorded from elb's own code
(tests/unit/ec2_scenarios.py, the golden files), each checked against the policy of the config
that makes it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from elb.clouds.ec2.iam import Scope, policy
from elb.clouds.ec2.preflight import preflight
from elb.core.config import parse_config

from . import ec2_scenarios as S
from .ec2_scenarios import golden_path

PLACEMENT = {"name": "mpi", "slots": 2, "instance_types": ["c6i.large"], "market": "spot"}


def config(ec2: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"cluster": {"name": S.CLUSTER}, "cloud": {"provider": "ec2", "ec2": {"region": S.REGION, **ec2}}, **top}


TEMPLATE_ONE = {**S.TEMPLATE, "instance_types": ["c6i.large"], "subnets": S.SUBNETS[:1]}
# feature -> (the config that has it, the scenarios whose requests that config makes)
FEATURES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "none": (config(S.OWN), ("run-instances-own", "inventory", "group-tags")),
    "warm pool": (config(S.OWN, policy={"warm_pool": {"max_nodes": 2}}), ("workers", "ec2-check")),
    "launch template": (config(TEMPLATE_ONE), ("run-instances-template", "run-instances-template-host-key")),
    "spot": (config({**S.OWN, "spot": True, "spot_max_price": "0.20"}), ("run-instances-own-spot",)),
    "fleet": (config(S.FLEET), ("create-fleet-on-demand", "ec2-check-fleet", "template-versions")),
    "spot fleet": (config({**S.FLEET, "spot": True, "spot_max_price": "0.20"}), ("create-fleet-spot",)),
    "placement group": (
        config(
            {**S.TEMPLATE, "subnets": S.SUBNETS[:1]},
            node_groups=[{**PLACEMENT, "max_nodes": 4, "placement_group": True}],
        ),
        ("run-instances-template-spot-placement-group",),
    ),
    "notices": (config({**S.OWN, "notices": True}), ("notices",)),
}
# What only a feature's calls need: actions and resources.
ONLY: dict[str, tuple[set[str], tuple[str, ...]]] = {
    "warm pool": ({"ec2:StopInstances", "ec2:StartInstances"}, ()),
    "launch template": ({"ec2:DescribeLaunchTemplateVersions", "ec2:GetConsoleOutput"}, ("launch-template/",)),
    "spot": (set(), ("spot-instances-request/",)),
    "fleet": ({"ec2:CreateFleet"}, ("fleet/",)),
    "placement group": ({"ec2:CreatePlacementGroup", "ec2:DescribePlacementGroups"}, ("placement-group/",)),
    "notices": ({"sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"}, ()),
}
# The features each config has (a fleet here is of a launch template; a placement group's is spot).
HAS = {
    "none": set(),
    "warm pool": {"warm pool"},
    "launch template": {"launch template"},
    "spot": {"spot"},
    "fleet": {"fleet", "launch template"},
    "spot fleet": {"fleet", "launch template", "spot"},
    "placement group": {"placement group", "launch template", "spot"},
    "notices": {"notices"},
}


def granted(doc: dict[str, Any]) -> tuple[set[str], list[str]]:
    actions: set[str] = set()
    resources: list[str] = []
    for st in doc["Statement"]:
        a, r = st["Action"], st["Resource"]
        actions.update([a] if isinstance(a, str) else a)
        resources += [r] if isinstance(r, str) else r
    return actions, resources


def recorded(name: str) -> set[str]:
    return {f"{r['service']}:{r['operation']}" for r in json.loads(golden_path(name).read_text())}


@pytest.mark.parametrize("feature", FEATURES)
def test_the_policy_grants_what_the_features_calls_need(feature: str) -> None:
    data, scenarios = FEATURES[feature]
    actions, _ = granted(policy(Scope.from_config(parse_config(data))))
    for name in scenarios:
        assert recorded(name) <= actions, f"{name}: no permission for {sorted(recorded(name) - actions)}"


@pytest.mark.parametrize("feature", FEATURES)
def test_the_policy_grants_nothing_of_the_features_the_config_lacks(feature: str) -> None:
    data, _ = FEATURES[feature]
    actions, resources = granted(policy(Scope.from_config(parse_config(data))))
    for other, (only_actions, only_resources) in ONLY.items():
        if other in HAS[feature]:
            continue
        assert not actions & only_actions, f"{feature}: {other}'s {sorted(actions & only_actions)}"
        wide = [r for r in resources for part in only_resources if f":{part}" in r]
        assert not wide, f"{feature}: {other}'s {wide}"


def test_the_generic_policy_has_every_feature() -> None:
    actions, resources = granted(policy(Scope.generic()))
    for only_actions, only_resources in ONLY.values():
        assert only_actions <= actions
        assert all(any(f":{part}" in r for r in resources) for part in only_resources)


def test_only_elbs_own_volumes_may_be_tagged_after_launch() -> None:
    """A fleet node's volumes are tagged once it runs: only volumes that already carry this
    cluster's tag (the launch template tags them at creation), never any untagged volume."""
    doc = policy(Scope.generic())
    assert "IfExists" not in json.dumps(doc)
    (st,) = [s for s in doc["Statement"] if s["Sid"] == "TagTheVolumesOfFleetWorkers"]
    assert st["Condition"]["StringEquals"]["aws:ResourceTag/elb:cluster"] == "CLUSTER"
    assert st["Condition"]["StringEquals"]["aws:RequestTag/elb:cluster"] == "CLUSTER"


@pytest.mark.parametrize("warm_pool", [True, False])
def test_ec2_check_tries_stop_and_start_only_with_a_warm_pool(warm_pool: bool) -> None:
    world = S.World()
    world.worker("node001")
    checks = preflight(S.cloud(world, **S.OWN), warm_pool=warm_pool)
    sent = {r["operation"] for r in world.requests}
    assert ({"StopInstances", "StartInstances"} <= sent) is warm_pool
    assert not ({"StopInstances", "StartInstances"} & sent) or warm_pool
    assert any("TerminateInstances" in c.what for c in checks)


def test_a_fleet_nodes_volumes_refused_by_the_policy_say_what_the_template_must_tag(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy lets elb tag only volumes already tagged as the cluster's: when EC2 refuses,
    the warning says what the launch template must give its volumes."""
    answer = S.World.answer

    def refuse_tags(world: S.World, service: str, operation: str, params: dict[str, Any]) -> Any:
        if operation == "CreateTags":
            raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "not authorized"}}, operation)
        return answer(world, service, operation, params)

    monkeypatch.setattr(S.World, "answer", refuse_tags)
    with caplog.at_level("WARNING"):
        S.create_fleet_on_demand(S.World())
    (line,) = [r.getMessage() for r in caplog.records if "left untagged" in r.getMessage()]
    assert f"tagged elb:cluster={S.CLUSTER} at creation" in line and "launch template" in line


def test_a_worker_may_be_given_its_group_tag_alone_and_only_on_the_clusters_workers() -> None:
    """A worker launched before elb tagged its node group gets ``elb:group`` afterwards
    (``Ec2Cloud.tag_groups``): the policy lets elb add that one tag key, on instances tagged as
    this cluster's elb workers, whatever the config's features."""
    for data, _ in FEATURES.values():
        doc = policy(Scope.from_config(parse_config(data)))
        (st,) = [s for s in doc["Statement"] if s["Sid"] == "TagTheGroupOfThisClustersWorkers"]
        assert st["Action"] == "ec2:CreateTags" and st["Resource"] == f"arn:aws:ec2:{S.REGION}:ACCOUNT_ID:instance/*"
        assert st["Condition"]["StringEquals"] == {
            f"aws:ResourceTag/elb:{k}": v
            for k, v in (("cluster", S.CLUSTER), ("role", "worker"), ("managed-by", "elb"))
        }
        assert st["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": ["elb:group"]}
    assert "group-tags" in FEATURES["none"][1]
