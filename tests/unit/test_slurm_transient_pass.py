"""A node fails only for its own fault: Slurm that does not answer during a bring-up (a
transient error, still so after the commands' retries) leaves the node in its step, and the next
pass provisions it again. The pass, planner and actuator are the real ones; Slurm, the cloud and
the playbooks the stand-ins of tests/unit/test_slurm_pass.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from elb.core.backoff import compute
from elb.core.interfaces import Instance
from elb.core.model import NodeState
from elb.schedulers.slurm.commands import NO_INSTANCE, SlurmError, SlurmRead
from elb.schedulers.slurm.requests import RequestKind
from tests.unit.slurm_fakes import NOW, FakeSlurm, sjob
from tests.unit.test_slurm_pass import rig

SOCKET = "sinfo: exit status 1: Socket timed out on send/recv operation"


def test_an_address_slurm_does_not_take_in_time_leaves_the_node_for_the_next_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = rig(tmp_path)
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.slurm.fail, r.slurm.fail_transient = {"address"}, True  # scontrol update ... nodeaddr= times out
    with caplog.at_level(logging.WARNING, logger="elb"):
        r.run()
    assert r.state("node001") is NodeState.RUNNING  # not failed, not terminated
    assert r.cloud.terminated == [] and r.books.runs == []
    assert any("Slurm did not answer before its play" in rec.getMessage() for rec in caplog.records)
    r.slurm.fail = set()
    r.run(5)  # reconcile: launched but never provisioned
    assert r.state("node001") is NodeState.READY
    assert r.cloud.launched == ["node001"] and r.cloud.terminated == []


def test_an_address_slurm_refuses_still_fails_the_node(tmp_path: Path) -> None:
    r = rig(tmp_path)
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.slurm.fail = {"address"}  # an answer, not a time-out: the node's own fault
    r.run()
    assert r.state("node001") is NodeState.FAILED and r.cloud.terminated == ["i-node001"]


class Unreadable(FakeSlurm):
    """Slurm that stops answering reads (transiently) once a node's address is first set."""

    down: bool = False
    addressed: int = 0

    def set_addresses(self, pairs: Sequence[tuple[str, str]]) -> None:
        super().set_addresses(pairs)
        self.addressed += 1
        self.down = self.addressed == 1

    def read(self, *, mine: object = None) -> SlurmRead:
        if self.down:
            raise SlurmError(SOCKET, transient=True)
        return super().read(mine=mine)


def test_a_wait_that_ends_on_a_read_slurm_did_not_answer_leaves_the_node_for_the_next_pass(tmp_path: Path) -> None:
    r = rig(tmp_path, slurm={"register_timeout": 0.5})
    slurm = Unreadable(nodes=r.slurm.nodes)
    r.bal.scheduler.slurm = slurm  # type: ignore[attr-defined]
    r.slurm = slurm
    slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.run()
    assert r.state("node001") is NodeState.PROVISIONING  # not failed: Slurm could not be read
    assert r.cloud.terminated == [] and [b[0] for b in r.books.runs] == ["slurm_add_node.yml"]
    assert not compute(r.journal.bring_up_events(), initial=60, maximum=3600).active  # no failed round
    slurm.down = False
    r.run(5)  # Slurm answers again: reconcile provisions it again
    assert r.state("node001") is NodeState.READY
    assert r.cloud.terminated == [] and slurm.addressed == 2


class Busy(FakeSlurm):
    """slurmctld busy after a node's address is set: its next ``stalls`` reads time out
    (transiently), then it answers again, the node's slurmd registered meanwhile."""

    stalls: int = 0

    def set_addresses(self, pairs: Sequence[tuple[str, str]]) -> None:
        super().set_addresses(pairs)
        self.stalls = 3

    def read(self, *, mine: object = None) -> SlurmRead:
        if self.stalls:
            self.stalls -= 1
            raise SlurmError(SOCKET, transient=True)
        return super().read(mine=mine)


def test_a_registration_slurm_delays_past_the_timeout_by_not_answering_makes_the_node_ready(tmp_path: Path) -> None:
    """The wait counts the time Slurm answered in: reads that time out for longer than
    ``slurm.register_timeout`` (three reads a second apart, 1.5 s) do not use it up, and the node
    Slurm shows registered after them is ready in the same pass: not failed, no back-off."""
    r = rig(tmp_path, slurm={"register_timeout": 1.5})
    slurm = Busy(nodes=r.slurm.nodes)
    r.bal.scheduler.slurm = slurm  # type: ignore[attr-defined]
    r.slurm = slurm
    slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.run()
    assert r.state("node001") is NodeState.READY and slurm.stalls == 0
    assert r.cloud.terminated == [] and [b[0] for b in r.books.runs] == ["slurm_add_node.yml"]
    assert not compute(r.journal.bring_up_events(), initial=60, maximum=3600).active


def test_a_node_elb_takes_out_is_parked_at_the_address_of_no_host(tmp_path: Path) -> None:
    """slurmctld keeps no address of an instance that is gone: the power down sets nodeaddr to
    NO_INSTANCE and nodehostname to the node's name, and so does one command for a node Slurm
    powers down itself (its SuspendProgram)."""
    r = rig(tmp_path)
    r.slurm.ask("node001", "node002")
    r.ask(RequestKind.RESUME, "node[001-002]")
    r.run()
    assert r.slurm.addresses == {"node001": "10.77.0.50", "node002": "10.77.0.50"}
    r.slurm.set_flags("node002", "idle", "powering_down")  # Slurm's SuspendProgram for node002
    r.ask(RequestKind.SUSPEND, "node[001-002]")
    r.run(5)
    assert r.state("node001") is NodeState.TERMINATED and r.state("node002") is NodeState.TERMINATED
    assert r.slurm.addresses == {"node001": NO_INSTANCE, "node002": NO_INSTANCE}
    assert ("park", "node002") in r.slurm.calls


def test_a_node_given_back_that_elb_never_launched_is_parked_before_its_power_down(tmp_path: Path) -> None:
    """The give-back requeues the job Slurm allocated to the node, and slurmctld sends the kill to
    the node's address: parked, the send fails at once instead of resolving the node's name (10 s
    a name on Debian's slurmctld, which answers no command meanwhile)."""
    r = rig(tmp_path, policy={"max_nodes": 1})
    r.slurm.ask("node001", "node002")
    r.ask(RequestKind.RESUME, "node[001-002]")
    r.run()
    assert r.scontrol("park", "power_down_force") == [
        ("park", "node001"),  # launched: parked until its instance's address is set
        ("park", "node002"),
        ("power_down_force", "node002"),
    ]
    assert r.slurm.addresses == {"node001": "10.77.0.50", "node002": NO_INSTANCE}
    assert [c[:2] for c in r.scontrol("address")] == [("address", "node001")]  # set once


def test_a_resume_fail_for_a_node_slurm_shows_running_a_job_is_answered_once_not_flapped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Slurm's ResumeFailProgram named a node elb has ready and squeue shows running a job (its
    slurmd registered late). Taking it out would drain it, find the job, undrain it, and do it
    all again every pass while the ask stays open: the ask is answered once, the node kept."""
    r = rig(tmp_path)
    r.journal.record("node001", NodeState.READY, NOW - 600, instance_id="i-node001", private_ip="10.77.0.9")
    r.journal.mark_seen(NOW - 60, busy=["node001"], up=["node001"])
    r.cloud.instances["i-node001"] = Instance("i-node001", "node001", "running", NOW - 600, "10.77.0.9", slots=2)
    r.slurm.set_flags("node001", "allocated")
    r.slurm.jobs.append(sjob("5", "RUNNING", ("node001",)))
    r.ask(RequestKind.RESUME_FAIL, "node001")
    with caplog.at_level(logging.WARNING, logger="elb"):
        for _ in range(4):
            r.run(5)
    assert r.scontrol("drain", "undrain", "power_down_force") == []  # never drained, never flapped
    assert r.state("node001") is NodeState.READY and r.cloud.terminated == []
    assert r.journal.asks() == []
    (answer,) = [a for n, _k, _t, a in r.journal.answered_asks() if n == "node001"]
    assert "running job 5" in answer and "kept" in answer
    assert sum("running job 5" in rec.getMessage() for rec in caplog.records) == 1


def test_the_addresses_of_a_burst_go_in_one_update_and_a_refusal_fails_only_its_own_node(tmp_path: Path) -> None:
    names = [f"node{i:03d}" for i in range(1, 5)]
    r = rig(tmp_path)  # max_nodes 4
    r.slurm.ask(*names)
    for name in names:
        r.ask(RequestKind.RESUME, name)
    r.slurm.refuse_address = {"node003"}  # Slurm answers: this node's update is refused
    r.run()
    assert r.slurm.address_batches[0] == tuple(names)  # one update for the four
    assert r.slurm.address_batches[1:] == [(n,) for n in names]  # then each alone
    assert r.state("node003") is NodeState.FAILED
    assert [r.state(n) for n in names if n != "node003"] == [NodeState.READY] * 3


def test_the_nodes_a_pass_launches_are_parked_before_its_give_backs_and_their_addresses(tmp_path: Path) -> None:
    """A job Slurm put on two nodes, one elb launches and one it gives back: the give-back
    requeues the job and slurmctld sends its kill to both, the launched one too, whose instance
    has no address in Slurm yet. Parked in the pass, before the give-back and the launch start,
    that send looks no name up either; the node's address is set as it comes up."""
    r = rig(tmp_path, policy={"max_nodes": 1})
    r.slurm.ask("node001", "node002")
    r.ask(RequestKind.RESUME, "node[001-002]")
    r.run()
    order = [c[:2] for c in r.scontrol("park", "power_down_force", "address")]
    assert order.index(("park", "node001")) < order.index(("power_down_force", "node002"))
    assert order.index(("park", "node001")) < order.index(("address", "node001"))
    assert r.slurm.addresses == {"node001": "10.77.0.50", "node002": NO_INSTANCE}
