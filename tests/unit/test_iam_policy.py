"""The IAM policy (elb.clouds.ec2.iam, ``elb iam-policy``): built from the contract's list of calls,
so a new call cannot ship without its permission, scoped by the config, and ``*`` only for the
Describe calls AWS does not scope."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elb.cli.main import main
from elb.clouds.ec2.contract import CALLS
from elb.clouds.ec2.iam import Scope, policy, render_json, statements
from elb.core.config import parse_config
from elb.core.exitcodes import Exit

REPO = Path(__file__).resolve().parents[2]


def actions(doc: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for st in doc["Statement"]:
        acts = st["Action"]
        out.update([acts] if isinstance(acts, str) else acts)
    return out


def acts(st: dict[str, Any]) -> set[str]:
    return {st["Action"]} if isinstance(st["Action"], str) else set(st["Action"])


def resources(st: dict[str, Any]) -> list[str]:
    res = st["Resource"]
    return [res] if isinstance(res, str) else list(res)


@pytest.mark.parametrize("caller", ["daemon", "setup"])
def test_every_call_of_the_contract_has_its_permission(caller: str) -> None:
    needed = {c.action for c in CALLS if caller in c.callers}
    given = actions(policy(Scope.generic(), caller))  # type: ignore[arg-type]
    assert needed <= given, f"no permission for {sorted(needed - given)}"


def test_the_policy_gives_nothing_beyond_the_calls_and_their_implied_rights() -> None:
    """Besides the calls, only iam:PassRole (a launch with an instance profile passes its role)."""
    every = {c.action for c in CALLS}
    assert actions(policy(Scope.generic())) - every == {"iam:PassRole"}
    assert actions(policy(Scope.generic(), "setup")) <= every


@pytest.mark.parametrize("caller", ["daemon", "setup"])
def test_only_the_describe_calls_aws_does_not_scope_are_on_star(caller: str) -> None:
    unscoped = {c.action for c in CALLS if c.unscoped}
    assert unscoped and all(a.startswith("ec2:Describe") for a in unscoped)
    for st in policy(Scope.generic(), caller)["Statement"]:  # type: ignore[arg-type]
        if "*" in resources(st):
            assert acts(st) <= unscoped and resources(st) == ["*"], st["Sid"]
        else:
            assert not acts(st) & unscoped, st["Sid"]
        assert all(r == "*" or r.startswith("arn:aws:") for r in resources(st))


def test_launching_is_scoped_by_tags_and_resources_never_star() -> None:
    doc = policy(Scope.generic())
    launching = [st for st in doc["Statement"] if {"ec2:RunInstances", "ec2:CreateFleet"} & acts(st)]
    assert launching
    for st in launching:
        assert "*" not in resources(st)
    tagged = [st for st in launching if "Condition" in st]
    on = {r.split(":")[-1] for st in tagged for r in resources(st)}
    assert on == {"instance/*", "fleet/*"}
    for st in tagged:
        cond = st["Condition"]["StringEquals"]
        assert cond == {
            "aws:RequestTag/elb:cluster": "CLUSTER",
            "aws:RequestTag/elb:role": "worker",
            "aws:RequestTag/elb:managed-by": "elb",
        }


def test_terminate_stop_start_only_on_the_clusters_workers() -> None:
    for st in policy(Scope.generic())["Statement"]:
        if acts(st) & {"ec2:TerminateInstances", "ec2:StopInstances", "ec2:StartInstances"}:
            assert st["Condition"]["StringEquals"]["aws:ResourceTag/elb:cluster"] == "CLUSTER"
            assert st["Condition"]["StringEquals"]["aws:ResourceTag/elb:managed-by"] == "elb"


def test_the_shipped_policy_is_the_generators() -> None:
    shipped = (REPO / "docs" / "iam-policy.json").read_text()
    assert shipped == render_json(Scope.generic()), "regenerate: elb iam-policy --generic --json > docs/iam-policy.json"


CONFIG: dict[str, Any] = {
    "cluster": {"name": "genomics"},
    "cloud": {
        "provider": "ec2",
        "ec2": {
            "region": "eu-west-1",
            "ami": "ami-0123456789abcdef0",
            "subnets": ["subnet-aaa", "subnet-bbb"],
            "security_groups": ["sg-0123456789abcdef0"],
            "key_name": "cluster",
            "instance_types": ["c6i.large"],
        },
    },
}


def test_a_config_scopes_the_launch_to_its_image_subnets_groups_and_key() -> None:
    scope = Scope.from_config(parse_config(CONFIG), account="123456789012", worker_role="sge-worker")
    text = render_json(scope)
    for arn in (
        "arn:aws:ec2:eu-west-1::image/ami-0123456789abcdef0",
        "arn:aws:ec2:eu-west-1:123456789012:subnet/subnet-aaa",
        "arn:aws:ec2:eu-west-1:123456789012:subnet/subnet-bbb",
        "arn:aws:ec2:eu-west-1:123456789012:security-group/sg-0123456789abcdef0",
        "arn:aws:ec2:eu-west-1:123456789012:key-pair/cluster",
        "arn:aws:iam::123456789012:role/sge-worker",
    ):
        assert f'"{arn}"' in text
    for wide in ("image/*", "subnet/*", "security-group/*", "key-pair/*"):
        assert wide not in text
    assert "REGION" not in text and "ACCOUNT_ID" not in text and "WORKER_ROLE" not in text
    assert '"aws:RequestTag/elb:cluster": "genomics"' in text
    # neither notices nor placement groups configured: no statement for them
    assert not {"sqs:ReceiveMessage", "ec2:CreatePlacementGroup"} & actions(policy(scope))


def test_a_template_by_id_is_scoped_to_it_and_one_by_name_cannot_be() -> None:
    by_id = {**CONFIG, "cloud": {"provider": "ec2", "ec2": {"launch_template": {"id": "lt-0123456789abcdef0"}}}}
    text = render_json(Scope.from_config(parse_config(by_id)))
    assert "launch-template/lt-0123456789abcdef0" in text and "launch-template/*" not in text
    by_name = {**CONFIG, "cloud": {"provider": "ec2", "ec2": {"launch_template": {"name": "workers"}}}}
    assert "launch-template/*" in render_json(Scope.from_config(parse_config(by_name)))


def test_notices_and_placement_groups_add_their_statements() -> None:
    cfg = {**CONFIG, "cloud": {"provider": "ec2", "ec2": {**CONFIG["cloud"]["ec2"], "notices": True}}}
    doc = policy(Scope.from_config(parse_config(cfg)))
    (queue,) = [st for st in doc["Statement"] if st["Sid"] == "ReadTheNoticeQueue"]
    assert queue["Resource"] == "arn:aws:sqs:eu-west-1:ACCOUNT_ID:elb-genomics-notices"
    assert "ec2:CreatePlacementGroup" in actions(policy(Scope.generic()))


def test_the_setup_policy_names_the_queue_and_the_rules() -> None:
    sts = statements(Scope(cluster="lab", region="eu-west-1", account="123456789012"), "setup")
    arns = [r for st in sts for r in st.resources]
    assert "arn:aws:sqs:eu-west-1:123456789012:elb-lab-notices" in arns
    assert "arn:aws:events:eu-west-1:123456789012:rule/elb-lab-spot-interruption" in arns
    assert len(arns) == 5


# --------------------------------------------------------------------------- the command


def test_the_command_prints_the_policy_of_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(json.dumps(CONFIG))  # JSON is YAML
    assert main(["iam-policy", "-c", str(cfg), "--json", "--account", "123456789012"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc == policy(Scope.from_config(parse_config(CONFIG), account="123456789012"))
    assert main(["iam-policy", "-c", str(cfg)]) == Exit.OK
    out = capsys.readouterr().out
    assert "DescribeCallsAwsDoesNotScope" in out and "why:" in out and "placeholders to replace" in out


def test_the_command_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["iam-policy", "-c", str(tmp_path / "none.yml")]) == Exit.CONFIG
    assert main(["iam-policy", "--generic", "--account", "12ab"]) == Exit.USAGE
    assert main(["iam-policy", "--generic", "--worker-role", "a b"]) == Exit.USAGE
    local = tmp_path / "local.yml"
    local.write_text("cloud: {provider: local}\n")
    assert main(["iam-policy", "-c", str(local)]) == Exit.CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("elb: ") for line in err)


def test_the_generic_policy_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["iam-policy", "--generic", "--json"]) == Exit.OK
    assert capsys.readouterr().out == (REPO / "docs" / "iam-policy.json").read_text()
