"""A node the scheduler showed busy is removed only when the node itself agrees that it is idle.

Through the real Balancer, journal, reconcile and actuator, over the in-memory fakes. A
scheduler whose spool was lost, or a qmaster restarted from an old state, can list every host
with no job on it (or leave a host out of every list in one read): read as the truth, elb drains,
deregisters and terminates nodes whose jobs still run. Before it removes or stops a node a whole
read showed busy (``planner.witness_needed``), elb asks the node (``Provisioner.probe_jobs``: job
processes under sge_shepherd or slurmstepd), once for all of a pass's removals, and keeps the node
while the two disagree or the node cannot answer, unless an admin ordered its removal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.interfaces import Instance, JobProcesses, Witness
from elb.core.model import Node, NodeState
from elb.core.planner import WITNESS_HOLD, WITNESS_SILENT_HOLD, Drain, witness_needed, witness_verdict
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

POLL = 60.0
HOUR = 3600.0


@dataclass
class Rig:
    cfg: Config
    sge: FakeSge
    cloud: FakeCloud
    prov: FakeProvisioner
    journal: Journal
    bal: Balancer

    def at(self, t: float) -> None:
        self.sge.now = self.cloud.now = t
        self.bal.clock = Clock(t)

    def restart(self) -> None:
        """A new daemon over the same journal, scheduler, cloud and nodes: nothing kept in memory."""
        self.journal.close()
        self.journal = Journal(self.cfg.journal_path)
        self.bal = balancer(self.cfg, self.sge, self.cloud, self.prov, self.journal, self.bal.clock())

    def states(self) -> dict[str, NodeState]:
        return {n.name: n.state for n in self.journal.nodes(include_gone=True)}

    def detail(self, name: str) -> str:
        return self.journal.events(name)[-1].detail or ""


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config(
        {
            "state_dir": str(tmp_path),
            "poll_interval": POLL,
            "unreachable_timeout": 600,
            "policy": {"min_nodes": 0, "max_nodes": 4, "slots_per_node": 8, "shrink": "timer", "billing": "second"},
        }
    )


def rig(cfg: Config, ready: tuple[str, ...] = ("node001", "node002")) -> Rig:
    sge = FakeSge(T0)
    cloud = FakeCloud(T0)
    prov = FakeProvisioner(sge)
    journal = Journal(cfg.journal_path)
    launched = T0 - 300
    for i, name in enumerate(ready, start=1):
        iid, ip = f"i-{i:04d}", f"10.0.0.{i}"
        journal.record(name, NodeState.READY, launched, instance_id=iid, private_ip=ip, slots=8)
        cloud.instances[iid] = Instance(iid, name, "running", launched, ip, slots=8)
        sge.add_host(name)
    cloud.counter = len(ready)
    return Rig(cfg, sge, cloud, prov, journal, balancer(cfg, sge, cloud, prov, journal, T0))


def balancer(
    cfg: Config, sge: FakeSge, cloud: FakeCloud, prov: FakeProvisioner, journal: Journal, t: float
) -> Balancer:
    return Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=Clock(t))


def busy_then_hollow(r: Rig) -> None:
    """Both nodes run jobs at a whole read; then SGE lists every host and no job (its spool lost)."""
    r.sge.jobs = [running(7, "node001"), running(8, "node002")]
    assert r.bal.run_pass().ok
    r.sge.jobs = []


def test_hosts_listed_without_their_jobs_are_kept_while_the_nodes_run_job_processes(cfg: Config) -> None:
    r = rig(cfg)
    busy_then_hollow(r)
    r.prov.job_processes = {"node001", "node002"}
    for k in (1, 2):  # an hour later, and the pass after: kept each time, said each time
        r.at(T0 + k * HOUR)
        result = r.bal.run_pass()
        assert result.ok, result.summary()
        assert result.outcomes.removed == [] and sorted(result.outcomes.kept) == ["node001", "node002"]
    assert r.prov.probes == [("node001", "node002")] * 2  # one probe for the pass's removals, not one each
    assert r.cloud.terminated == [] and "remove_node.yml" not in r.prov.playbooks
    assert r.states() == {"node001": NodeState.READY, "node002": NodeState.READY}
    assert r.sge.disabled == set()  # enabled again
    assert "the node runs job processes (sge_shepherd); the two disagree" in r.detail("node001")


def test_the_nodes_agreeing_that_they_are_idle_are_removed(cfg: Config, caplog: pytest.LogCaptureFixture) -> None:
    """The usual scale-down of a node that ran jobs: said at INFO, not as a warning (nothing is
    wrong when the node confirms the scheduler)."""
    r = rig(cfg)
    busy_then_hollow(r)  # the jobs really ended
    r.at(T0 + HOUR)
    with caplog.at_level(logging.INFO):
        result = r.bal.run_pass()
    assert sorted(result.outcomes.removed) == ["node001", "node002"], result.summary()
    assert r.prov.probes == [("node001", "node002")]
    said = [rec for rec in caplog.records if "the node itself runs no job process" in rec.getMessage()]
    assert [(rec.levelno, rec.getMessage()) for rec in said] == [
        (logging.INFO, f"{name}: the node itself runs no job process: it goes") for name in ("node001", "node002")
    ]


def test_a_node_never_seen_busy_is_removed_without_asking_it(cfg: Config) -> None:
    r = rig(cfg)
    assert r.bal.run_pass().ok
    r.at(T0 + HOUR)
    result = r.bal.run_pass()
    assert sorted(result.outcomes.removed) == ["node001", "node002"], result.summary()
    assert r.prov.probes == []


def test_a_node_that_cannot_be_asked_is_kept_unless_an_admin_orders_its_removal(cfg: Config) -> None:
    r = rig(cfg)
    busy_then_hollow(r)
    r.prov.probe_fails = {"node001": "unreachable: ssh: connect to host 10.0.0.1 port 22: No route to host"}
    r.at(T0 + HOUR)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node002"] and result.outcomes.kept == ["node001"], result.summary()
    assert r.states()["node001"] is NodeState.READY
    assert "could not be asked whether job processes run there (unreachable: ssh" in r.detail("node001")
    assert "node001" in result.outcomes.failed  # said as a failure: the ALARM counts it

    r.journal.set_order("remove", "node001", on=True)
    r.at(T0 + HOUR + POLL)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"], result.summary()


def test_a_busy_host_that_leaves_every_list_is_not_terminated_while_it_runs_job_processes(cfg: Config) -> None:
    """qstat, qhost and qconf -sel all leave node002 out in one read: taken as deregistered, it
    would be terminated after unreachable_timeout."""
    r = rig(cfg, ready=("node001", "node002", "node003"))
    r.sge.jobs = [running(7, "node001"), running(8, "node002")]
    assert r.bal.run_pass().ok
    r.sge.jobs = [running(7, "node001")]
    del r.sge.hosts["node002"]
    r.prov.job_processes = {"node002"}
    for t in (T0 + POLL, T0 + 20 * 60, T0 + 30 * 60):
        r.at(t)
        result = r.bal.run_pass()
        assert result.ok, result.summary()
    assert "i-0002" not in r.cloud.terminated
    assert r.states()["node002"] is NodeState.READY
    assert "the node runs job processes" in r.detail("node002")
    assert ("node002",) in r.prov.probes
    assert not any(c.endswith("node002") for c in r.sge.calls)  # never disabled, so never enabled either


def test_the_rule_of_the_second_witness() -> None:
    node = Node("node001", NodeState.READY, T0, ready_at=T0)
    assert not witness_needed(node)
    assert witness_needed(Node("node001", NodeState.READY, T0, ready_at=T0, last_busy_at=T0 + 1))
    found = Witness("node001", JobProcesses.FOUND, "sge_shepherd-7")
    assert witness_verdict("node001", found).verdict is Drain.KEEP
    assert witness_verdict("node001", found, ordered=True).verdict is Drain.KEEP  # an order never kills a job
    assert witness_verdict("node001", Witness("node001", JobProcesses.NONE)).verdict is Drain.GO
    unknown = Witness("node001", JobProcesses.UNKNOWN, "time-out")
    assert witness_verdict("node001", unknown).verdict is Drain.KEEP
    assert witness_verdict("node001", None).verdict is Drain.KEEP
    assert witness_verdict("node001", unknown, ordered=True).verdict is Drain.GO


def adopted_busy(cfg: Config) -> Rig:
    """A first run: two tagged workers elb's journal does not know, each running 2 jobs in SGE."""
    r = rig(cfg, ready=())
    for i, name in enumerate(("node001", "node002"), start=1):
        iid = f"i-{i:04d}"
        r.cloud.instances[iid] = Instance(iid, name, "running", T0 - 5 * HOUR, f"10.0.0.{i}", slots=8)
        r.sge.add_host(name)
    r.cloud.counter = 2
    r.sge.jobs = [running(1, "node001"), running(2, "node001"), running(3, "node002"), running(4, "node002")]
    return r


REFUSED = "refused: the SSH host key node001 answers with is not the one elb holds for it"


def test_an_adopted_busy_node_whose_play_fails_is_kept_and_provisioned_again_never_removed(cfg: Config) -> None:
    r = adopted_busy(cfg)
    r.prov.fail = {"node001": REFUSED, "node002": "no SSH host key for node002"}
    for k in range(3):  # the first pass adopts; the next ones are past boot_timeout: never abandoned
        r.at(T0 + k * POLL)
        result = r.bal.run_pass()
        assert result.outcomes.removed == [] and r.cloud.terminated == [], result.summary()
        assert "remove_node.yml" not in r.prov.playbooks and not r.sge.disabled
        assert sorted(result.outcomes.failed) == ["node001", "node002"]  # said every pass
        assert r.states() == {"node001": NodeState.RUNNING, "node002": NodeState.RUNNING}
    assert r.prov.playbooks == ["add_node.yml"] * 6  # provisioned again each pass (a repair each)
    assert "SGE lists jobs 1, 2 there" in r.detail("node001")
    assert "never removed while it runs a job" in r.detail("node001")

    r.prov.fail = {}  # the admin put the right host keys in place
    r.at(T0 + 3 * POLL)
    result = r.bal.run_pass()
    assert sorted(result.outcomes.added) == ["node001", "node002"], result.summary()
    assert r.states() == {"node001": NodeState.READY, "node002": NodeState.READY}


def test_an_adopted_node_with_nothing_on_it_whose_play_fails_is_still_cleaned_up(cfg: Config) -> None:
    r = adopted_busy(cfg)
    r.sge.jobs = [j for j in r.sge.jobs if j.host == "node002"]
    r.prov.fail = {"node001": REFUSED}
    result = r.bal.run_pass()
    assert r.cloud.terminated == ["i-0001"], result.summary()
    assert r.states() == {"node001": NodeState.FAILED, "node002": NodeState.READY}


def test_an_adopted_node_seen_busy_that_cannot_be_asked_is_kept_when_its_jobs_leave_the_scheduler(
    cfg: Config,
) -> None:
    r = adopted_busy(cfg)
    r.prov.fail = {"node001": REFUSED}
    r.bal.run_pass()
    r.sge.jobs = [j for j in r.sge.jobs if j.host == "node002"]  # SGE lists nothing on node001 now
    r.prov.probe_fails = {"node001": "failed: " + REFUSED}
    r.at(T0 + POLL)
    result = r.bal.run_pass()
    assert r.cloud.terminated == [] and "remove_node.yml" not in r.prov.playbooks, result.summary()
    assert r.states()["node001"] is NodeState.RUNNING
    assert "could not be asked whether job processes run there (failed: refused" in r.detail("node001")

    r.journal.set_order("remove", "node001", on=True)  # the admin's word overrides the silence
    r.at(T0 + 2 * POLL)
    result = r.bal.run_pass()
    assert r.cloud.terminated == ["i-0001"], result.summary()


def test_a_node_kept_on_its_own_word_is_not_drained_again_every_pass(cfg: Config) -> None:
    """Kept because it runs job processes: the next passes neither disable and enable it again
    nor ask it again; it stays kept and said. Asked again once the hold has passed, or at once
    when the scheduler's view of it changes (a read shows it busy again)."""
    r = rig(cfg)
    busy_then_hollow(r)
    r.prov.job_processes = {"node001", "node002"}

    def cycles() -> list[str]:
        return [c for c in r.sge.calls if c.startswith(("disable", "enable"))]

    r.at(T0 + HOUR)
    assert r.bal.run_pass().ok
    assert len(cycles()) == 4 and len(r.prov.probes) == 1  # each disabled, found busy, enabled again
    for k in range(1, 4):
        r.at(T0 + HOUR + k * POLL)
        result = r.bal.run_pass()
        assert sorted(result.outcomes.kept) == ["node001", "node002"], result.summary()
        assert sorted(result.outcomes.failed) == ["node001", "node002"]  # still said, and counted
        assert result.outcomes.removed == []
    assert len(cycles()) == 4 and len(r.prov.probes) == 1  # no flapping, no new probe
    assert r.sge.disabled == set()

    r.sge.jobs = [running(9, "node001")]  # the scheduler shows node001 busy again: its hold ends
    r.at(T0 + HOUR + 5 * POLL)
    assert r.bal.run_pass().ok
    r.sge.jobs = []
    r.at(T0 + HOUR + 5 * POLL + cfg.policy.idle_time + POLL)  # idle long enough to be removed again
    r.bal.run_pass()
    assert r.prov.probes[1:] == [("node001",)]  # node001 asked again; node002 still held

    r.at(T0 + HOUR + WITNESS_HOLD + POLL)  # the hold has passed: node002 is asked again
    r.bal.run_pass()
    assert r.prov.probes[2:] == [("node002",)], r.prov.probes
    assert r.cloud.terminated == []


def flaps(r: Rig, name: str) -> int:
    """How many times the scheduler was told to disable or enable ``name``."""
    return sum(1 for c in r.sge.calls if c.startswith(("disable", "enable")) and c.endswith(name))


def test_a_node_kept_on_its_own_word_is_still_held_after_a_restart(cfg: Config) -> None:
    """The hold is the journal's: a new daemon over it neither disables nor asks the node again."""
    r = rig(cfg)
    busy_then_hollow(r)
    r.prov.job_processes = {"node001", "node002"}
    r.at(T0 + HOUR)
    assert r.bal.run_pass().ok
    assert flaps(r, "node001") == 2 and len(r.prov.probes) == 1

    r.restart()
    r.at(T0 + HOUR + POLL)
    dry = r.bal.run_pass(dry_run=True).planned  # what elb once --dry-run shows
    assert dry is not None and [h.node for h in dry.held] == ["node001", "node002"]
    assert any(line.startswith("kept node001: ") for line in dry.describe())
    result = r.bal.run_pass()
    assert sorted(result.outcomes.kept) == ["node001", "node002"], result.summary()
    assert flaps(r, "node001") == 2 and len(r.prov.probes) == 1  # not disabled, enabled nor asked again
    assert sorted(result.outcomes.failed) == ["node001", "node002"]  # still said, and counted
    assert "not drained again for 29 min unless the scheduler shows it busy again" in result.outcomes.failed["node001"]
    assert r.states() == {"node001": NodeState.READY, "node002": NodeState.READY}


def test_a_node_that_cannot_be_asked_is_not_disabled_again_every_pass(cfg: Config) -> None:
    """Silence keeps a node as an answer does, and the passes after neither disable it nor ask it
    again for a while; an admin's removal order still removes it at once."""
    r = rig(cfg, ready=("node001",))
    r.sge.jobs = [running(7, "node001")]
    assert r.bal.run_pass().ok
    r.sge.jobs = []
    r.prov.probe_fails = {"node001": "unreachable: ssh: connect to host 10.0.0.1 port 22: No route to host"}
    r.at(T0 + HOUR)
    result = r.bal.run_pass()
    assert result.outcomes.removed == [] and result.outcomes.kept == ["node001"], result.summary()
    assert flaps(r, "node001") == 2 and r.prov.probes == [("node001",)]
    for k in (1, 2, 3):
        r.at(T0 + HOUR + k * POLL)
        result = r.bal.run_pass()
        assert result.outcomes.kept == ["node001"] and result.outcomes.removed == [], result.summary()
        assert flaps(r, "node001") == 2 and len(r.prov.probes) == 1  # no flapping, no new probe
        assert "could not be asked" in result.outcomes.failed["node001"]
        assert "not drained again for" in result.outcomes.failed["node001"]
    assert r.sge.disabled == set()

    r.journal.set_order("remove", "node001", on=True)  # the admin's word: removed now, silence or not
    r.at(T0 + HOUR + 4 * POLL)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"], result.summary()
    assert r.prov.probes[1:] == [("node001",)]  # asked once more: an answer of job processes would keep it


def test_a_node_that_cannot_be_asked_is_asked_again_once_its_hold_has_passed(cfg: Config) -> None:
    r = rig(cfg, ready=("node001",))
    r.sge.jobs = [running(7, "node001")]
    assert r.bal.run_pass().ok
    r.sge.jobs = []
    r.prov.probe_fails = {"node001": "timed out"}
    r.at(T0 + HOUR)
    assert r.bal.run_pass().outcomes.kept == ["node001"]
    r.at(T0 + HOUR + WITNESS_SILENT_HOLD - 1)
    assert r.bal.run_pass().outcomes.kept == ["node001"]
    assert len(r.prov.probes) == 1
    r.prov.probe_fails = {}  # it answers again: no job process there
    r.at(T0 + HOUR + WITNESS_SILENT_HOLD)
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"], result.summary()
    assert len(r.prov.probes) == 2
