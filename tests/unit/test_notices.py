"""EC2's notices as elb reads them (``elb.clouds.ec2.notices.parse_event``) and what the daemon does
with one about a managed node. The events are tests/fixtures/ec2 (written from AWS's documented
shapes: none can be recorded here)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from elb.clouds.ec2.notices import NoticeError, parse_event
from elb.core.interfaces import Notice, NoticeKind
from elb.core.model import NodeState
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import BalancerCollector
from tests.unit.factories import T0, running, small_config
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

EVENTS = Path(__file__).resolve().parents[1] / "fixtures" / "ec2"


def event(name: str) -> str:
    return (EVENTS / f"{name}.json").read_text()


@pytest.mark.parametrize(
    ("name", "kind", "iid", "detail"),
    [
        ("spot-interruption", NoticeKind.INTERRUPTION, "i-0123456789abcdef0", "spot interruption: terminate"),
        ("rebalance", NoticeKind.REBALANCE, "i-0123456789abcdef0", "rebalance recommendation"),
        ("state-change", NoticeKind.STATE, "i-0123456789abcdef0", "state shutting-down"),
        (
            "health-retirement",
            NoticeKind.SCHEDULED,
            "i-0fedcba9876543210",
            "scheduled change AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        ),
    ],
)
def test_each_kind_of_event(name: str, kind: NoticeKind, iid: str, detail: str) -> None:
    (n,) = parse_event(event(name))
    assert (n.kind, n.instance_id, n.detail) == (kind, iid, detail)
    assert n.time > 1.7e9


def test_doomed_kinds() -> None:
    assert NoticeKind.INTERRUPTION.doomed and NoticeKind.SCHEDULED.doomed
    assert not NoticeKind.REBALANCE.doomed and not NoticeKind.STATE.doomed


def test_events_about_something_else_are_no_notice() -> None:
    other = json.loads(event("health-retirement"))
    other["detail"]["service"] = "RDS"
    assert parse_event(json.dumps(other)) == []
    login = {
        "detail-type": "AWS Console Sign In via CloudTrail",
        "source": "aws.signin",
        "time": "2026-11-24T00:00:00Z",
    }
    assert parse_event(json.dumps({**login, "detail": {}})) == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"source": "aws.ec2"}', "not an EventBridge event"),
        (event("spot-interruption").replace("2026-11-24T12:00:00Z", "yesterday"), "not ISO 8601"),
        (
            event("spot-interruption").replace('"instance-id": "i-0123456789abcdef0"', '"instance-id": "x"'),
            "instance id",
        ),
    ],
)
def test_malformed_messages_are_refused_with_the_reason(body: str, words: str) -> None:
    with pytest.raises(NoticeError, match=words):
        parse_event(body)


class Notices:
    def __init__(self, notices: Sequence[Notice] = (), error: str | None = None) -> None:
        self.notices, self.error, self.polls = list(notices), error, 0

    def poll(self) -> Sequence[Notice]:
        self.polls += 1
        if self.error:
            raise RuntimeError(self.error)
        out, self.notices = self.notices, []
        return out


def ready_cluster(tmp_path: Path, notices: Notices) -> tuple[Balancer, FakeSge, FakeCloud]:
    cfg = small_config(tmp_path, min_nodes=1)
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
        notices=notices,
    )
    bal.run_pass()  # min_nodes: node001 launched and provisioned
    assert bal.journal.node("node001") is not None
    return bal, sge, cloud


def test_a_node_about_to_be_taken_is_disabled_at_once_and_its_removal_ordered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notices = Notices()
    bal, sge, cloud = ready_cluster(tmp_path, notices)
    iid = next(iter(cloud.instances))
    notices.notices = [
        Notice(NoticeKind.INTERRUPTION, iid, T0, "spot interruption: terminate"),
        Notice(NoticeKind.INTERRUPTION, "i-not-ours", T0, "spot interruption: terminate"),
    ]
    with caplog.at_level(logging.INFO, logger="elb"):
        assert bal.run_pass().ok
    assert "disable node001" in sge.calls
    assert "node001" in bal.journal.orders().remove
    assert bal.counters.notices == {"spot-interruption": 1}  # the other instance is not ours
    assert any("EC2 notice: spot-interruption" in r.getMessage() for r in caplog.records)
    metric = [m for m in BalancerCollector(bal).collect() if m.name == "elb_ec2_notices"]
    assert metric[0].samples[0].labels == {"kind": "spot-interruption"}


def test_a_rebalance_recommendation_retires_the_node_early_without_requeueing(tmp_path: Path) -> None:
    # its jobs end where they run; new work goes to a replacement started now, not after a
    # two-minute interruption warning
    notices = Notices()
    bal, sge, cloud = ready_cluster(tmp_path, notices)
    sge.jobs = [running(7, "node001")]
    notices.notices = [Notice(NoticeKind.REBALANCE, next(iter(cloud.instances)), T0, "rebalance recommendation")]
    bal.run_pass()
    assert "disable node001" in sge.calls and bal.journal.orders().remove == frozenset({"node001"})
    assert not any(c.startswith("reschedule") for c in sge.calls) and sge.jobs[0].state == "r"


def test_a_state_change_is_logged_only(tmp_path: Path) -> None:
    notices = Notices()
    bal, sge, cloud = ready_cluster(tmp_path, notices)
    notices.notices = [Notice(NoticeKind.STATE, next(iter(cloud.instances)), T0, "state stopping")]
    bal.run_pass()
    assert "disable node001" not in sge.calls and bal.journal.orders().remove == frozenset()


def test_an_unreadable_queue_changes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    notices = Notices(error="AccessDenied: sqs:ReceiveMessage")
    with caplog.at_level(logging.WARNING, logger="elb"):
        bal, _sge, _cloud = ready_cluster(tmp_path, notices)
        assert bal.run_pass().ok
    assert notices.polls == 2
    assert any("cannot read EC2's notices" in r.getMessage() for r in caplog.records)


def test_a_spot_interruption_requeues_the_rerunnable_jobs_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notices = Notices()
    bal, sge, cloud = ready_cluster(tmp_path, notices)
    sge.jobs = [running(7, "node001"), running(8, "node001")]
    sge.not_rerunnable = {8}
    notices.notices = [Notice(NoticeKind.INTERRUPTION, next(iter(cloud.instances)), T0, "spot interruption")]
    with caplog.at_level(logging.INFO, logger="elb"):
        assert bal.run_pass().ok
    assert sge.calls.index("disable node001") < sge.calls.index("reschedule node001")  # nothing new lands first
    assert {j.job_id: j.state for j in sge.jobs} == {7: "Rq", 8: "r"}
    assert bal.counters.rescheduled == 1
    lines = [r.getMessage() for r in caplog.records]
    assert any("requeued job 7" in m for m in lines)
    assert any(m.startswith("ALARM: node001: job 8 not rerunnable") for m in lines)
    metric = [m for m in BalancerCollector(bal).collect() if m.name == "elb_jobs_rescheduled"]
    assert metric[0].samples[0].value == 1


def test_a_scheduled_retirement_drains_without_requeueing(tmp_path: Path) -> None:
    notices = Notices()
    bal, sge, cloud = ready_cluster(tmp_path, notices)
    sge.jobs = [running(7, "node001")]
    notices.notices = [Notice(NoticeKind.SCHEDULED, next(iter(cloud.instances)), T0, "instance-retirement in 14 days")]
    assert bal.run_pass().ok
    assert "disable node001" in sge.calls and not any(c.startswith("reschedule") for c in sge.calls)
    assert sge.jobs[0].state == "r"  # days of warning: the job ends where it runs


def test_a_state_change_of_an_instance_already_terminated_is_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """EventBridge may deliver the ``terminated`` state change after the node is gone: the
    cloud no longer lists its instance, but the journal knows whose it was."""
    notices = Notices()
    bal, sge, cloud = ready_cluster(tmp_path, notices)
    node = bal.journal.node("node001")
    assert node is not None and node.instance_id is not None
    iid = node.instance_id
    cloud.terminate([iid])
    bal.journal.record("node001", NodeState.TERMINATED, T0, detail="terminated outside elb")
    sge.hosts.pop("node001")
    notices.notices = [Notice(NoticeKind.STATE, iid, T0, "state terminated")]
    with caplog.at_level(logging.INFO, logger="elb"):
        assert bal.run_pass().ok
    assert bal.counters.notices == {"state-change": 1}
    assert any(
        f"node001: EC2 notice about a node that is terminated: state-change for {iid}" in r.getMessage()
        for r in caplog.records
    )
