"""One pass end to end through the actuator, with in-memory stand-ins (see tests/unit/fakes.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.interfaces import CloudError, Instance
from elb.core.model import Host, NodeState, QueueInstance
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.states import queue_flags
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.stats import read_rows
from tests.clock import Clock
from tests.ports import free_port
from tests.unit.factories import T0, pending, running, small_config
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    # the classic timer rules: these tests pin the actuator's steps, not the policy's timing
    return small_config(tmp_path, add_nodes_per_iteration=2, shrink="timer")


@dataclass
class Rig:
    sge: FakeSge
    cloud: FakeCloud
    prov: FakeProvisioner
    journal: Journal
    bal: Balancer


def parts(cfg: Config) -> Rig:
    sge = FakeSge(T0)
    cloud = FakeCloud(T0)
    prov = FakeProvisioner(sge)
    journal = Journal(cfg.journal_path)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=Clock(T0))
    return Rig(sge, cloud, prov, journal, bal)


def test_grow_launches_provisions_and_journals_each_step(cfg: Config) -> None:
    r = parts(cfg)
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    result = r.bal.run_pass()
    assert result.ok
    assert result.outcomes.added == ["node001", "node002"]
    assert {h for h in r.sge.hosts} == {"node001", "node002"}
    steps = [e.state for e in r.journal.events("node001")]
    assert steps == [
        NodeState.REQUESTED,
        NodeState.LAUNCHING,
        NodeState.RUNNING,
        NodeState.PROVISIONING,
        NodeState.READY,
    ]
    assert r.journal.node("node001").instance_id == "i-0001"  # type: ignore[union-attr]
    assert r.journal.history().last_change_at == T0
    rows = list(read_rows(cfg.stats_path))
    assert rows[-1].added == 2
    assert rows[-1].pending_slots == 12
    assert rows[-1].nodes_ready == 0  # the row is the cluster as the pass found it, then its action
    r.bal.run_pass()
    assert list(read_rows(cfg.stats_path))[-1].nodes_ready == 2


def test_provisioning_failure_on_one_of_two_cleans_it_out(cfg: Config) -> None:
    r = parts(cfg)
    r.prov.fail["node002"] = "Register the exec host"
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    result = r.bal.run_pass()
    assert result.outcomes.added == ["node001"]
    assert "node002" in result.outcomes.failed
    assert "Register the exec host" in result.outcomes.failed["node002"]
    assert "node002" not in r.sge.hosts  # not left half-registered
    assert [i.name for i in r.cloud.list_workers()] == ["node001"]  # terminated
    node = r.journal.node("node002")
    assert node is not None and node.state is NodeState.FAILED


def test_launch_failure_is_journalled_and_nothing_provisioned(cfg: Config) -> None:
    r = parts(cfg)
    r.cloud.fail_names = {"node002"}
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    r.bal.run_pass()
    assert r.prov.log == ["add node001"]
    assert r.journal.node("node002").state is NodeState.FAILED  # type: ignore[union-attr]


def test_unreadable_sge_changes_nothing_and_alarms(cfg: Config, caplog: pytest.LogCaptureFixture) -> None:
    r = parts(cfg)
    r.sge.jobs = [pending(1, 20 * 60)]
    r.sge.fail_reads = 3
    for _ in range(3):
        assert not r.bal.run_pass().ok
    assert r.prov.log == []
    assert r.cloud.instances == {}
    assert "ALARM: 3 passes in a row failed" in caplog.text
    assert [p.ok for p in r.journal.passes()] == [False, False, False]
    assert r.bal.run_pass().ok  # recovers when SGE answers again


def _one_ready_node(r: Rig, age: float) -> None:
    launched = T0 - age
    r.journal.record("node001", NodeState.READY, launched, instance_id="i-0001", private_ip="10.0.0.1", slots=8)
    r.cloud.instances["i-0001"] = Instance("i-0001", "node001", "running", launched, "10.0.0.1")
    r.sge.add_host("node001")


def test_idle_node_near_end_of_hour_is_drained_deregistered_and_terminated(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"]
    assert r.sge.calls[:3] == ["read", "disable node001", "read"]  # the pass's read, then the drain's
    assert "node001" not in r.sge.hosts
    assert "i-0001" in r.cloud.terminated
    steps = [e.state for e in r.journal.events("node001")][-3:]
    assert steps == [NodeState.DRAINING, NodeState.DEREGISTERED, NodeState.TERMINATED]


def test_job_landing_during_drain_keeps_the_node(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)

    def land(host: str) -> None:  # the scheduler dispatches just before qmod -d took effect
        r.sge.jobs.append(running(99, host))

    r.sge.on_disable = land
    result = r.bal.run_pass()
    assert result.outcomes.kept == ["node001"]
    assert result.outcomes.removed == []
    assert "enable node001" in r.sge.calls
    assert r.prov.log == []  # never deregistered
    assert r.journal.node("node001").state is NodeState.READY  # type: ignore[union-attr]


def test_busy_at_deregistration_keeps_the_node(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)
    r.prov.busy_on_remove = {"node001"}
    result = r.bal.run_pass()
    assert result.outcomes.kept == ["node001"]
    assert "node001" in r.sge.hosts
    assert r.sge.disabled == set()


def test_dry_run_touches_nothing(cfg: Config) -> None:
    r = parts(cfg)
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    result = r.bal.run_pass(dry_run=True)
    assert result.plan is not None and result.plan.add == 2
    assert r.prov.log == [] and r.cloud.instances == {}
    assert r.journal.nodes(include_gone=True) == []
    assert not cfg.stats_path.exists()


def test_busy_nodes_are_remembered(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 10 * 60)
    r.sge.jobs = [running(5, "node001")]
    r.bal.run_pass()
    assert r.journal.node("node001").last_busy_at == T0  # type: ignore[union-attr]


def test_metrics_endpoint_serves_pass_figures(cfg: Config) -> None:
    import urllib.request

    from elb.service.metrics import start_metrics_server

    r = parts(cfg)
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    r.bal.run_pass()
    r.sge.fail_reads = 1
    r.bal.run_pass()
    port = free_port()
    start_metrics_server("127.0.0.1", port, r.bal, r.bal.metrics)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "elb_waiting_slots 12.0" in body
    assert 'elb_nodes{state="ready"} 2.0' in body
    assert "elb_nodes_added_total 2.0" in body
    assert 'elb_passes_total{outcome="failed"} 1.0' in body
    assert 'elb_passes_total{outcome="ok"} 1.0' in body
    assert "elb_pass_duration_seconds_count 2.0" in body
    assert "elb_launch_to_ready_seconds_count 2.0" in body  # the two nodes the first pass added
    assert 'elb_build_info{python="' in body
    assert "process_resident_memory_bytes" in body
    assert 'elb_nodes{state="terminated"}' not in body  # never anything but 0: not served
    assert "elb_repairs_total 0.0" in body and "elb_lost_nodes_kept 0.0" in body
    values = dict(line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
    assert float(values["elb_last_good_pass_timestamp_seconds"]) == T0
    listed = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    names = {k.split("{")[0] for k in values if not k.startswith(("process_", "python_"))}
    names = {
        n.removesuffix(sfx) for n in names for sfx in ("_bucket", "_count", "_sum", "_created") if n.endswith(sfx)
    } | {n for n in names if not n.endswith(("_bucket", "_count", "_sum", "_created"))}
    assert {n for n in names if f"`{n}" not in listed} == set()  # docs/monitoring.md lists every metric


def test_cloud_listing_failure_changes_nothing(cfg: Config) -> None:
    r = parts(cfg)
    r.sge.jobs = [pending(1, 20 * 60)]

    def broken() -> list[Instance]:
        raise CloudError("RequestLimitExceeded")

    r.cloud.list_workers = broken  # type: ignore[method-assign]
    result = r.bal.run_pass()
    assert not result.ok
    assert "listing the cloud's workers" in result.summary()
    assert r.prov.log == []


def test_crash_mid_add_is_provisioned_on_restart(cfg: Config) -> None:
    r = parts(cfg)
    # a previous elb launched node001 and died before provisioning it
    r.journal.record("node001", NodeState.LAUNCHING, T0 - 120)
    r.cloud.instances["i-0042"] = Instance("i-0042", "node001", "running", T0 - 100, "10.0.0.42", slots=8)
    result = r.bal.run_pass()
    assert result.outcomes.added == ["node001"]
    assert any("adopt" in x for x in result.outcomes.repaired)
    node = r.journal.node("node001")
    assert node is not None and node.state is NodeState.READY and node.instance_id == "i-0042"


def test_interrupted_drain_is_finished_on_restart(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)
    r.journal.record("node001", NodeState.DRAINING, T0 - 10)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"]
    assert "i-0001" in r.cloud.terminated


def test_reserved_slot_appearing_during_drain_keeps_the_node(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 59 * 60)

    def reserve(host: str) -> None:  # a waiting PE job got a reservation on it meanwhile
        h = r.sge.hosts[host]
        q = h.queues[0]
        r.sge.hosts[host] = Host(host, (QueueInstance(q.queue, host, q.slots_total, 0, 4, q.flags),), h.num_proc)

    r.sge.on_disable = reserve
    result = r.bal.run_pass()
    assert result.outcomes.kept == ["node001"], result.summary()
    assert r.prov.log == []
    assert "4 slots reserved" in (r.journal.events("node001")[-1].detail or "")


def test_sge_error_in_one_removal_fails_that_node_not_the_pass(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 59 * 60)

    def qmod_fails(host: str) -> None:
        raise RuntimeError("qmod: error: denied: host is no admin host")

    r.sge.on_disable = qmod_fails
    result = r.bal.run_pass()
    assert result.ok
    assert "node001" in result.outcomes.failed
    assert r.journal.node("node001").state is NodeState.DRAINING  # type: ignore[union-attr]
    assert r.cloud.terminated == []


def test_stop_signal_lets_the_running_removal_finish_and_starts_no_other(cfg: Config) -> None:
    r = parts(cfg)
    for i, name in enumerate(("node001", "node002"), 1):
        launched = T0 - 50 * 60
        iid, ip = f"i-000{i}", f"10.0.0.{i}"
        r.journal.record(name, NodeState.READY, launched, instance_id=iid, private_ip=ip, slots=8)
        r.cloud.instances[iid] = Instance(iid, name, "running", launched, ip)
        r.sge.add_host(name)
    # SIGTERM arrives while node001 is being drained (run_forever sets the balancer's event).
    r.sge.on_disable = lambda _host: r.bal.stopping.set()
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"]  # finished: deregistered and terminated
    assert r.journal.node("node001").state is NodeState.TERMINATED  # type: ignore[union-attr]
    assert result.outcomes.postponed == ["node002"]  # never started: still a ready, enabled host
    assert r.journal.node("node002").state is NodeState.READY  # type: ignore[union-attr]
    assert "node002" in r.sge.hosts and "node002" not in r.sge.disabled
    assert "disable node002" not in r.sge.calls
    assert "not started node002" in result.summary()


def test_stop_signal_before_an_add_starts_launches_nothing(cfg: Config) -> None:
    r = parts(cfg)
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    r.bal.stopping.set()
    result = r.bal.run_pass()
    assert result.ok and result.plan is not None and result.plan.add == 2
    assert result.outcomes.postponed == ["node001,node002"]
    assert r.cloud.instances == {} and r.journal.nodes() == []


def _unsized(tmp_path: Path) -> Config:
    return parse_config(
        {"state_dir": str(tmp_path), "policy": {"max_nodes": 4, "add_nodes_per_iteration": 4, "shrink": "timer"}}
    )


def test_without_slots_per_node_the_first_launch_is_sized_by_the_cloud(tmp_path: Path) -> None:
    r = parts(_unsized(tmp_path))
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]  # 12 slots wait; the cloud's nodes have 8
    result = r.bal.run_pass()
    assert result.outcomes.added == ["node001", "node002"]  # not one node per slot (4, the cap)


def test_a_cloud_that_cannot_size_a_node_leaves_the_old_inference(tmp_path: Path) -> None:
    r = parts(_unsized(tmp_path))

    def unknown() -> int | None:
        raise CloudError("UnauthorizedOperation: ec2:DescribeInstanceTypes")

    r.cloud.new_node_slots = unknown  # type: ignore[method-assign]
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    result = r.bal.run_pass()
    assert result.ok
    assert result.outcomes.added == ["node001", "node002", "node003", "node004"]  # one slot per node: capped


def _lose(r: Rig, name: str) -> None:
    """SGE no longer hears from the node's execd: its queue instance shows state u."""
    r.sge.hosts[name] = Host(name, (QueueInstance("all.q", name, 8, 0, 0, queue_flags("au")),), 8)


def _at(r: Rig, t: float) -> None:
    r.sge.now = t
    r.bal.clock = Clock(t)


def test_ready_node_sge_cannot_reach_is_replaced_after_unreachable_timeout(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 5 * 60)  # young: the shrink rule would keep it for its hour
    r.bal.run_pass()
    assert r.journal.node("node001").last_up_at == T0  # type: ignore[union-attr]
    _lose(r, "node001")
    _at(r, T0 + cfg.unreachable_timeout - 1)
    assert r.bal.run_pass().outcomes.repaired == []
    assert r.journal.node("node001").last_up_at == T0  # type: ignore[union-attr]  # not up: not moved
    _at(r, T0 + cfg.unreachable_timeout)
    result = r.bal.run_pass()
    assert [x.split(":")[0] for x in result.outcomes.repaired] == ["node001"]
    assert result.outcomes.removed == ["node001"]
    assert (r.bal.last.lost_kept, r.bal.counters.repairs) == (0, 1)
    assert r.sge.calls[-3:] == ["disable node001", "read", "read"]  # the drain's read, then "no longer listed"
    assert r.prov.log == ["remove node001"]
    assert r.cloud.terminated == ["i-0001"] and "node001" not in r.sge.hosts
    events = r.journal.events("node001")[-3:]
    assert [e.state for e in events] == [NodeState.DRAINING, NodeState.DEREGISTERED, NodeState.TERMINATED]
    assert events[0].detail is not None and "unreachable in SGE for 10 min" in events[0].detail


def test_unreachable_node_with_a_job_is_kept_and_logged(cfg: Config, caplog: pytest.LogCaptureFixture) -> None:
    r = parts(cfg)
    _one_ready_node(r, 5 * 60)
    r.bal.run_pass()
    _lose(r, "node001")
    r.sge.jobs = [running(7, "node001")]  # the execd is silent, its job may still be running
    _at(r, T0 + 3 * cfg.unreachable_timeout)
    result = r.bal.run_pass()
    assert result.outcomes.repaired == [] and result.outcomes.removed == []
    assert r.prov.log == [] and r.cloud.terminated == [] and "disable node001" not in r.sge.calls
    assert "node001: SGE hasn't reached it for 30 min but lists jobs 7 there; kept" in caplog.text
    assert (r.bal.last.lost_kept, r.bal.counters.repairs) == (1, 0)  # the metrics' figures
    assert result.plan is not None and "reconciling" not in result.plan.reason  # scaling went on


def test_instance_gone_under_a_listed_job_is_kept_registered_and_scaling_goes_on(
    cfg: Config, caplog: pytest.LogCaptureFixture
) -> None:
    r = parts(cfg)
    _one_ready_node(r, 5 * 60)
    r.sge.jobs = [running(7, "node001"), pending(8, 20 * 60)]
    del r.cloud.instances["i-0001"]  # terminated outside elb, under job 7
    r.cloud.counter = 1  # instance ids are never reused
    _lose(r, "node001")  # and SGE noticed: no slot of it is free for job 8
    result = r.bal.run_pass()
    assert "node001: instance gone (terminated outside elb) but SGE lists jobs 7 there" in caplog.text
    assert result.outcomes.repaired == [] and "remove node001" not in r.prov.log
    assert result.outcomes.added == ["node002"]  # job 8 still gets a node
    r.sge.jobs = [j for j in r.sge.jobs if j.job_id != 7]  # an admin's qdel -f
    assert [x.split(" (")[0] for x in r.bal.run_pass().outcomes.repaired] == ["node001: vanished"]
    assert "node001" not in r.sge.hosts


def test_a_node_stopped_under_a_listed_job_is_kept_and_replaced_at_max_nodes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A static cluster of one node (max_nodes 1) whose machine stopped under job 7: the cloud
    lists its instance stopped, SGE no longer reaches it and lists job 7 there. The node is kept
    registered and takes no place, so job 8 gets node002 at once; once SGE lets go of job 7 the
    node is deregistered, and its stopped instance terminated the pass after."""
    r = parts(small_config(tmp_path, max_nodes=1, add_nodes_per_iteration=2, shrink="timer"))
    _one_ready_node(r, 5 * 60)
    r.sge.jobs = [running(7, "node001"), pending(8, 20 * 60)]
    r.cloud.instances["i-0001"] = dataclasses.replace(r.cloud.instances["i-0001"], state="stopped")
    r.cloud.counter = 1  # instance ids are never reused
    _lose(r, "node001")
    result = r.bal.run_pass()
    assert "node001: instance stopped outside elb but SGE lists jobs 7 there" in caplog.text
    assert "takes no place under max_nodes meanwhile" in caplog.text
    assert result.outcomes.repaired == [] and "remove node001" not in r.prov.log
    assert result.outcomes.added == ["node002"]
    assert r.bal.run_pass().outcomes.added == []  # one replacement, no more: node002 fills max_nodes
    r.sge.jobs = [j for j in r.sge.jobs if j.job_id != 7]  # SGE lets go of it (an admin's qdel -f)
    third = r.bal.run_pass()
    repaired = third.outcomes.repaired
    assert [x.split(" (")[0] for x in repaired] == ["node001: vanished"], third.summary()
    assert "node001" not in r.sge.hosts
    r.bal.run_pass()  # then its stopped instance, which costs its disks, is terminated
    assert r.cloud.terminated == ["i-0001"]


def test_node_found_lost_at_start_is_removed_only_after_a_whole_timeout(cfg: Config) -> None:
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)
    r.journal.mark_seen(T0 - 3 * cfg.unreachable_timeout, up=["node001"])  # the last elb run saw it up long ago
    _lose(r, "node001")
    assert r.bal.run_pass().outcomes.repaired == []  # this run has not watched it lost for long
    _at(r, T0 + cfg.unreachable_timeout)
    assert [x.split(" (")[0] for x in r.bal.run_pass().outcomes.repaired] == ["node001: unreachable"]


def test_a_repair_failing_pass_after_pass_stops_holding_scaling_up(
    cfg: Config, caplog: pytest.LogCaptureFixture
) -> None:
    r = parts(cfg)
    _one_ready_node(r, 5 * 60)
    r.journal.record("node001", NodeState.DRAINING, T0, detail="left draining")  # elb stopped mid-drain
    r.prov.fail_remove = {"node001"}  # and its deregistration play now fails every time
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    alarm = cfg.failed_passes_alarm
    for _ in range(alarm):  # a repair pass decides nothing: fresh data next pass
        result = r.bal.run_pass()
        assert "node001" in result.outcomes.failed and result.outcomes.added == []
        assert result.plan is not None and result.plan.reason.startswith("reconciling")
    result = r.bal.run_pass()  # the same repair failed `alarm` passes in a row: scaling goes on
    assert "node001" in result.outcomes.failed  # still tried, every pass
    assert result.outcomes.added == ["node002", "node003"], result.summary()
    assert f"ALARM: finish_drain node001 failed {alarm} passes in a row" in caplog.text
    r.prov.fail_remove = set()  # fixed: the repair goes through and the count starts again
    assert r.bal.run_pass().outcomes.removed == ["node001"]
    assert r.bal._repair_fails == {}
