"""A pass reads the journal's node records once: its read check, its stats row and the planner's
inputs all read that one read (with what the pass saw applied, ``elb.core.state.seen``). What only
scaling reads (the demand, the back-off's events) is gathered only when repairs let it go on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from elb.core.config import Config
from elb.core.interfaces import Instance
from elb.core.model import Event, History, Node, NodeState, Plan
from elb.core.state import ClusterState, seen
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.stats import read_rows
from tests.unit.factories import T0, pending, running, small_config
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


class CountingJournal(Journal):
    """The real journal (SQLite in a temporary directory), counting its reads of node records."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.node_reads = 0
        self.bring_up_reads = 0

    def nodes(self, *, include_gone: bool = False) -> list[Node]:
        self.node_reads += 1
        return super().nodes(include_gone=include_gone)

    def bring_up_events(self, limit: int = 5000) -> list[Event]:
        self.bring_up_reads += 1
        return super().bring_up_events(limit)


class Recording:
    """A policy that keeps the records it was given and plans nothing."""

    name = "recording"

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.state: ClusterState | None = None

    def decide(self, state: ClusterState, history: History) -> Plan:
        self.nodes = list(state.records)
        self.state = state
        return Plan(reason="recorded")


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return small_config(tmp_path)


def _rig(cfg: Config, policy: Recording | None = None) -> tuple[Balancer, CountingJournal, FakeSge]:
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    journal = CountingJournal(cfg.journal_path)
    launched = T0 - 600
    for i in (1, 2):
        name, iid = f"node00{i}", f"i-000{i}"
        journal.record(name, NodeState.READY, launched, instance_id=iid, private_ip=f"10.0.0.{i}", slots=8)
        cloud.instances[iid] = Instance(iid, name, "running", launched, f"10.0.0.{i}")
        sge.add_host(name)
    journal.record("node003", NodeState.TERMINATED, launched, instance_id="i-0003")
    sge.jobs = [running(5, "node001"), pending(6, 30, slots=4)]
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
        policy=policy,
        clock=lambda: T0,
    )
    return bal, journal, sge


def test_a_pass_reads_the_node_records_once(cfg: Config) -> None:
    bal, journal, _ = _rig(cfg)
    journal.node_reads = 0
    result = bal.run_pass()
    assert result.ok
    assert journal.node_reads == 1
    row = list(read_rows(cfg.stats_path))[-1]
    assert (row.nodes_ready, row.nodes_booting, row.running_jobs) == (2, 0, 1)
    assert (row.pending_jobs, row.pending_slots) == (1, 4)


def test_the_planner_sees_what_the_pass_saw(cfg: Config) -> None:
    policy = Recording()
    bal, _, _ = _rig(cfg, policy)
    bal.run_pass()
    by_name = {n.name: n for n in policy.nodes}
    assert by_name["node001"].last_busy_at == T0  # the job the pass saw on it
    assert by_name["node002"].last_busy_at is None
    assert by_name["node002"].last_up_at == T0
    assert by_name["node003"].state is NodeState.TERMINATED  # the planner's inputs keep gone records


def test_the_policy_reads_the_passs_joined_state(cfg: Config) -> None:
    """The policy is handed the pass's joined state (records, the cloud's instances, SGE), read
    through the demand's view of SGE, not a join of its own from a snapshot and a record list."""
    policy = Recording()
    bal, _, _ = _rig(cfg, policy)
    bal.run_pass()
    state = policy.state
    assert state is not None and state.now == T0
    assert {i.instance_id for i in state.instances} == {"i-0001", "i-0002"}
    by_name = {m.name: m for m in state.nodes}
    assert set(by_name) == {"node001", "node002", "node003"}  # gone records too: the pass's join
    n1, n2 = by_name["node001"], by_name["node002"]
    assert n1.instance is not None and n1.instance.instance_id == "i-0001"
    assert n1.busy and [j.job_id for j in n1.jobs] == [5]
    assert n2.serves and not n2.busy and n2.idle_since is not None
    assert [j.job_id for j in state.snapshot.jobs if j.is_pending] == [6]  # the demand: the waiting job


def test_seen_is_what_the_journal_writes(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    for name, state in (("node001", NodeState.READY), ("node002", NodeState.READY), ("node003", NodeState.FAILED)):
        journal.record(name, state, T0 - 100, instance_id=f"i-{name}")
    before = tuple(journal.nodes(include_gone=True))
    busy, up = ["node001", "node003", "other"], ["node001", "node002"]
    journal.mark_seen(T0, busy=busy, up=up)
    assert seen(before, T0, busy=busy, up=up) == tuple(journal.nodes(include_gone=True))


@pytest.mark.parametrize("repair", [True, False])
def test_demand_and_back_off_are_gathered_only_when_scaling_goes_on(cfg: Config, repair: bool) -> None:
    bal, journal, sge = _rig(cfg)
    if repair:  # elb stopped mid-drain: finishing it holds scaling until the next pass
        journal.record("node002", NodeState.DRAINING, T0, detail="left draining")
    sge.calls.clear()
    result = bal.run_pass()
    assert result.ok
    assert result.plan is not None and result.plan.reason.startswith("reconciling") is repair
    assert journal.bring_up_reads == (0 if repair else 1)
    assert ("qconf site" in sge.calls) is not repair  # the site's configuration, read for the demand


def test_a_pass_keeps_where_the_jobs_that_span_hosts_run(cfg: Config) -> None:
    bal, journal, sge = _rig(cfg)
    mpi = running(7, "node001", slots=3)
    sge.jobs = [running(5, "node001"), mpi, dataclasses.replace(mpi, queue="all.q@node002", slots=1)]
    assert bal.run_pass().ok
    assert {k: {s.host: s.slots for s in v} for k, v in journal.job_hosts(T0 - 1, T0 + 1).items()} == {
        "7": {"node001": 3, "node002": 1}
    }
