"""elb's daemon with the EC2 provider, end to end against moto: launch, provisioning, terminate.

Real here: the config, ``elb.service.factory.make_cloud`` (so the ``Ec2Cloud`` the daemon really
builds), the policy, the actuator, the journal and moto's EC2 API.
Stand-ins, and why: moto's instances are not machines, so nothing can be provisioned on them
and no SGE execution host can appear. Provisioning is the recording ``FakeProvisioner`` and SGE
is ``FakeSge`` (both from tests/unit/fakes.py); the fake provisioner "registers" a node in the
fake SGE exactly when elb asks it to. The real provisioner and SGE run in tests/cluster.
The second test also injects a capacity error (``FaultyClient``), which moto cannot produce.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from elb.clouds.ec2.cloud import Ec2Cloud
from elb.core.config import parse_config
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, NodeSpec, Notice, NoticeKind
from elb.core.model import NodeState
from elb.core.warmpool import WarmPool
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.factory import make_cloud
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import pending
from tests.unit.fakes import FakeProvisioner, FakeSge

from .conftest import CLUSTER, REGION, FaultyClient, all_instances, client_error, make_instance, state_of

pytestmark = pytest.mark.moto


class RecordingProvisioner(FakeProvisioner):
    """FakeProvisioner that also keeps the node specs elb handed over."""

    def __init__(self, sge: FakeSge) -> None:
        super().__init__(sge)
        self.added: list[NodeSpec] = []
        self.removed: list[NodeSpec] = []

    def add_nodes(self, playbook: str, nodes: Any, existing: Any, on_reached: Any = None) -> Any:
        self.added.extend(nodes)
        return super().add_nodes(playbook, nodes, existing, on_reached)

    def remove_nodes(self, playbook: str, nodes: Any, existing: Any) -> Any:
        self.removed.extend(nodes)
        return super().remove_nodes(playbook, nodes, existing)


def test_daemon_grows_and_shrinks_on_ec2(ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path) -> None:
    master = make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"})
    foreign = make_instance(
        ec2, ami, {TAG_CLUSTER: "other", TAG_ROLE: "worker", TAG_NAME: "node001", TAG_MANAGED_BY: "elb"}
    )
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "provision": {"private_data_dir": str(tmp_path / "ansible")},
            "cluster": {"name": CLUSTER},
            "policy": {"max_nodes": 2, "add_nodes_per_iteration": 2, "wait_time": 60},
            "cloud": {
                "provider": "ec2",
                "ec2": {
                    "region": REGION,
                    "endpoint_url": aws_env,
                    "ami": ami,
                    "instance_types": ["c5.2xlarge"],
                    "subnets": [subnets[0]],
                },
            },
        }
    )
    cloud = make_cloud(cfg)
    assert isinstance(cloud, Ec2Cloud)
    t0 = time.time()  # moto's launch times are wall-clock times
    clock = Clock(t0)
    sge = FakeSge(t0)
    prov = RecordingProvisioner(sge)
    journal = Journal(cfg.journal_path)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=clock)

    # 1. 20 single-slot jobs waited 5 minutes: grow to max_nodes, two c5.2xlarge (8 vCPUs each)
    sge.jobs = [pending(1, 300, slots=1, tasks=20, now=t0)]
    grow = bal.run_pass()
    assert grow.ok, grow.error
    assert grow.outcomes.added == ["node001", "node002"], grow.summary()
    workers = {w.name: w for w in cloud.list_workers()}
    assert set(workers) == {"node001", "node002"}
    for w in workers.values():
        assert w.instance_type == "c5.2xlarge" and w.slots == 8 and w.state == "running"
        rec = journal.node(w.name)
        assert rec is not None and rec.state is NodeState.READY
        assert rec.instance_id == w.instance_id and rec.private_ip == w.private_ip
    # provisioning was handed exactly the instances EC2 started, with their addresses and slots
    assert sorted((s.name, s.private_ip, s.slots) for s in prov.added) == sorted(
        (w.name, w.private_ip, 8) for w in workers.values()
    )
    assert set(sge.hosts) == {"node001", "node002"}

    # 2. the jobs are done; idle nodes go before their paid hour ends (the policy picks the
    #    minute: passes every minute from 30 minutes on, as the daemon would run them)
    sge.jobs = []
    removed: list[str] = []
    for minute in range(30, 60):
        clock.t = sge.now = t0 + minute * 60
        shrink = bal.run_pass()
        assert shrink.ok, shrink.error
        removed += shrink.outcomes.removed
        if len(removed) == 2:
            break
    assert sorted(removed) == ["node001", "node002"], shrink.summary()
    assert sorted(s.name for s in prov.removed) == ["node001", "node002"]
    for w in workers.values():
        assert state_of(ec2, w.instance_id) in ("shutting-down", "terminated")
        rec = journal.node(w.name)
        assert rec is not None and rec.state is NodeState.TERMINATED
    assert cloud.list_workers() == []
    # the master and the other cluster's worker were never touched
    assert state_of(ec2, master) == "running"
    assert state_of(ec2, foreign) == "running"
    assert len(all_instances(ec2)) == 4


def test_daemon_reports_a_launch_without_capacity_and_leaves_nothing(
    ec2: Any, ami: str, aws_env: str, tmp_path: Path
) -> None:
    """EC2 has no capacity (injected: moto cannot run out) -> the nodes fail, nothing is left."""
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "provision": {"private_data_dir": str(tmp_path / "ansible")},
            "policy": {"max_nodes": 1, "wait_time": 60},
            "cloud": {"ec2": {"region": REGION, "endpoint_url": aws_env, "ami": ami, "instance_types": ["c5.large"]}},
        }
    )
    cloud = make_cloud(cfg)
    assert isinstance(cloud, Ec2Cloud)
    faulty = FaultyClient(cloud.client)
    faulty.fail("run_instances", lambda kw: client_error("InsufficientInstanceCapacity", "none left", "RunInstances"))
    cloud.client = faulty  # type: ignore[assignment]
    t0 = time.time()
    sge = FakeSge(t0)
    prov = RecordingProvisioner(sge)
    journal = Journal(cfg.journal_path)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=Clock(t0))
    sge.jobs = [pending(1, 300, slots=1, tasks=4, now=t0)]

    result = bal.run_pass()

    assert result.ok, result.error
    assert result.outcomes.added == []
    assert "InsufficientInstanceCapacity" in result.outcomes.failed["node001"]
    rec = journal.node("node001")
    assert rec is not None and rec.state is NodeState.FAILED
    assert prov.added == []
    assert all_instances(ec2) == []


def test_worker_stopped_outside_elb_is_deregistered_then_terminated(
    ec2: Any, ami: str, aws_env: str, tmp_path: Path
) -> None:
    """A ready worker's instance is stopped (a spot stop, an admin, a crash): it leaves SGE, and
    the stopped instance, which still costs (its volumes) and could start again, is terminated."""
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "provision": {"private_data_dir": str(tmp_path / "ansible")},
            "cluster": {"name": CLUSTER},
            "policy": {"max_nodes": 1, "wait_time": 60},
            "cloud": {"ec2": {"region": REGION, "endpoint_url": aws_env, "ami": ami, "instance_types": ["c5.large"]}},
        }
    )
    cloud = make_cloud(cfg)
    t0 = time.time()
    clock = Clock(t0)
    sge = FakeSge(t0)
    prov = RecordingProvisioner(sge)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=prov,
        clock=clock,
    )
    sge.jobs = [pending(1, 300, now=t0)]
    assert bal.run_pass().outcomes.added == ["node001"]
    (w,) = cloud.list_workers()
    sge.jobs = []
    ec2.stop_instances(InstanceIds=[w.instance_id])
    assert state_of(ec2, w.instance_id) in ("stopping", "stopped")

    first = bal.run_pass()  # out of SGE, hosts and exports; the record is failed
    assert [x.split(" (")[0] for x in first.outcomes.repaired] == ["node001: vanished"], first.summary()
    assert [s.name for s in prov.removed] == ["node001"] and "node001" not in sge.hosts
    second = bal.run_pass()  # the stopped instance is terminated
    assert [x.split(" (")[0] for x in second.outcomes.repaired] == ["node001: terminate_gone"], second.summary()
    assert state_of(ec2, w.instance_id) in ("shutting-down", "terminated")
    assert cloud.list_workers() == []
    assert bal.run_pass().outcomes.repaired == []  # converged


class _Notices:
    """EC2's notice queue as the pass polls it (``Ec2Notices.poll``): what the test puts there."""

    def __init__(self) -> None:
        self.queued: list[Notice] = []

    def poll(self) -> list[Notice]:
        out, self.queued = self.queued, []
        return out


@pytest.mark.parametrize("kind", [NoticeKind.SCHEDULED, NoticeKind.REBALANCE])
def test_a_node_aws_is_taking_back_is_terminated_never_stopped_into_the_warm_pool(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path, kind: NoticeKind
) -> None:
    """An idle node of a group with a warm pool would be stopped into it; one AWS retires (or
    whose interruption risk went up) is removed for good and terminated, and its history says
    which notice. (A spot group cannot have a warm pool: the config refuses it.)"""
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "provision": {"private_data_dir": str(tmp_path / "ansible")},
            "cluster": {"name": CLUSTER},
            "policy": {"max_nodes": 2, "slots_per_node": 8, "billing": "second", "idle_time": 60, "shrink": "timer"},
            "cloud": {
                "provider": "ec2",
                "ec2": {"region": REGION, "endpoint_url": aws_env, "ami": ami, "instance_types": ["c5.2xlarge"]},
            },
        }
    )
    cfg = cfg.model_copy(
        update={"policy": cfg.policy.model_copy(update={"warm_pool": WarmPool(max_nodes=2, restart_time=30)})}
    )
    cloud = make_cloud(cfg)
    t0 = time.time()
    clock = Clock(t0)
    sge = FakeSge(t0)
    notices = _Notices()
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=cloud,
        provisioner=RecordingProvisioner(sge),
        clock=clock,
        notices=notices,
    )
    sge.jobs = [pending(1, 300, slots=8, now=t0)]
    assert bal.run_pass().outcomes.added == ["node001"]
    (worker,) = cloud.list_workers()
    sge.jobs = []
    notices.queued = [Notice(kind, worker.instance_id, t0, "moved to retirement")]
    clock.t = sge.now = t0 + 30
    assert bal.run_pass().ok  # the notice: disabled, its removal ordered with the notice as cause
    assert "disable node001" in sge.calls
    for minute in range(1, 5):
        clock.t = sge.now = t0 + 60 * minute + 30
        assert bal.run_pass().ok
    assert state_of(ec2, worker.instance_id) in ("shutting-down", "terminated")
    rec = journal.node("node001")
    assert rec is not None and rec.state is NodeState.TERMINATED and rec.stopped_at is None
    assert all(e.state is not NodeState.STOPPED for e in journal.events("node001"))
    assert f"EC2 {kind.value} notice" in (journal.events("node001")[-1].detail or "")
    assert bal.counters.notices == {kind.value: 1}
