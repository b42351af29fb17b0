"""A pass's removals go as one operation, and so do its warm pool's stops and its terminations:
each node disabled on its own, one read for all of them, one remove play (or one stop) for the
idle ones, one read to see the scheduler no longer lists them (in-memory stand-ins:
tests/unit/fakes.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from elb.core.config import Config
from elb.core.interfaces import CloudError, Instance
from elb.core.model import Host, NodeState, QueueInstance, Removal, Snapshot
from elb.schedulers.sge.errors import SgeError
from elb.service.actuator import Actuator, Outcomes
from tests.unit.factories import T0, running, small_config
from tests.unit.test_daemon import Rig, parts

NAMES = ("node001", "node002", "node003")


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return small_config(tmp_path, add_nodes_per_iteration=2, shrink="timer")


def _ready(r: Rig, names: tuple[str, ...] = NAMES, age: float = 50 * 60) -> None:
    """Ready, idle nodes near the end of their hour: the timer rules remove each of them."""
    for i, name in enumerate(names, start=1):
        iid, ip = f"i-000{i}", f"10.0.0.{i}"
        r.journal.record(name, NodeState.READY, T0 - age, instance_id=iid, private_ip=ip, slots=8)
        r.cloud.instances[iid] = Instance(iid, name, "running", T0 - age, ip)
        r.sge.add_host(name)


def _unreadable() -> Snapshot:
    raise SgeError("qstat: error: unable to contact qmaster", command=("qstat",), returncode=1)


def _actuator(r: Rig, stopping: threading.Event | None = None) -> Actuator:
    return Actuator(r.journal, r.bal.scheduler, r.cloud, r.prov, r.bal.clock, stopping=stopping)


def test_a_pass_removing_three_nodes_runs_one_remove_play(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    result = r.bal.run_pass()
    assert sorted(result.outcomes.removed) == list(NAMES)
    assert r.prov.playbooks == ["remove_node.yml"]  # one play for the three, not one each
    assert r.prov.log == [f"remove {n}" for n in NAMES]
    # every node disabled, then one read for the drain and one to see SGE no longer lists them
    first = r.sge.calls.index("disable node001")
    assert r.sge.calls[first:] == [*(f"disable {n}" for n in NAMES), "read", "read"]
    assert sorted(r.cloud.terminated) == ["i-0001", "i-0002", "i-0003"]
    for n in NAMES:
        steps = [e.state for e in r.journal.events(n)][-3:]
        assert steps == [NodeState.DRAINING, NodeState.DEREGISTERED, NodeState.TERMINATED]


def test_a_job_landing_on_one_while_draining_keeps_it_and_removes_the_rest(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.sge.on_disable = lambda host: r.sge.jobs.append(running(99, host)) if host == "node002" else None
    result = r.bal.run_pass()
    assert result.outcomes.kept == ["node002"]
    assert sorted(result.outcomes.removed) == ["node001", "node003"]
    assert r.prov.log == ["remove node001", "remove node003"]  # the busy node is not in the play
    assert "enable node002" in r.sge.calls
    assert r.journal.node("node002").state is NodeState.READY  # type: ignore[union-attr]
    assert "i-0002" not in r.cloud.terminated


def test_a_node_the_play_finds_busy_stays_and_the_rest_go(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.prov.busy_on_remove = {"node003"}
    result = r.bal.run_pass()
    assert result.outcomes.kept == ["node003"]
    assert sorted(result.outcomes.removed) == ["node001", "node002"]
    assert "enable node003" in r.sge.calls
    assert r.journal.node("node003").state is NodeState.READY  # type: ignore[union-attr]
    assert "node003" in r.sge.hosts and "i-0003" not in r.cloud.terminated


def test_a_play_failing_on_one_node_leaves_the_others_removed(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.prov.fail_remove = {"node001"}
    result = r.bal.run_pass()
    assert sorted(result.outcomes.removed) == ["node002", "node003"]
    assert "node001" in result.outcomes.failed
    # still listed by the scheduler: kept draining, not terminated (reconcile tries again)
    assert r.journal.node("node001").state is NodeState.DRAINING  # type: ignore[union-attr]
    assert "i-0001" not in r.cloud.terminated


def test_elb_stopping_while_draining_leaves_the_nodes_not_yet_disabled_ready(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    stopping = threading.Event()
    r.sge.on_disable = lambda host: stopping.set() if host == "node002" else None
    out = Outcomes()
    _actuator(r, stopping).remove_all([Removal(n, "idle") for n in NAMES], out)
    assert out.removed == ["node001", "node002"]  # begun before the stop: finished
    assert out.postponed == ["node003"]
    assert "disable node003" not in r.sge.calls
    assert r.journal.node("node003").state is NodeState.READY  # type: ignore[union-attr]


def test_a_drain_read_that_fails_keeps_every_node_enabled(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.sge.read_snapshot = _unreadable  # type: ignore[method-assign]
    out = Outcomes()
    _actuator(r).remove_all([Removal(n, "idle") for n in NAMES], out)
    assert out.removed == [] and r.prov.log == []
    assert sorted(out.kept) == list(NAMES) and sorted(out.failed) == list(NAMES)
    assert "unable to contact qmaster" in out.failed["node001"]
    assert r.sge.disabled == set()
    for n in NAMES:
        assert r.journal.node(n).state is NodeState.READY  # type: ignore[union-attr]


def test_a_node_the_drain_read_does_not_show_is_kept_and_the_rest_go(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    del r.sge.hosts["node002"]  # SGE no longer shows it: nothing proves it is idle
    out = Outcomes()
    _actuator(r).remove_all([Removal(n, "idle") for n in NAMES], out)
    assert out.removed == ["node001", "node003"]
    assert out.kept == ["node002"]
    assert out.failed["node002"] == "drain failed: SGE does not show the host"
    assert r.journal.node("node002").state is NodeState.READY  # type: ignore[union-attr]
    assert "enable node002" in r.sge.calls and "i-0002" not in r.cloud.terminated


def test_a_node_no_longer_ready_is_left_out_of_the_batch(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.journal.record("node002", NodeState.DRAINING, T0, detail="by hand")
    out = Outcomes()
    _actuator(r).remove_all([Removal(n, "idle") for n in NAMES], out)
    assert out.removed == ["node001", "node003"]
    assert r.prov.log == ["remove node001", "remove node003"]


def test_grid_engine_drain_checks_read_once_for_all_hosts(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    q = r.sge.hosts["node003"].queues[0]
    r.sge.hosts["node003"] = Host("node003", (QueueInstance(q.queue, q.host, q.slots_total, 0, 2),), 8)
    # a parallel job's entries on two hosts: one per queue instance
    r.sge.jobs = [running(7, "node001", slots=4), running(7, "node002", slots=4), running(8, "node009")]
    r.sge.calls.clear()
    checks = r.bal.scheduler.drain_checks(["node001", "node002", "node003", "node042"])
    assert r.sge.calls == ["read"]
    assert sorted(checks) == ["node001", "node002", "node003"]  # node042: not shown, left out
    assert [j.job_id for j in checks["node001"].jobs] == [7] and [j.job_id for j in checks["node002"].jobs] == [7]
    assert (checks["node003"].jobs, checks["node003"].reserved) == ((), 2)
    assert r.bal.scheduler.listed(["node001", "node042"]) == frozenset({"node001"})


def test_warm_pool_stops_go_together_and_so_do_its_terminations(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.sge.calls.clear()
    out = Outcomes()
    _actuator(r).stop_all([Removal(n, "idle; pooled") for n in NAMES], out)
    assert out.stopped == list(NAMES)
    assert r.cloud.stop_calls == [["i-0001", "i-0002", "i-0003"]]  # one stop for the three
    assert r.sge.calls == [*(f"disable {n}" for n in NAMES), "read"]  # one read for the drain
    assert r.prov.log == [] and sorted(r.sge.disabled) == list(NAMES)  # still exec hosts, disabled
    out = Outcomes()
    _actuator(r).retire_all([Removal(n, "past max_age") for n in NAMES], out)
    assert r.prov.playbooks == ["remove_node.yml"] and r.prov.log == [f"remove {n}" for n in NAMES]
    assert sorted(out.removed) == list(NAMES) and sorted(r.cloud.terminated) == ["i-0001", "i-0002", "i-0003"]


def test_a_stop_that_fails_removes_the_whole_batch_in_one_play(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)

    def refuse(ids: object) -> None:
        raise CloudError("IncorrectInstanceState", retryable=True)

    r.cloud.stop = refuse  # type: ignore[method-assign,assignment]
    out = Outcomes()
    _actuator(r).stop_all([Removal(n, "idle; pooled") for n in NAMES], out)
    assert out.stopped == [] and sorted(out.removed) == list(NAMES)
    assert all("stop failed (IncorrectInstanceState)" in out.failed[n] for n in NAMES)
    assert r.prov.playbooks == ["remove_node.yml"]
    for n in NAMES:
        assert r.journal.node(n).state is NodeState.TERMINATED  # type: ignore[union-attr]


def test_a_job_landing_on_one_node_while_stopping_keeps_it_and_stops_the_rest(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.sge.on_disable = lambda host: r.sge.jobs.append(running(99, host)) if host == "node001" else None
    out = Outcomes()
    _actuator(r).stop_all([Removal(n, "idle; pooled") for n in NAMES], out)
    assert out.kept == ["node001"] and out.stopped == ["node002", "node003"]
    assert r.cloud.stop_calls == [["i-0002", "i-0003"]]
    assert r.journal.node("node001").state is NodeState.READY  # type: ignore[union-attr]


def _pooled(r: Rig) -> None:
    """The three nodes stopped into the warm pool, then journalled as restarting."""
    _ready(r)
    _actuator(r).stop_all([Removal(n, "idle; pooled") for n in NAMES], Outcomes())
    for n in NAMES:
        assert _actuator(r).begin_restart(n, "demand")
    r.prov.log.clear()
    r.prov.playbooks.clear()


def test_warm_pool_restarts_go_together(cfg: Config) -> None:
    r = parts(cfg)
    _pooled(r)
    out = Outcomes()
    _actuator(r).restart_all(list(NAMES), out)
    assert out.restarted == list(NAMES) and out.failed == {}
    assert r.cloud.start_calls == [["i-0001", "i-0002", "i-0003"]]  # one start for the three
    # the fake moves their addresses: one add play for the three (their hosts lines)
    assert r.prov.playbooks == ["add_node.yml"] and r.prov.log == [f"add {n}" for n in NAMES]
    for n in NAMES:
        assert r.journal.node(n).state is NodeState.READY  # type: ignore[union-attr]
        assert n not in r.sge.disabled


def test_a_node_that_does_not_start_is_removed_and_the_others_restart(cfg: Config) -> None:
    r = parts(cfg)
    _pooled(r)
    r.cloud.not_starting = {"i-0002"}
    out = Outcomes()
    _actuator(r).restart_all(list(NAMES), out)
    assert out.restarted == ["node001", "node003"]
    assert out.failed["node002"] == "restart failed (start failed: InsufficientInstanceCapacity); removed"
    assert r.prov.playbooks == ["add_node.yml", "remove_node.yml"]
    assert r.prov.log == ["add node001", "add node003", "remove node002"]
    assert r.journal.node("node002").state is NodeState.TERMINATED  # type: ignore[union-attr]
    assert r.cloud.terminated == ["i-0002"]


def test_a_start_call_that_fails_removes_every_node_it_was_starting(cfg: Config) -> None:
    r = parts(cfg)
    _pooled(r)

    def refuse(ids: object) -> None:
        raise CloudError("RequestLimitExceeded", retryable=True)

    r.cloud.start = refuse  # type: ignore[method-assign,assignment]
    out = Outcomes()
    _actuator(r).restart_all(list(NAMES), out)
    assert out.restarted == [] and sorted(out.removed) == list(NAMES)
    assert r.prov.playbooks == ["remove_node.yml"]  # one remove play for the three


def test_elb_stopping_while_restarted_nodes_register_leaves_them_starting(cfg: Config) -> None:
    r = parts(cfg)
    _pooled(r)
    waited: list[list[str]] = []

    def stopped_meanwhile(names: Sequence[str], stopping: threading.Event) -> None:
        waited.append(list(names))  # elb was told to stop while it waited for them

    r.bal.scheduler.await_registered = stopped_meanwhile  # type: ignore[method-assign]
    out = Outcomes()
    _actuator(r).restart_all(list(NAMES), out)
    assert waited == [list(NAMES)]  # one wait for the three
    assert out.restarted == [] and out.failed == {}
    for n in NAMES:  # the next start finds them starting and removes them
        assert r.journal.node(n).state is NodeState.STARTING  # type: ignore[union-attr]


def test_a_stop_refused_for_one_node_removes_only_that_one(cfg: Config) -> None:
    r = parts(cfg)
    _ready(r)
    r.cloud.refused = {"i-0002"}  # the cloud refuses the whole call for it, nothing stopped
    out = Outcomes()
    _actuator(r).stop_all([Removal(n, "idle; pooled") for n in NAMES], out)
    # the batch, then each node alone
    assert r.cloud.stop_calls == [["i-0001", "i-0002", "i-0003"], ["i-0001"], ["i-0002"], ["i-0003"]]
    assert out.stopped == ["node001", "node003"] and out.removed == ["node002"]
    assert out.failed["node002"].startswith("stop failed (refusing to stop i-0002")
    assert r.prov.log == ["remove node002"] and r.cloud.terminated == ["i-0002"]
    assert r.journal.node("node001").state is NodeState.STOPPED  # type: ignore[union-attr]


def test_a_start_refused_for_one_node_removes_only_that_one(cfg: Config) -> None:
    r = parts(cfg)
    _pooled(r)
    r.cloud.refused = {"i-0003"}
    out = Outcomes()
    _actuator(r).restart_all(list(NAMES), out)
    assert r.cloud.start_calls == [["i-0001", "i-0002", "i-0003"], ["i-0001"], ["i-0002"], ["i-0003"]]
    assert out.restarted == ["node001", "node002"] and out.removed == ["node003"]
    assert out.failed["node003"].startswith("restart failed (start failed: refusing to start i-0003")
