"""The Slurm pass's shell (elb.slurm.balancer) with stand-ins for Slurm's commands, the cloud and
the playbooks: what it asks of each, in which order, and what it journals. The real commands,
cloud and playbooks run in tests/cluster/test_slurm_e2e.py and tests/faults/test_slurm_faults.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from elb.actuator import Outcomes
from elb.cli import main
from elb.config import Config, SgeConfig, SlurmConfig, parse_config
from elb.exitcodes import Exit
from elb.interfaces import HostResult, Instance, LaunchResult, NodeSpec, Outcome, SchedulerNodes
from elb.journal import Journal
from elb.model import NodeState
from elb.sge.commands import SgeCommands
from elb.slurm.balancer import SlurmBalancer, slurm_reason
from elb.slurm.commands import SlurmCommands, SlurmRead
from elb.slurm.parse import SlurmJob, SlurmNode
from elb.slurm.requests import RequestKind, write

NOW = 1_000_000.0


def node(name: str, state: str = "idle", *flags: str, alloc: int = 0) -> SlurmNode:
    return SlurmNode(name, state, frozenset(("cloud", *flags)), 2, alloc, ("cloud",), "none")


@dataclass
class FakeSlurm:
    """Stands in for squeue/sinfo/scontrol: a read it returns, and the updates asked of it."""

    reads: list[SlurmRead]
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def read(self) -> SlurmRead:
        return self.reads[0] if len(self.reads) == 1 else self.reads.pop(0)

    def set_address(self, name: str, address: str) -> None:
        self.calls.append(("address", name, address))

    def drain(self, name: str, reason: str) -> None:
        self.calls.append(("drain", name))

    def undrain(self, name: str) -> None:
        self.calls.append(("undrain", name))

    def power_down(self, names: Sequence[str], reason: str, *, force: bool = False) -> None:
        self.calls.append(("power_down_force" if force else "power_down_asap", *names, reason))


class FakeCloud:
    def __init__(self) -> None:
        self.instances: list[Instance] = []
        self.terminated: list[str] = []

    def launch(self, names: Sequence[str], groups: object = None) -> LaunchResult:
        new = [Instance(f"i-{n}", n, "running", NOW, private_ip="10.77.0.50", slots=2) for n in names]
        self.instances += new
        return LaunchResult(tuple(new))

    def list_workers(self) -> list[Instance]:
        return [i for i in self.instances if i.instance_id not in self.terminated]

    def terminate(self, ids: Sequence[str]) -> None:
        self.terminated += ids

    def new_node_slots(self) -> int:
        return 2


@dataclass
class Report:
    ok: bool

    def for_hosts(self, names: Sequence[str]) -> dict[str, HostResult]:
        return {n: HostResult(n, Outcome.OK if self.ok else Outcome.FAILED, "Start slurmd", "boom") for n in names}


@dataclass
class FakePlaybooks:
    ok: bool = True
    runs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def run(
        self,
        playbook: str,
        *,
        workers: Sequence[NodeSpec] = (),
        new_nodes: Sequence[NodeSpec] = (),
        old_nodes: Sequence[NodeSpec] = (),
        on_reached: Callable[[str], None] | None = None,
    ) -> Report:
        self.runs.append((playbook, tuple(n.name for n in (*new_nodes, *old_nodes))))
        for n in new_nodes:
            if on_reached is not None:
                on_reached(n.name)
        return Report(self.ok or bool(old_nodes))


def setup(
    tmp: Path, reads: list[SlurmRead], *, ok: bool = True, register_timeout: float = 120.0
) -> tuple[SlurmBalancer, FakeSlurm, FakeCloud, FakePlaybooks, Config]:
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp / "state"),
            "policy": {"max_nodes": 4, "slots_per_node": 2, "billing": "second", "idle_time": 3600},
            "slurm": {"requests": str(tmp / "requests"), "register_timeout": register_timeout},
            "cloud": {"provider": "local"},
        }
    )
    (tmp / "requests").mkdir()
    slurm, cloud, books = FakeSlurm(reads), FakeCloud(), FakePlaybooks(ok)
    bal = SlurmBalancer(
        cfg,
        slurm=slurm,
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=books,
        clock=lambda: NOW,  # type: ignore[arg-type]
    )
    return bal, slurm, cloud, books, cfg


def test_a_resume_request_is_launched_addressed_provisioned_and_closed(tmp_path: Path) -> None:
    read = SlurmRead((), (node("node001", "idle", "powering_up"), node("node002", "idle", "powered_down")))
    # After the play the bring-up reads Slurm until the node's slurmd has registered.
    registered = SlurmRead((), (node("node001", "idle"), node("node002", "idle", "powered_down")))
    bal, slurm, _cloud, books, cfg = setup(tmp_path, [read, read, registered])
    write(cfg.slurm.requests, RequestKind.RESUME, "node001", NOW - 1)
    result = bal.run_pass()
    assert result.ok, result.summary()
    assert ("address", "node001", "10.77.0.50") in slurm.calls
    assert books.runs == [("slurm_add_node.yml", ("node001",))]
    n = bal.journal.node("node001")
    assert n is not None and n.state is NodeState.READY and n.instance_id == "i-node001"
    assert slurm.reads == [registered]  # the pass's read, then two by the bring-up
    assert bal.journal.slurm_requests(open_only=True) != []  # closed by the next pass, which sees it ready
    assert bal.run_pass().ok and bal.journal.slurm_requests(open_only=True) == []


def test_a_node_whose_slurmd_never_registers_fails_and_the_next_pass_gives_it_back(tmp_path: Path) -> None:
    # The add play succeeded, but Slurm goes on showing the node powering up: without a bound the
    # node (and the job that waits for it) would be held until Slurm's ResumeTimeout.
    read = SlurmRead((), (node("node001", "alloc", "powering_up"),))
    bal, slurm, cloud, books, cfg = setup(tmp_path, [read], register_timeout=0.5)
    write(cfg.slurm.requests, RequestKind.RESUME, "node001", NOW - 1)
    assert bal.run_pass().ok
    n = bal.journal.node("node001")
    assert n is not None and n.state is NodeState.FAILED
    why = bal.journal.events("node001")[-1].detail or ""
    assert "did not register within 0.5 s" in why and "alloc+cloud+powering_up" in why
    assert cloud.terminated == ["i-node001"]
    assert [r[0] for r in books.runs] == ["slurm_add_node.yml", "slurm_remove_node.yml"]
    bal.run_pass()  # a failed bring-up: the back-off holds a new launch, the node goes back to Slurm
    assert [c[:2] for c in slurm.calls if c[0].startswith("power_down")] == [("power_down_force", "node001")]
    assert len(cloud.instances) == 1


def test_a_failed_bring_up_terminates_the_node_and_the_next_pass_gives_it_back(tmp_path: Path) -> None:
    read = SlurmRead((), (node("node001", "idle", "powering_up"),))
    bal, slurm, cloud, books, cfg = setup(tmp_path, [read], ok=False)
    write(cfg.slurm.requests, RequestKind.RESUME, "node001", NOW - 1)
    bal.run_pass()
    n = bal.journal.node("node001")
    assert n is not None and n.state is NodeState.FAILED
    assert cloud.terminated == ["i-node001"]
    assert [r[0] for r in books.runs] == ["slurm_add_node.yml", "slurm_remove_node.yml"]
    bal.run_pass()  # the back-off holds a new launch: the node goes back to Slurm
    assert [c[:2] for c in slurm.calls if c[0].startswith("power_down")] == [("power_down_force", "node001")]
    assert bal.journal.slurm_requests(open_only=True) == []
    assert len(cloud.instances) == 1  # not launched again


def test_a_ready_node_slurm_lost_is_given_back_and_taken_out(tmp_path: Path) -> None:
    lost = SlurmRead((), (node("node001", "down", "not_responding"),))
    bal, slurm, cloud, books, _cfg = setup(tmp_path, [lost])
    bal.journal.record("node001", NodeState.READY, NOW - 3600, instance_id="i-1", private_ip="10.77.0.9")
    bal.watched_since = NOW - 3600  # this run has watched it since before Slurm lost it
    assert bal.run_pass().ok
    assert [c[:2] for c in slurm.calls] == [("power_down_force", "node001")]
    assert books.runs == [("slurm_remove_node.yml", ("node001",))] and cloud.terminated == ["i-1"]
    n = bal.journal.node("node001")
    assert n is not None and n.state is NodeState.FAILED


def test_the_drain_keeps_a_node_a_job_landed_on_and_powers_down_an_empty_one(tmp_path: Path) -> None:
    idle = SlurmRead((), (node("node001"),))
    job = SlurmJob("5", "cloud", "CONFIGURING", "None", 1, 2, ("node001",), NOW, None, None, "u", "j")
    landed = SlurmRead((job,), (node("node001", "idle", "drain"),))
    bal, slurm, _cloud, _books, _cfg = setup(tmp_path, [landed])
    bal.journal.record("node001", NodeState.READY, NOW - 100, instance_id="i-1", private_ip="10.77.0.9")
    out = Outcomes()
    bal.drain("node001", "idle 10 min", out)
    assert out.kept == ["node001"] and slurm.calls == [("drain", "node001"), ("undrain", "node001")]
    n = bal.journal.node("node001")
    assert n is not None and n.state is NodeState.READY and n.updated_at == NOW
    slurm.reads, slurm.calls = [idle], []
    out = Outcomes()
    bal.drain("node001", "idle 10 min", out)
    assert out.kept == [] and slurm.calls == [("drain", "node001"), ("power_down_asap", "node001", "elb: idle 10 min")]
    n = bal.journal.node("node001")
    assert n is not None and n.state is NodeState.DRAINING


def test_a_reason_reaches_scontrol_only_with_characters_it_takes() -> None:
    assert slurm_reason("launching backed off ($x; `rm`) 'q'") == "elb: launching backed off ( x;  rm )  q"


def test_the_dry_run_plans_the_slurm_pass_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``elb once --dry-run`` with scheduler: slurm (scripts stand in for sinfo and squeue)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, out in (("sinfo", "node001|idle+cloud+powering_up|2|0/2/0/2|cloud*|none"), ("squeue", "")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\necho '{out}'\n")
        script.chmod(0o755)
    requests = tmp_path / "requests"
    requests.mkdir()
    state = tmp_path / "state"
    cfg = tmp_path / "elb.yml"
    cfg.write_text(
        f"scheduler: slurm\nstate_dir: {state}\ncloud: {{provider: local}}\n"
        f"slurm: {{bin_dir: {bin_dir}, requests: {requests}}}\n"
    )
    journal = Journal(state / "journal.sqlite")
    journal.add_slurm_request("resume", "node001", NOW, "x.json", NOW)
    journal.close()
    assert main(["once", "--dry-run", "-c", str(cfg)]) == Exit.OK
    out = capsys.readouterr().out
    assert "launch node001: Slurm asked for node001" in out
    assert main(["once", "--dry-run", "--json", "-c", str(cfg)]) == Exit.OK
    assert json.loads(capsys.readouterr().out)["plan"] == [
        "launch node001: Slurm asked for node001",
        "policy: no idle node is due for removal",
    ]
    journal = Journal(state / "journal.sqlite")
    assert journal.nodes(include_gone=True) == [] and len(journal.slurm_requests(open_only=True)) == 1
    journal.close()


def test_both_schedulers_give_the_drain_the_same_neutral_interface(tmp_path: Path) -> None:
    """SGE's and Slurm's adapters are ``SchedulerNodes``; Slurm's answers in neutral values
    (scripts stand in for sinfo, squeue and scontrol: the real ones run in the cluster tests)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "scontrol.log"
    scripts = {
        "sinfo": "echo 'node001|mixed+cloud|2|1/1/0/2|cloud*|none'",
        "squeue": "echo '7|cloud|RUNNING|None|1|1|node001|2026-11-24T16:01:06|2026-11-24T16:01:10|UNLIMITED|u|j'",
        "scontrol": f'echo "$@" >> {log}',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    slurm = SlurmCommands(SlurmConfig(bin_dir=bin_dir))
    assert isinstance(slurm, SchedulerNodes) and isinstance(SgeCommands(SgeConfig()), SchedulerNodes)
    snap = slurm.read_snapshot()
    host = snap.host("node001")
    assert host is not None and (host.slots_total, host.slots_used) == (2, 1)
    assert [(j.job_id, j.state, j.host) for j in slurm.jobs_on("node001")] == [(7, "r", "node001")]
    assert slurm.jobs_on("node002") == ()
    slurm.disable_host("node001")
    slurm.enable_host("node001")
    assert log.read_text().splitlines() == [
        "update nodename=node001 state=DRAIN reason=elb: draining",
        "update nodename=node001 state=UNDRAIN",
    ]
