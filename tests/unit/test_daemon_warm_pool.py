"""The warm pool carried out by the daemon and the actuator: an idle node drained and stopped,
started again for demand, and removed for good past its age. In-memory stand-ins for SGE, the
cloud and the playbooks (tests/unit/fakes.py: the real ones need a cluster; the cluster test
tests/cluster/test_warm_pool.py runs them)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.interfaces import CloudError
from elb.core.model import NodeState
from elb.core.scheduler import SchedulerError
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config(
        {
            "state_dir": str(tmp_path),
            "policy": {
                "max_nodes": 2,
                "add_nodes_per_iteration": 1,
                "slots_per_node": 8,
                "shrink": "timer",
                "boot_time": 300,
                "warm_pool": {"max_nodes": 1, "max_age": 3600, "restart_time": 60},
            },
        }
    )


class Rig:
    def __init__(self, cfg: Config) -> None:
        self.clock = Clock(T0)
        self.sge = FakeSge(T0)
        self.cloud = FakeCloud(T0)
        self.prov = FakeProvisioner(self.sge)
        self.journal = Journal(cfg.journal_path)
        self.bal = Balancer(
            cfg,
            scheduler=GridEngine(cfg, self.sge),
            journal=self.journal,
            cloud=self.cloud,
            provisioner=self.prov,
            clock=self.clock,
        )

    def at(self, t: float) -> None:
        self.clock.t = self.sge.now = self.cloud.now = t

    def state(self, name: str) -> NodeState:
        node = self.journal.node(name)
        assert node is not None
        return node.state


def launched_and_idle(r: Rig) -> None:
    r.sge.jobs = [pending(1, 600, slots=8)]
    assert r.bal.run_pass().outcomes.added == ["node001"]
    r.sge.jobs = [running(1, "node001", slots=8)]
    r.at(T0 + 60)
    r.bal.run_pass()
    r.sge.jobs = []


def test_an_idle_node_is_stopped_kept_disabled_and_started_again_for_demand(cfg: Config) -> None:
    r = Rig(cfg)
    launched_and_idle(r)
    r.at(T0 + 3000)  # idle long enough for the timer rule
    result = r.bal.run_pass()
    assert result.outcomes.stopped == ["node001"] and result.outcomes.removed == []
    assert r.state("node001") is NodeState.STOPPED
    assert r.cloud.stopped == ["i-0001"] and r.cloud.terminated == []
    assert "node001" in r.sge.hosts and "node001" in r.sge.disabled  # still an exec host, disabled
    assert r.prov.log == ["add node001"]  # no deregistration
    assert r.journal.node("node001").stopped_at == T0 + 3000  # type: ignore[union-attr]

    r.at(T0 + 3600)
    r.sge.jobs = [pending(2, 600, slots=8)]
    result = r.bal.run_pass()
    assert result.outcomes.restarted == ["node001"] and result.outcomes.added == []
    assert r.cloud.started == ["i-0001"] and r.cloud.counter == 2  # no second instance launched
    assert r.state("node001") is NodeState.READY and "node001" not in r.sge.disabled
    # The fake gives it a new address: the add playbook ran again for it (hosts lines).
    assert r.prov.log == ["add node001", "add node001"]
    assert [e.state for e in r.journal.events("node001")][-3:] == [
        NodeState.STARTING,
        NodeState.STARTING,
        NodeState.READY,
    ]
    assert r.bal.counters.stopped == 1 and r.bal.counters.restarted == 1


def test_a_job_landing_while_draining_keeps_the_node_ready_and_running(cfg: Config) -> None:
    r = Rig(cfg)
    launched_and_idle(r)
    r.at(T0 + 3000)
    r.sge.on_disable = lambda host: r.sge.jobs.append(running(3, host, slots=1))
    result = r.bal.run_pass()
    assert result.outcomes.kept == ["node001"] and result.outcomes.stopped == []
    assert r.state("node001") is NodeState.READY and r.cloud.stopped == []


def test_a_pooled_node_past_max_age_is_deregistered_and_terminated(cfg: Config) -> None:
    r = Rig(cfg)
    launched_and_idle(r)
    r.at(T0 + 3000)
    r.bal.run_pass()
    r.at(T0 + 3000 + 3600)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"]
    assert r.state("node001") is NodeState.TERMINATED
    assert r.cloud.terminated == ["i-0001"] and "node001" not in r.sge.hosts
    assert r.prov.log[-1] == "remove node001"


def test_a_failed_stop_removes_the_node_for_good(cfg: Config) -> None:
    r = Rig(cfg)
    launched_and_idle(r)

    def refuse(ids: object) -> None:
        raise CloudError("IncorrectInstanceState", retryable=True)

    r.cloud.stop = refuse  # type: ignore[method-assign,assignment]
    r.at(T0 + 3000)
    result = r.bal.run_pass()
    assert "stop failed" in result.outcomes.failed["node001"]
    assert result.outcomes.removed == ["node001"] and r.cloud.terminated == ["i-0001"]


def test_metrics_show_the_pool_and_its_stops_and_restarts(cfg: Config) -> None:
    from prometheus_client import generate_latest

    from elb.service.metrics import metrics_registry

    r = Rig(cfg)
    launched_and_idle(r)
    r.at(T0 + 3000)
    r.bal.run_pass()
    body = generate_latest(metrics_registry(r.bal, r.bal.metrics)).decode()
    assert 'elb_warm_pool_nodes{group="default"} 1.0' in body
    assert 'elb_nodes{state="stopped"} 1.0' in body
    assert "elb_nodes_stopped_total 1.0" in body and "elb_nodes_restarted_total 0.0" in body


def test_a_restart_whose_scheduler_did_not_answer_is_left_starting_then_provisioned_again(
    cfg: Config, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The wait for the scheduler after a restart ends with it not answering (a busy controller,
    after the driver's retries): no node's fault. The restarted node is not removed for good (a
    launch anew for the next demand): it is left starting, and the next pass provisions it again
    on the same instance."""
    r = Rig(cfg)
    launched_and_idle(r)
    r.at(T0 + 3000)
    assert r.bal.run_pass().outcomes.stopped == ["node001"]

    def unanswered(self: GridEngine, names: object, stopping: object) -> dict[str, str]:
        raise SchedulerError("qstat: unable to contact qmaster", transient=True)

    r.at(T0 + 3600)
    r.sge.jobs = [pending(2, 600, slots=8)]
    with monkeypatch.context() as m, caplog.at_level(logging.WARNING):
        m.setattr(GridEngine, "await_registered", unanswered)
        result = r.bal.run_pass()
    assert result.outcomes.restarted == [] and result.outcomes.removed == []
    assert "did not answer after its restart" in caplog.text and "operation failed" not in caplog.text
    assert r.state("node001") is NodeState.STARTING and r.cloud.terminated == []

    r.at(T0 + 3660)
    result = r.bal.run_pass()
    assert r.state("node001") is NodeState.READY
    assert r.cloud.terminated == [] and list(r.cloud.instances) == ["i-0001"]  # the same instance, none launched
