"""The notice queue and its EventBridge rules against moto's SQS and EventBridge.

moto runs CreateQueue, queue attributes and policy, PutRule, PutTargets, DescribeRule,
ListTargetsByRule, ReceiveMessage and DeleteMessage for real. EventBridge delivering an AWS event
to the queue cannot be produced (moto does not emit aws.ec2 or aws.health events), so the tests put
the events' JSON on the queue themselves, as EventBridge would (tests/fixtures/ec2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from elb.clouds.ec2.cli import main as ec2_cli_main
from elb.clouds.ec2.notices import RULES, Ec2Notices, check_events, queue_name, queue_url, setup_events
from elb.core.interfaces import CloudError, NoticeKind

from .conftest import REGION

pytestmark = pytest.mark.moto

EVENTS = Path(__file__).resolve().parents[1] / "fixtures" / "ec2"


@pytest.fixture
def clients(aws_env: str) -> tuple[Any, Any]:
    return (
        boto3.client("sqs", region_name=REGION, endpoint_url=aws_env),
        boto3.client("events", region_name=REGION, endpoint_url=aws_env),
    )


def test_setup_makes_the_queue_rules_and_policy_and_check_finds_them(clients: tuple[Any, Any]) -> None:
    sqs, events = clients
    before = check_events(sqs, events, "elb")
    assert not before[0].ok and "elb ec2-events setup" in before[0].detail
    done = setup_events(sqs, events, "elb")
    assert len(done) == 2 + len(RULES)
    assert setup_events(sqs, events, "elb") == done  # again: the same, nothing doubled
    checks = check_events(sqs, events, "elb")
    assert all(c.ok for c in checks), checks
    assert len(checks) == 2 + len(RULES)
    url = queue_url(sqs, "elb")
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    (st,) = policy["Statement"]
    assert (
        st["Principal"] == {"Service": "events.amazonaws.com"}
        and len(st["Condition"]["ArnEquals"]["aws:SourceArn"]) == 4
    )
    rule = events.describe_rule(Name="elb-elb-spot-interruption")
    assert json.loads(rule["EventPattern"])["detail-type"] == ["EC2 Spot Instance Interruption Warning"]


def test_a_disabled_rule_fails_the_check(clients: tuple[Any, Any]) -> None:
    sqs, events = clients
    setup_events(sqs, events, "elb")
    events.disable_rule(Name="elb-elb-rebalance")
    failed = [c for c in check_events(sqs, events, "elb") if not c.ok]
    assert [c.what for c in failed] == ["rule elb-elb-rebalance"]


def test_poll_reads_and_deletes_every_message_and_drops_malformed_ones(clients: tuple[Any, Any]) -> None:
    sqs, events = clients
    setup_events(sqs, events, "elb")
    url = queue_url(sqs, "elb")
    for name in ("spot-interruption", "rebalance", "health-retirement"):
        sqs.send_message(QueueUrl=url, MessageBody=(EVENTS / f"{name}.json").read_text())
    sqs.send_message(QueueUrl=url, MessageBody="garbage")
    notices = Ec2Notices(sqs, url).poll()
    assert sorted(n.kind for n in notices) == sorted(
        [NoticeKind.INTERRUPTION, NoticeKind.REBALANCE, NoticeKind.SCHEDULED]
    )
    assert Ec2Notices(sqs, url).poll() == []  # all deleted, the malformed one too


def test_poll_is_bounded(clients: tuple[Any, Any]) -> None:
    sqs, events = clients
    setup_events(sqs, events, "elb")
    url = queue_url(sqs, "elb")
    for _ in range(25):
        sqs.send_message(QueueUrl=url, MessageBody=(EVENTS / "rebalance.json").read_text())
    assert len(Ec2Notices(sqs, url, max_messages=12).poll()) <= 12


def test_a_missing_queue_names_the_fix(clients: tuple[Any, Any]) -> None:
    sqs, _ = clients
    with pytest.raises(CloudError, match="elb ec2-events setup"):
        queue_url(sqs, "elb")
    assert queue_name("elb") == "elb-elb-notices"


def test_the_command(aws_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(f"cloud: {{provider: ec2, ec2: {{region: {REGION}, endpoint_url: '{aws_env}'}}}}\n")
    from elb.cli.main import main

    assert main(["ec2-events", "check", "-c", str(cfg)]) == 1
    assert main(["ec2-events", "setup", "-c", str(cfg)]) == 0
    assert main(["ec2-events", "check", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "ok   rule elb-elb-spot-interruption" in out
    assert ec2_cli_main is not None


def test_the_daemon_reads_the_queue_only_when_asked(clients: tuple[Any, Any], aws_env: str) -> None:
    from elb.core.config import parse_config
    from elb.service import factory

    sqs, events = clients
    base = {"provider": "ec2", "ec2": {"region": REGION, "endpoint_url": aws_env}}
    assert factory.make_notices(parse_config({"cloud": base})) is None
    on = parse_config({"cloud": {**base, "ec2": {**base["ec2"], "notices": True}}})  # type: ignore[dict-item]
    with pytest.raises(CloudError, match="elb ec2-events setup"):
        factory.make_notices(on)
    setup_events(sqs, events, "elb")
    made = factory.make_notices(on)
    assert isinstance(made, Ec2Notices) and made.queue_url.endswith("elb-elb-notices")
