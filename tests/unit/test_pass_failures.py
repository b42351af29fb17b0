"""A pass never leaves elb broken: any exception is a failed pass, the journal is never left
closed; a cleanup that cannot deregister a node that never became ready still terminates it."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.model import History, NodeState, Plan
from elb.core.policy import make_policy
from elb.core.state import ClusterState
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config({"state_dir": str(tmp_path), "policy": {"max_nodes": 2, "slots_per_node": 8}})


class RaisingPolicy:
    def __init__(self, cfg: Config) -> None:
        self.inner = make_policy(cfg.policy, cfg.cluster)
        self.raises: BaseException | None = MemoryError()

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, state: ClusterState, history: History) -> Plan:
        if self.raises is not None:
            raise self.raises
        return self.inner.decide(state, history)


def test_an_exception_in_a_pass_is_a_failed_pass_and_the_next_one_works(
    cfg: Config, caplog: pytest.LogCaptureFixture
) -> None:
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    prov = FakeProvisioner(sge)
    journal = Journal(cfg.journal_path)
    policy = RaisingPolicy(cfg)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=cloud,
        provisioner=prov,
        policy=policy,
        clock=lambda: T0,
    )
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=4)]
    result = bal.run_pass()
    assert not result.ok and result.error == "MemoryError: "
    assert bal.counters.failed_passes == 1
    assert "pass failed" in caplog.text
    assert [p.ok for p in journal.passes()] == [False]
    policy.raises = None
    result = bal.run_pass()
    assert result.ok and result.outcomes.added == ["node001"], result.summary()


def test_a_closed_journal_is_reopened_by_the_next_pass(cfg: Config) -> None:
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
        clock=lambda: T0,
    )
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=4)]
    journal.close()  # what a failure deep in a pass may leave behind
    result = bal.run_pass()
    assert result.ok, result.summary()
    assert result.outcomes.added == ["node001"]
    assert journal.node("node001") is not None


def test_a_never_ready_node_sge_does_not_list_is_terminated_although_its_deregistration_fails(
    cfg: Config,
) -> None:
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    prov = FakeProvisioner(sge, unreachable_adds=True, fail_remove_all=True)
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=lambda: T0
    )
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=4)]
    result = bal.run_pass()  # node001 launched, unreachable, its cleanup play fails
    assert "node001" in result.outcomes.failed
    assert cloud.list_workers() == []  # not left draining and billed
    node = journal.node("node001")  # the master-side deregistration is retried
    assert node is not None and node.state is NodeState.DRAINING, node
    result = bal.run_pass()
    assert any(r.startswith("node001: finish_drain") for r in result.outcomes.repaired), result.summary()
    prov.fail_remove_all = False
    bal.run_pass()
    node = journal.node("node001")
    assert node is not None and node.state is NodeState.TERMINATED, node
    assert "remove node001" in prov.log


def test_a_node_sge_lists_is_kept_draining_with_an_honest_reason(cfg: Config, caplog: pytest.LogCaptureFixture) -> None:
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    prov = FakeProvisioner(sge, fail={"node001": "Start the execd"}, fail_remove_all=True)
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=lambda: T0
    )
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=4)]
    bal.run_pass()  # half-registered in SGE, then its cleanup fails: SGE lists it
    node = journal.node("node001")
    assert node is not None and node.state is NodeState.DRAINING
    assert len(cloud.list_workers()) == 1  # never terminated while SGE lists it
    assert "ALARM: node001: deregistration failed" in caplog.text
    caplog.clear()
    result = bal.run_pass()  # retried; elb never stopped, and the log does not say it did
    assert "when elb stopped" not in caplog.text
    assert any("removal has not finished" in r for r in result.outcomes.repaired), result.outcomes.repaired
    assert len(cloud.list_workers()) == 1
    prov.fail_remove_all = False
    bal.run_pass()
    node = journal.node("node001")
    assert node is not None and node.state in (NodeState.FAILED, NodeState.TERMINATED)
    assert cloud.list_workers() == []
