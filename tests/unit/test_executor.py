"""Node operations run off the polling loop: a slow provisioning does not hold a removal planned
by a later pass, and a node has one operation at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from elb.core.config import Config
from elb.core.model import NodeState
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.executor import Executor
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending, small_config
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return small_config(tmp_path, add_nodes_per_iteration=1, shrink="timer")


def _rig(cfg: Config) -> tuple[FakeSge, FakeCloud, FakeProvisioner, Journal, Clock, Balancer, Executor]:
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    prov = FakeProvisioner(sge)
    journal = Journal(cfg.journal_path)
    clock = Clock(T0)
    ex = Executor(workers=4)
    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=clock, executor=ex
    )
    return sge, cloud, prov, journal, clock, bal, ex


def _ready_node(journal: Journal, cloud: FakeCloud, sge: FakeSge, name: str, age: float) -> None:
    inst = cloud.launch([name]).launched[0]
    journal.record(name, NodeState.READY, T0 - age, instance_id=inst.instance_id, private_ip="10.0.0.1", slots=8)
    sge.add_host(name)


def test_a_slow_provisioning_does_not_delay_a_removal_planned_by_a_later_pass(cfg: Config) -> None:
    sge, cloud, prov, journal, clock, bal, ex = _rig(cfg)
    _ready_node(journal, cloud, sge, "node001", 50 * 60)  # 50 min into its hour: due once idle
    sge.jobs = [pending(1, 20 * 60, slots=8, tasks=2)]
    prov.gate_add = threading.Event()
    try:
        first = bal.run_pass()  # launches node002; its playbook hangs
        assert first.plan is not None and first.plan.add_names == ("node002",)
        assert ex.in_flight() == {"node002"}
        sge.jobs = []  # the jobs were deleted: node001 is idle and due
        clock.t = sge.now = T0 + 400
        bal.run_pass()
        ex.wait_for("node001")
        assert "remove node001" in prov.log
        assert "add released" not in prov.log  # removed while the provisioning still runs
        assert journal.node("node001") is not None
        assert journal.node("node001").state is NodeState.TERMINATED  # type: ignore[union-attr]
        # node002's operation runs in its own thread: it reaches its (held) play in its own time
        _until(lambda: journal.node("node002").state is NodeState.PROVISIONING)  # type: ignore[union-attr]
        assert "add released" not in prov.log
    finally:
        prov.gate_add.set()
        ex.shutdown()
    result = bal.run_pass()
    assert "node002" in result.outcomes.added  # the ended operation is reported by the next pass


def _until(done: Callable[[], bool], bound: float = 30.0) -> None:
    """Wait (bounded, so a broken operation fails the test rather than hanging it) for ``done``."""
    end = time.monotonic() + bound
    while not done():
        assert time.monotonic() < end, "the background operation never got there"
        time.sleep(0.01)


def test_a_node_has_one_operation_at_a_time(cfg: Config) -> None:
    sge, cloud, prov, journal, clock, bal, ex = _rig(cfg)
    _ready_node(journal, cloud, sge, "node001", 50 * 60)
    prov.gate_remove = threading.Event()
    try:
        bal.run_pass()  # starts the removal of node001; its deregistration play hangs
        assert ex.in_flight() == {"node001"}
        _until(lambda: "remove started" in prov.log)  # the operation runs in its own thread
        assert journal.node("node001").state is NodeState.DRAINING  # type: ignore[union-attr]
        for k in range(1, 4):  # draining in the journal: reconcile would finish the drain, but it runs
            clock.t = sge.now = T0 + 60 * k
            result = bal.run_pass()
            assert result.outcomes.repaired == [], result.summary()
        assert prov.log.count("remove started") == 1
    finally:
        prov.gate_remove.set()
        ex.shutdown()
    assert journal.node("node001").state is NodeState.TERMINATED  # type: ignore[union-attr]
    assert cloud.list_workers() == []


def test_the_executor_refuses_a_second_operation_on_a_node() -> None:
    ex = Executor(workers=2)
    gate = threading.Event()
    ran: list[str] = []
    try:

        def add(_out: object) -> None:
            gate.wait(60)
            ran.append("add")

        assert ex.submit(["node001", "node002"], "add", add)
        assert not ex.submit(["node002"], "remove", lambda _out: ran.append("remove"))
        assert ex.submit(["node003"], "remove", lambda _out: ran.append("remove3"))
        ex.wait_for("node003")
        assert ran == ["remove3"]
    finally:
        gate.set()
        ex.shutdown()
    assert ran == ["remove3", "add"]
    assert ex.in_flight() == frozenset()
