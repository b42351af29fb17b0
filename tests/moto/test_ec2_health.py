"""EC2's status checks of the workers (``Ec2Cloud.health``) and what the daemon does with a
worker that fails one: disabled in SGE, its removal ordered (the safe drain replaces it), once.

moto answers ``DescribeInstanceStatus`` (every instance ``ok``) but cannot make one impaired: the
impaired answers are written into moto's real answer by the test (``FaultyClient.rewrite``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from elb.clouds.ec2.cloud import Ec2Cloud
from elb.clouds.ec2.health import impaired
from elb.core.config import parse_config
from elb.core.interfaces import NoticeKind
from elb.core.model import NodeState
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.factory import make_cloud
from elb.service.journal import Journal
from tests.unit.factories import pending
from tests.unit.fakes import FakeProvisioner, FakeSge

from .conftest import REGION, FaultyClient, client_error

pytestmark = pytest.mark.moto


def _impair(iid: str, which: str) -> Any:
    def rewrite(kwargs: dict[str, Any], resp: Any) -> Any:
        for st in resp.get("InstanceStatuses", []):
            if st.get("InstanceId") == iid:
                st[which] = {"Status": "impaired", "Details": [{"Name": "reachability", "Status": "failed"}]}
        return resp

    return rewrite


def test_only_an_impaired_check_is_a_notice() -> None:
    ok = {"InstanceId": "i-1", "InstanceStatus": {"Status": "ok"}, "SystemStatus": {"Status": "ok"}}
    assert impaired(ok, 1.0) is None
    assert impaired({**ok, "InstanceStatus": {"Status": "initializing"}}, 1.0) is None
    assert impaired({**ok, "SystemStatus": {"Status": "insufficient-data"}}, 1.0) is None
    both = impaired({**ok, "InstanceStatus": {"Status": "impaired"}, "SystemStatus": {"Status": "impaired"}}, 1.0)
    assert both is not None and both.kind is NoticeKind.IMPAIRED and both.instance_id == "i-1"
    assert both.detail == "instance and system status check impaired"
    assert impaired({"InstanceStatus": {"Status": "impaired"}}, 1.0) is None  # no instance id: nothing to act on


def _daemon(aws_env: str, ami: str, tmp_path: Path) -> tuple[Balancer, Ec2Cloud, FaultyClient, FakeSge]:
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "provision": {"private_data_dir": str(tmp_path / "ansible")},
            "policy": {"max_nodes": 2, "wait_time": 60, "min_nodes": 0},
            "cloud": {"ec2": {"region": REGION, "endpoint_url": aws_env, "ami": ami, "instance_types": ["c5.large"]}},
        }
    )
    cloud = make_cloud(cfg)
    assert isinstance(cloud, Ec2Cloud)
    faulty = FaultyClient(cloud.client)
    cloud.client = faulty  # type: ignore[assignment]
    t0 = time.time()  # moto's launch times are wall-clock times
    sge = FakeSge(t0)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
    )
    sge.jobs = [pending(1, 300, slots=1, tasks=2, now=t0)]
    assert bal.run_pass().ok
    assert bal.journal.node("node001") is not None and bal.journal.node("node001").state is NodeState.READY  # type: ignore[union-attr]
    sge.jobs = []
    return bal, cloud, faulty, sge


def test_healthy_workers_are_left_alone(aws_env: str, ami: str, tmp_path: Path) -> None:
    bal, cloud, faulty, sge = _daemon(aws_env, ami, tmp_path)
    assert cloud.health(cloud.list_workers()) == []  # moto: every check ok
    assert bal.run_pass().ok
    asked = faulty.calls_of("describe_instance_status")
    assert asked and set(asked[-1]["InstanceIds"]) == {w.instance_id for w in cloud.list_workers()}
    assert not any(c.startswith("disable") for c in sge.calls)
    assert bal.journal.orders().remove == frozenset()


def test_a_worker_failing_a_status_check_is_disabled_and_replaced_once(aws_env: str, ami: str, tmp_path: Path) -> None:
    bal, cloud, faulty, sge = _daemon(aws_env, ami, tmp_path)
    sick = next(w for w in cloud.list_workers() if w.name == "node001")
    faulty.rewrite("describe_instance_status", _impair(sick.instance_id, "SystemStatus"))
    assert bal.run_pass().ok
    assert "disable node001" in sge.calls
    assert "node001" in bal.journal.orders().remove
    assert bal.counters.notices == {"status-check-failed": 1}
    assert bal.run_pass().ok  # still impaired: its removal is under way, not ordered again
    assert bal.counters.notices == {"status-check-failed": 1}


def test_status_checks_that_cannot_be_read_change_nothing(
    aws_env: str, ami: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bal, _cloud, faulty, sge = _daemon(aws_env, ami, tmp_path)
    faulty.fail(
        "describe_instance_status",
        lambda kw: client_error(
            "UnauthorizedOperation", "not allowed: ec2:DescribeInstanceStatus", "DescribeInstanceStatus"
        ),
    )
    assert bal.run_pass().ok
    assert any("cannot read the workers' status checks" in r.getMessage() for r in caplog.records)
    assert not any(c.startswith("disable") for c in sge.calls)
