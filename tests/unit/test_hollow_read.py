"""Hollow reads of SGE through the real Balancer, journal and reconcile, over the in-memory fakes.

A hollow read: qstat and qhost answer well-formed and exit 0, but list no job and no host (a
qmaster restarting, a wrapper that lost its output). Read as the truth, every managed node is
"absent from SGE, no job on it": after ``unreachable_timeout`` elb would drain and terminate
nodes that run jobs, then launch new ones to reach ``min_nodes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.interfaces import Instance
from elb.core.model import NodeState, Snapshot
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

POLL = 60.0


@dataclass
class HollowSge(FakeSge):
    """``FakeSge`` whose qstat and qhost can answer a hollow read (``hollow``), or leave some hosts
    out of it (``missing``); ``qconf -sel`` lists every registered host, unless ``hollow_sel``:
    then it answers as SGE with no execution host (``no execution host defined``)."""

    hollow: bool = False
    missing: set[str] = field(default_factory=set)
    hollow_sel: bool = False

    def configured_exec_hosts(self) -> frozenset[str]:
        listed = super().configured_exec_hosts()
        return frozenset() if self.hollow_sel else listed

    def read_snapshot(self) -> Snapshot:
        if self.hollow:
            self.calls.append("read (hollow)")
            return Snapshot(self.now, (), ())
        whole = super().read_snapshot()
        if not self.missing:
            return whole
        hosts = tuple(h for h in whole.hosts if h.name not in self.missing)
        return Snapshot(whole.now, tuple(j for j in whole.jobs if j.host not in self.missing), hosts)


@dataclass
class Rig:
    cfg: Config
    sge: HollowSge
    cloud: FakeCloud
    prov: FakeProvisioner
    journal: Journal
    bal: Balancer

    def at(self, t: float) -> None:
        self.sge.now = self.cloud.now = t
        self.bal.clock = Clock(t)

    def restart(self) -> None:
        """elb restarts: a new Balancer on the same journal (it has seen no read of SGE yet)."""
        self.bal = Balancer(
            self.cfg,
            scheduler=GridEngine(self.cfg, self.sge),
            journal=self.journal,
            cloud=self.cloud,
            provisioner=self.prov,
            clock=self.bal.clock,
        )


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config(
        {
            "state_dir": str(tmp_path),
            "poll_interval": POLL,
            "unreachable_timeout": 600,
            "policy": {"min_nodes": 2, "max_nodes": 4, "slots_per_node": 8},
        }
    )


def rig(cfg: Config, ready: tuple[str, ...] = ("node001", "node002"), age: float = 5 * 60) -> Rig:
    sge = HollowSge(T0)
    cloud = FakeCloud(T0)
    prov = FakeProvisioner(sge)
    journal = Journal(cfg.journal_path)
    launched = T0 - age
    for i, name in enumerate(ready, start=1):
        iid, ip = f"i-{i:04d}", f"10.0.0.{i}"
        journal.record(name, NodeState.READY, launched, instance_id=iid, private_ip=ip, slots=8)
        cloud.instances[iid] = Instance(iid, name, "running", launched, ip, slots=8)
        sge.add_host(name)
    cloud.counter = len(ready)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=Clock(T0))
    return Rig(cfg, sge, cloud, prov, journal, bal)


def states(r: Rig) -> dict[str, NodeState]:
    return {n.name: n.state for n in r.journal.nodes(include_gone=True)}


def test_hollow_reads_past_unreachable_timeout_remove_nothing_and_launch_nothing(cfg: Config) -> None:
    r = rig(cfg)
    r.sge.jobs = [running(7, "node001"), running(8, "node002", slots=4)]
    assert r.bal.run_pass().ok
    r.sge.hollow = True
    t = T0
    failed = []
    while t < T0 + 2 * cfg.unreachable_timeout:  # twice the time-out: long enough to remove and relaunch
        t += POLL
        r.at(t)
        failed.append(r.bal.run_pass())
    assert not any(p.ok for p in failed)
    assert failed[-1].error == (
        "reading SGE: partial read: node001, node002 vanished from qhost but SGE still has them configured "
        "(qconf -sel); jobs 7, 8 ran there; no action"
    )
    assert r.prov.log == [] and r.cloud.terminated == [] and r.cloud.counter == 2  # nothing removed, nothing launched
    assert "disable node001" not in r.sge.calls and "disable node002" not in r.sge.calls
    assert states(r) == {"node001": NodeState.READY, "node002": NodeState.READY}
    assert r.bal.failed_in_a_row == len(failed)  # the ALARM counts these passes

    r.sge.hollow = False  # SGE answers whole again: the jobs were never touched, nothing is lost
    r.at(t + POLL)
    result = r.bal.run_pass()
    assert result.ok, result.summary()
    assert result.outcomes.repaired == [] and result.outcomes.removed == [] and result.outcomes.added == []
    assert [j.job_id for j in r.sge.jobs] == [7, 8]
    assert states(r) == {"node001": NodeState.READY, "node002": NodeState.READY}


def test_a_hollow_read_right_after_a_restart_is_refused_on_the_journal_alone(cfg: Config) -> None:
    r = rig(cfg)
    r.sge.jobs = [running(7, "node001")]
    r.sge.hollow = True
    r.at(T0 + 2 * cfg.unreachable_timeout)
    r.restart()
    result = r.bal.run_pass()
    assert not result.ok
    assert "partial read: node001, node002 vanished from qhost but SGE still has them configured" in (
        result.error or ""
    )
    assert r.prov.log == [] and r.cloud.terminated == [] and r.cloud.counter == 2


def test_a_read_missing_one_host_is_refused_and_names_it(cfg: Config) -> None:
    r = rig(cfg)
    r.sge.jobs = [running(7, "node001"), running(9, "node002")]
    assert r.bal.run_pass().ok
    r.sge.missing = {"node002"}
    r.at(T0 + 2 * cfg.unreachable_timeout)
    result = r.bal.run_pass()
    assert result.error == (
        "reading SGE: partial read: node002 vanished from qhost but SGE still has it configured "
        "(qconf -sel); job 9 ran there; no action"
    )
    assert r.prov.log == [] and r.cloud.terminated == []


def test_an_honest_empty_cluster_is_read_and_grows_without_asking_qconf(cfg: Config) -> None:
    r = rig(cfg, ready=())
    r.sge.jobs = [pending(1, 20 * 60, slots=8, tasks=3)]
    result = r.bal.run_pass()
    assert result.ok, result.summary()
    assert result.outcomes.added[:1] == ["node001"]  # the job gets nodes
    assert "qconf -sel" not in r.sge.calls


def test_a_node_elb_removed_itself_is_not_taken_for_a_vanished_one(tmp_path: Path) -> None:
    cfg = parse_config({"state_dir": str(tmp_path), "policy": {"shrink": "timer", "slots_per_node": 8}})
    r = rig(cfg, ready=("node001",), age=50 * 60)  # idle near the end of its hour
    removed = r.bal.run_pass()
    assert removed.outcomes.removed == ["node001"], removed.summary()
    r.sge.calls.clear()
    r.at(T0 + POLL)
    result = r.bal.run_pass()
    assert result.ok, result.summary()
    assert "qconf -sel" not in r.sge.calls  # the journal says elb took it out: no question to ask


def test_a_host_deregistered_outside_elb_is_confirmed_gone_by_qconf(cfg: Config) -> None:
    r = rig(cfg)
    assert r.bal.run_pass().ok
    del r.sge.hosts["node002"]  # an admin's qconf -de: it leaves qhost and qconf -sel together
    r.at(T0 + POLL)
    result = r.bal.run_pass()
    assert result.ok, result.summary()
    assert "qconf -sel" in r.sge.calls
    assert states(r)["node002"] is NodeState.READY  # reconcile's unreachable_timeout takes it from here


HOLLOW_BOTH = (
    "reading SGE: partial read: node001, node002 vanished from qhost, every host elb knows to be up, and "
    "qconf -sel lists no execution host either; jobs 7, 8 ran there; both can answer empty the same way "
    "(a qmaster restarting, or started on an empty spool), so neither confirms the other; no action"
)


def test_hollow_qhost_and_hollow_qconf_past_unreachable_timeout_remove_nothing(cfg: Config) -> None:
    """qstat, qhost and qconf -sel all answer empty for 30 minutes while the nodes run jobs: no
    read of SGE confirms another that can be hollow the same way, so every pass fails and nothing
    is drained, terminated or launched."""
    r = rig(cfg)
    r.sge.jobs = [running(7, "node001"), running(8, "node002", slots=4)]
    assert r.bal.run_pass().ok
    r.sge.hollow = r.sge.hollow_sel = True
    t = T0
    failed = []
    while t < T0 + 30 * 60:
        t += POLL
        r.at(t)
        failed.append(r.bal.run_pass())
    assert [p.error for p in failed] == [HOLLOW_BOTH] * len(failed)
    assert r.prov.log == [] and r.cloud.terminated == [] and r.cloud.counter == 2
    assert not any(c.startswith(("disable", "reschedule")) for c in r.sge.calls)
    assert states(r) == {"node001": NodeState.READY, "node002": NodeState.READY}
    assert r.sge.calls[-2:] == ["read (hollow)", "qconf -sel"]  # no second read: it could not confirm

    r.sge.hollow = r.sge.hollow_sel = False
    r.at(t + POLL)
    result = r.bal.run_pass()
    assert result.ok, result.summary()
    assert result.outcomes.removed == [] and result.outcomes.added == []
    assert [j.job_id for j in r.sge.jobs] == [7, 8]


def test_every_host_gone_with_sge_empty_too_is_refused_even_when_true(cfg: Config) -> None:
    """SGE really has no execution host left (every host deregistered): elb cannot tell that from
    a hollow answer, so it refuses until SGE lists a host again."""
    r = rig(cfg)
    assert r.bal.run_pass().ok
    r.sge.hosts.clear()
    r.at(T0 + POLL)
    result = r.bal.run_pass()
    assert not result.ok
    assert "qconf -sel lists no execution host either" in (result.error or "")
    assert r.sge.calls[-2:] == ["read", "qconf -sel"]
    assert r.prov.log == [] and r.cloud.terminated == []


def test_every_host_elb_knew_gone_is_confirmed_by_qconf_listing_the_others(cfg: Config) -> None:
    """Every host elb knew left qhost and qconf -sel, which both list the hosts SGE keeps: not
    hollow (a hollow answer lists nothing), so the hosts were deregistered."""
    r = rig(cfg)
    assert r.bal.run_pass().ok
    r.sge.add_host("master")
    r.at(T0 + POLL)
    assert r.bal.run_pass().ok
    del r.sge.hosts["node001"], r.sge.hosts["node002"]
    r.at(T0 + 2 * POLL)
    result = r.bal.run_pass()
    assert result.ok, result.summary()
    assert r.sge.calls[-2:] == ["read", "qconf -sel"]


def test_every_host_gone_from_qhost_while_qconf_lists_others_only_is_refused(cfg: Config) -> None:
    """qhost lists nothing, qconf -sel a host qhost leaves out: qhost is hollow, whatever qconf says."""
    r = rig(cfg)
    r.sge.jobs = [running(7, "node001")]
    assert r.bal.run_pass().ok
    r.sge.hollow = True
    del r.sge.hosts["node001"], r.sge.hosts["node002"]
    r.sge.add_host("master")  # qconf -sel lists only a host elb never saw
    r.at(T0 + POLL)
    result = r.bal.run_pass()
    assert not result.ok
    assert "qconf -sel lists master, which qhost does not" in (result.error or "")
    assert r.prov.log == [] and r.cloud.terminated == []
