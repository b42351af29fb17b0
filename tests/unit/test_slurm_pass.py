"""elb's one pass with ``scheduler: slurm``: the Slurm driver (``elb.schedulers.slurm.driver``) under the
same planner and actuator as Grid Engine, with a stand-in for Slurm's commands
(tests/unit/slurm_fakes.py), the cloud and the playbooks. What it asks of each, in which order,
and what it journals. The real slurmctld, cloud and playbooks run in tests/cluster and
tests/faults."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from elb.cli.main import main
from elb.core.config import Config, parse_config
from elb.core.exitcodes import Exit
from elb.core.interfaces import (
    HostResult,
    Instance,
    JobProcesses,
    LaunchResult,
    NodeBoot,
    NodeSpec,
    Notice,
    NoticeKind,
    Outcome,
    Witness,
)
from elb.core.model import NodeState
from elb.core.scheduler import AskKind
from elb.schedulers.slurm.config import slurm_settings
from elb.schedulers.slurm.driver import Slurm, slurm_reason
from elb.schedulers.slurm.requests import RequestKind, write
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.slurm_fakes import NOW, FakeSlurm, sjob


class Cloud:
    def __init__(self) -> None:
        self.instances: dict[str, Instance] = {}
        self.terminated: list[str] = []
        self.stopped: list[str] = []
        self.stop_calls: list[list[str]] = []
        self.launched: list[str] = []

    def launch(
        self, names: Sequence[str], groups: object = None, boot: object = None, *, stopping: object = None
    ) -> LaunchResult:
        new = [Instance(f"i-{n}", n, "running", NOW, private_ip="10.77.0.50", slots=2) for n in names]
        self.launched += names
        self.instances.update({i.instance_id: i for i in new})
        return LaunchResult(tuple(new))

    def list_workers(self) -> list[Instance]:
        return list(self.instances.values())

    def terminate(self, ids: Sequence[str]) -> None:
        for i in ids:
            self.instances.pop(i, None)
        self.terminated += ids

    def stop(self, ids: Sequence[str]) -> None:
        self.stop_calls.append(list(ids))
        for i in ids:
            self.instances[i] = Instance(i, self.instances[i].name, "stopped", NOW, "10.77.0.50", slots=2)
        self.stopped += ids

    def start(self, ids: Sequence[str]) -> LaunchResult:
        for i in ids:
            self.instances[i] = Instance(i, self.instances[i].name, "running", NOW, "10.77.0.50", slots=2)
        return LaunchResult(tuple(self.instances[i] for i in ids))

    def new_node_slots(self) -> int:
        return 2


@dataclass
class Playbooks:
    ok: bool = True
    runs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    job_processes: set[str] = field(default_factory=set)  # probe_jobs: the nodes that run slurmstepd
    probes: list[tuple[str, ...]] = field(default_factory=list)  # the nodes of each probe_jobs

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        self.runs.append((playbook, tuple(n.name for n in nodes)))
        for n in nodes:
            if on_reached is not None:
                on_reached(n.name)
        outcome = Outcome.OK if self.ok else Outcome.FAILED
        return {n.name: HostResult(n.name, outcome, "Start slurmd", "boom") for n in nodes}

    def remove_nodes(
        self, playbook: str, nodes: Sequence[NodeSpec], existing: Sequence[NodeSpec]
    ) -> dict[str, HostResult]:
        self.runs.append((playbook, tuple(n.name for n in nodes)))
        return {n.name: HostResult(n.name, Outcome.OK) for n in nodes}

    def boot_plans(self, names: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, NodeBoot]:
        raise AssertionError("these tests provision nodes by playbook, never at boot")

    def probe_jobs(self, nodes: Sequence[NodeSpec]) -> dict[str, Witness]:
        self.probes.append(tuple(n.name for n in nodes))
        found = JobProcesses.FOUND
        return {n.name: Witness(n.name, found if n.name in self.job_processes else JobProcesses.NONE) for n in nodes}


@dataclass
class Rig:
    bal: Balancer
    slurm: FakeSlurm
    cloud: Cloud
    books: Playbooks
    cfg: Config
    clock: Clock

    @property
    def journal(self) -> Journal:
        return self.bal.journal

    def ask(self, kind: RequestKind, hostlist: str, at: float | None = None) -> None:
        write(slurm_settings(self.cfg).requests, kind, hostlist, self.clock.t if at is None else at)

    def run(self, after: float = 0.0) -> str:
        self.clock.t += after
        result = self.bal.run_pass()
        assert result.ok, result.summary()
        return result.summary()

    def state(self, name: str) -> NodeState | None:
        n = self.journal.node(name)
        return None if n is None else n.state

    def scontrol(self, *what: str) -> list[tuple[str, ...]]:
        """The updates of the kinds ``what`` (none: every kind but the holds of names past
        ``max_nodes``, which the rig's six names and four nodes make at the first pass)."""
        return [c for c in self.slurm.calls if c[0] in what or (not what and c[0] != "drain_all")]


def rig(tmp: Path, *, ok: bool = True, notices: Any = None, **settings: Any) -> Rig:
    policy = {"max_nodes": 4, "slots_per_node": 2, "billing": "second", "idle_time": 3600}
    policy.update(settings.pop("policy", {}))
    if "node_groups" in settings:  # each group sets its own slots
        del policy["slots_per_node"]
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp / "state"),
            "poll_interval": 5,
            "policy": policy,
            "slurm": {"requests": str(tmp / "requests"), **settings.pop("slurm", {})},
            "cloud": {"provider": "local"},
            **settings,
        }
    )
    (tmp / "requests").mkdir()
    slurm = FakeSlurm()
    slurm.add(*(f"node00{i}" for i in range(1, 7)))
    journal = Journal(cfg.journal_path)
    clock = Clock(NOW)
    cloud, books = Cloud(), Playbooks(ok)
    bal = Balancer(
        cfg,
        scheduler=Slurm(cfg, journal, slurm),
        journal=journal,
        cloud=cloud,
        provisioner=books,
        clock=clock,
        notices=notices,
    )
    return Rig(bal, slurm, cloud, books, cfg, clock)


def test_a_resume_is_launched_addressed_provisioned_and_answered_once_ready(tmp_path: Path) -> None:
    r = rig(tmp_path)
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.run()
    assert ("address", "node001", "10.77.0.50") in r.slurm.calls
    assert r.books.runs == [("slurm_add_node.yml", ("node001",))]
    assert r.state("node001") is NodeState.READY
    assert [a.node for a in r.journal.asks()] == ["node001"]  # open until a pass sees the node ready
    r.run(5)
    assert r.journal.asks() == [] and r.journal.answered_asks()[0][3] == "ready"


def test_state_is_per_node_a_suspended_node_is_never_launched_again_by_an_older_resume(tmp_path: Path) -> None:
    """The Slurm demo under load: a resume of node[001-006] with max_nodes 4; Slurm later powers
    node001 down. Each node's latest word counts: node001 is not launched again, node005 and
    node006 are given back once, and nothing is launched after the jobs ended."""
    r = rig(tmp_path)
    r.slurm.ask(*(f"node00{i}" for i in range(1, 7)))
    r.ask(RequestKind.RESUME, "node[001-006]")
    r.run()
    assert sorted(r.cloud.launched) == ["node001", "node002", "node003", "node004"]
    assert r.scontrol("power_down_force") == [("power_down_force", "node005", "node006")]  # one give-back
    r.slurm.set_flags("node001", "idle", "powering_down")  # Slurm's SuspendProgram for node001
    r.ask(RequestKind.SUSPEND, "node001")
    for _ in range(20):  # a minute and a half of passes after the jobs ended
        r.run(5)
    assert r.state("node001") is NodeState.TERMINATED
    assert sorted(r.cloud.launched) == ["node001", "node002", "node003", "node004"]  # nothing more
    given_back = [name for c in r.scontrol("power_down_force") for name in c[1:]]
    assert given_back == ["node005", "node006"]  # each given back once, not every pass
    assert r.journal.asks() == []


def test_a_failing_scontrol_is_retried_with_back_off_never_every_pass(tmp_path: Path) -> None:
    r = rig(tmp_path, policy={"max_nodes": 1})
    r.slurm.ask("node001", "node002")
    r.ask(RequestKind.RESUME, "node[001-002]")
    r.slurm.fail = {"power_down_force"}  # scontrol times out giving a node back
    r.run()
    r.run(5)
    r.run(5)
    r.run(5)
    tries = r.scontrol("power_down_force")
    assert [c[1] for c in tries] == ["node002"]  # given back once so far: the first failed
    (ask,) = [a for a in r.journal.asks() if a.node == "node002"]
    assert ask.attempts == 1 and ask.retry_at is not None and ask.retry_at > r.clock.t
    r.clock.t = ask.retry_at
    r.run()
    assert [c[1] for c in r.scontrol("power_down_force")] == ["node002", "node002"]
    (ask,) = [a for a in r.journal.asks() if a.node == "node002"]
    assert ask.attempts == 2 and ask.retry_at is not None and ask.retry_at - r.clock.t == pytest.approx(120.0)


def test_stale_asks_are_dropped_with_why_and_never_acted_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    r = rig(tmp_path)
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001", at=NOW - 7200)  # two hours old: past ResumeTimeout (600 s)
    r.ask(RequestKind.RESUME, "node002")  # Slurm shows node002 idle+cloud+powered_down: no longer wanted
    with caplog.at_level(logging.WARNING, logger="elb"):
        r.run()
    assert r.cloud.launched == [] and r.journal.asks() == []
    answers = {n: a for n, _k, _t, a in r.journal.answered_asks()}
    assert "past Slurm's ResumeTimeout (600 s)" in answers["node001"]
    assert "no longer wants it (it shows idle+cloud+powered_down)" in answers["node002"]
    assert sum("dropped" in rec.getMessage() for rec in caplog.records) == 2


def test_a_node_whose_slurmd_never_registers_fails_and_is_given_back_under_the_back_off(tmp_path: Path) -> None:
    r = rig(tmp_path, slurm={"register_timeout": 0.5})
    r.slurm.silent.add("node001")
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.run()
    assert r.state("node001") is NodeState.FAILED
    why = r.journal.events("node001")[-1].detail or ""
    assert "did not register within 0.5 s" in why and "idle+cloud+powering_up" in why
    assert r.cloud.terminated == ["i-node001"]
    assert [b[0] for b in r.books.runs] == ["slurm_add_node.yml", "slurm_remove_node.yml"]
    r.run(5)  # the back-off holds a new launch: the node goes back to Slurm
    assert [c[1] for c in r.scontrol("power_down_force")] == ["node001"]
    assert r.cloud.launched == ["node001"] and r.journal.asks() == []


def test_a_node_elb_restarts_beside_whose_slurmd_never_registers_fails_though_slurm_gave_it_a_job(
    tmp_path: Path,
) -> None:
    """Slurm gives a waiting job the nodes it powers up: squeue shows it CONFIGURING on them, and
    sinfo their CPUs allocated, before any slurmd has registered. elb restarted while such a
    node's play ran: read as a job running there, the repair provisioned it again for ever ("kept,
    never removed while it runs a job", an ALARM every two minutes) while its slurmd, broken,
    never registered and a third of the cluster stood still. Nothing runs there: the node fails
    for its own fault, and Slurm requeues the job."""
    r = rig(tmp_path, slurm={"register_timeout": 0.5})
    r.journal.record("node001", NodeState.REQUESTED, NOW - 40)
    r.journal.record("node001", NodeState.PROVISIONING, NOW - 30, instance_id="i-node001", private_ip="10.77.0.50")
    r.cloud.instances["i-node001"] = Instance("i-node001", "node001", "running", NOW - 40, "10.77.0.50", slots=2)
    r.slurm.nodes["node001"] = replace(
        r.slurm.nodes["node001"], state="allocated", flags=frozenset(("cloud", "powering_up")), cpus_allocated=2
    )
    r.slurm.jobs.append(sjob("7", "CONFIGURING", ("node001",)))
    r.slurm.silent.add("node001")
    r.run()
    assert r.state("node001") is NodeState.FAILED
    assert "did not register within 0.5 s" in (r.journal.events("node001")[-1].detail or "")
    assert r.cloud.terminated == ["i-node001"]


def test_a_ready_node_slurm_lost_is_taken_out_and_powered_down(tmp_path: Path) -> None:
    r = rig(tmp_path)
    r.journal.record("node001", NodeState.READY, NOW - 3600, instance_id="i-1", private_ip="10.77.0.9")
    r.cloud.instances["i-1"] = Instance("i-1", "node001", "running", NOW - 3600, "10.77.0.9", slots=2)
    r.slurm.set_flags("node001", "down", "not_responding")
    r.bal._watching_since = NOW - 3600  # this run has watched it since before Slurm lost it
    r.run()
    assert r.books.runs == [("slurm_remove_node.yml", ("node001",))]
    assert [c[:2] for c in r.scontrol("power_down_force")] == [("power_down_force", "node001")]
    assert r.cloud.terminated == ["i-1"] and r.state("node001") is NodeState.TERMINATED


def test_a_busy_node_missing_from_sinfo_with_its_job_missing_from_squeue_is_kept_while_slurmstepd_runs(
    tmp_path: Path,
) -> None:
    """A slurmctld restarted from an old state (or with its spool lost) leaves node001 out of
    sinfo and its job out of squeue: read as the truth, elb would power it down and terminate
    it once unreachable_timeout passed. The node itself still runs slurmstepd: it is kept."""
    r = rig(tmp_path, unreachable_timeout=60)
    r.journal.record("node001", NodeState.READY, NOW - 3600, instance_id="i-1", private_ip="10.77.0.9")
    r.cloud.instances["i-1"] = Instance("i-1", "node001", "running", NOW - 3600, "10.77.0.9", slots=2)
    r.slurm.set_flags("node001", "allocated")
    r.slurm.jobs = [sjob("5", "RUNNING", ("node001",))]
    r.bal._watching_since = NOW - 3600
    r.run()
    del r.slurm.nodes["node001"]
    r.slurm.jobs = []
    r.books.job_processes = {"node001"}
    for _ in range(3):
        r.clock.t += 120
        r.bal.run_pass()
    assert r.books.probes == [("node001",)] * 3
    assert r.scontrol("power_down_force") == [] and r.books.runs == []
    assert r.cloud.terminated == [] and r.state("node001") is NodeState.READY
    r.books.job_processes = set()  # the job ended: the node agrees with Slurm, and goes
    r.clock.t += 120
    r.bal.run_pass()
    assert r.cloud.terminated == ["i-1"] and r.state("node001") is NodeState.TERMINATED


def _ready_idle(r: Rig, name: str = "node001", idle: float = 7200.0) -> None:
    r.journal.record(name, NodeState.READY, NOW - idle - 60, instance_id=f"i-{name}", private_ip="10.77.0.9")
    r.journal.mark_seen(NOW - idle, busy=[name], up=[name])
    r.cloud.instances[f"i-{name}"] = Instance(f"i-{name}", name, "running", NOW - idle - 60, "10.77.0.9", slots=2)
    r.slurm.set_flags(name, "idle")


def test_the_safe_drain_keeps_a_node_a_job_landed_on_and_removes_an_empty_one(tmp_path: Path) -> None:
    r = rig(tmp_path)
    _ready_idle(r)
    r.slurm.on_drain = lambda name: r.slurm.jobs.append(sjob("5", "CONFIGURING", (name,)))
    r.run()  # idle two hours at idle_time 3600: the cost rule removes it, but a job lands
    assert r.scontrol() == [("drain", "node001"), ("undrain", "node001")]
    assert r.state("node001") is NodeState.READY
    r.slurm.on_drain, r.slurm.jobs, r.slurm.calls = None, [], []
    r.journal.mark_seen(NOW - 7200, busy=[], up=["node001"])
    r.run(5)
    assert r.scontrol() == [("drain", "node001"), ("power_down_force", "node001")]
    assert r.books.runs == [("slurm_remove_node.yml", ("node001",))]
    assert r.state("node001") is NodeState.TERMINATED and r.cloud.terminated == ["i-node001"]


def test_pause_gives_the_asks_back_and_keep_holds_the_cost_rule(tmp_path: Path) -> None:
    r = rig(tmp_path)
    _ready_idle(r, "node001")
    r.journal.set_paused(NOW, "kernel update")
    r.journal.set_order("kept", "node001", on=True)
    r.slurm.ask("node002")
    r.ask(RequestKind.RESUME, "node002")
    summary = r.run()
    assert r.cloud.launched == [] and r.state("node001") is NodeState.READY
    assert [c[1] for c in r.scontrol("power_down_force")] == ["node002"]
    assert "given back node002" in summary
    answers = {n: a for n, _k, _t, a in r.journal.answered_asks()}
    assert "scaling paused by an admin (kernel update)" in answers["node002"]
    r.journal.set_paused(None)
    r.run(5)
    assert r.state("node001") is NodeState.READY  # kept by the admin: the cost rule does not remove it
    r.journal.set_order("kept", "node001", on=False)
    r.run(5)
    assert r.state("node001") is NodeState.TERMINATED


def test_an_admins_drain_removes_the_node_through_the_same_drain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = rig(tmp_path, policy={"idle_time": 86400})
    _ready_idle(r, "node001", idle=60)
    r.journal.set_order("remove", "node001", on=True)
    r.run()
    assert r.scontrol() == [("drain", "node001"), ("power_down_force", "node001")]
    assert r.state("node001") is NodeState.TERMINATED
    assert "an admin asked for its removal" in (r.journal.events("node001")[-1].detail or "")


def test_a_warm_pool_stops_an_idle_node_and_starts_it_when_slurm_asks_for_it_again(tmp_path: Path) -> None:
    r = rig(tmp_path, policy={"warm_pool": {"max_nodes": 2}})
    _ready_idle(r, "node001")
    r.run()
    assert r.state("node001") is NodeState.STOPPED and r.cloud.stopped == ["i-node001"]
    assert r.scontrol() == [("drain", "node001"), ("power_down_force", "node001")]
    r.slurm.set_flags("node001", "idle", "powered_down")
    r.slurm.calls = []
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.run(5)
    assert r.state("node001") is NodeState.READY and r.cloud.launched == []  # started again, not launched
    assert r.scontrol() == [("address", "node001", "10.77.0.50")]


def test_a_spot_interruption_drains_the_node_requeues_its_jobs_and_it_is_never_pooled(tmp_path: Path) -> None:
    class Notices:
        def __init__(self) -> None:
            self.notices: list[Notice] = []

        def poll(self) -> list[Notice]:
            out, self.notices = self.notices, []
            return out

    notices = Notices()
    r = rig(tmp_path, notices=notices, policy={"warm_pool": {"max_nodes": 2}})
    _ready_idle(r, "node001", idle=60)
    r.slurm.jobs = [sjob("7", "RUNNING", ("node001",))]
    notices.notices = [Notice(NoticeKind.INTERRUPTION, "i-node001", NOW, "spot interruption: terminate")]
    r.run()
    assert r.scontrol()[:2] == [("drain", "node001"), ("requeue", "7")]
    assert "spot-interruption" in r.journal.orders().causes["node001"][0]
    r.run(5)  # the job went back to wait: the node is idle, and goes for good
    assert r.state("node001") is NodeState.TERMINATED and r.cloud.stopped == []
    # named for the cloud that sent it (the rig's is local), not for EC2
    assert "local spot-interruption notice" in (r.journal.events("node001")[-1].detail or "")
    assert r.bal.counters.notices == {"spot-interruption": 1} and r.bal.counters.rescheduled == 1


def test_a_resume_file_names_the_jobs_in_the_ask(tmp_path: Path) -> None:
    r = rig(tmp_path)
    r.slurm.ask("node001")
    write(slurm_settings(r.cfg).requests, RequestKind.RESUME, "node001", NOW, "job 12 (partition cloud) on node001")
    r.run()
    (event,) = [e for e in r.journal.events("node001") if e.state is NodeState.REQUESTED]
    assert "job 12 (partition cloud)" in (event.detail or "")


def test_a_reason_reaches_scontrol_only_with_characters_it_takes() -> None:
    assert slurm_reason("launching backed off ($x; `rm`) 'q'") == "elb: launching backed off ( x;  rm )  q"


def test_the_dry_run_plans_the_same_pass_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``elb once --dry-run`` with scheduler: slurm (scripts stand in for sinfo, squeue, scontrol)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "sinfo": "echo 'node001|idle+cloud+powering_up|2|0/2/0/2|cloud*|none'",
        "squeue": "true",
        "scontrol": "echo 'ResumeTimeout           = 600 sec'",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    requests = tmp_path / "requests"
    requests.mkdir()
    state = tmp_path / "state"
    cfg = tmp_path / "elb.yml"
    cfg.write_text(
        f"scheduler: slurm\nstate_dir: {state}\ncloud: {{provider: local}}\npolicy: {{slots_per_node: 2}}\n"
        f"slurm: {{bin_dir: {bin_dir}, requests: {requests}}}\n"
    )
    journal = Journal(state / "journal.sqlite")
    journal.add_asks(AskKind.WANT, ["node001"], time.time(), "", time.time())  # asked now
    journal.close()
    assert main(["once", "--dry-run", "-c", str(cfg)]) == Exit.OK
    out = capsys.readouterr().out
    assert "add 1 (node001): the scheduler asked for node001" in out
    assert main(["once", "--dry-run", "--json", "-c", str(cfg)]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["add"] == [{"group": "default", "count": 1, "names": ["node001"]}]
    journal = Journal(state / "journal.sqlite")
    assert journal.nodes(include_gone=True) == [] and len(journal.asks()) == 1
    journal.close()


def test_a_slow_scontrol_holds_neither_the_passes_nor_sends_a_give_back_twice(tmp_path: Path) -> None:
    """A give-back whose scontrol takes its time runs on the executor: passes go on meanwhile
    and plan no second give-back of the node while the first is under way."""
    import threading

    from elb.service.executor import Executor

    r = rig(tmp_path, policy={"max_nodes": 1})
    r.bal.executor = Executor()
    gate = threading.Event()
    real = r.slurm.power_down

    def slow(names: Sequence[str], reason: str, *, force: bool = False, park: bool = False) -> None:
        gate.wait(30)
        real(names, reason, force=force, park=park)

    r.slurm.power_down = slow  # type: ignore[method-assign]
    r.slurm.ask("node001", "node002")
    r.ask(RequestKind.RESUME, "node[001-002]")
    try:
        r.run()
        for _ in range(5):  # passes go on while the give-back of node002 waits on scontrol
            r.run(5)
        assert "node002" in r.bal.executor.in_flight()
        assert [c[1] for c in r.scontrol("power_down_force")] == []  # not sent yet, and not queued again
    finally:
        gate.set()
        r.bal.executor.wait()
    r.run(5)
    assert [c[1] for c in r.scontrol("power_down_force")] == ["node002"]
    assert [a.node for a in r.journal.asks()] == []
    r.bal.executor.shutdown()


def test_the_asks_the_budget_holds_are_given_back_to_slurm_as_the_back_off_s_are(tmp_path: Path) -> None:
    """Two asks, a budget with room for one node (the next day pays 24 for each node up at its
    start: 30 pays for one): one is launched, the other goes back to Slurm (``scontrol
    power_down_force``) and its ask is answered with the budget's reason."""
    groups = [{"name": "compute", "slots": 2, "max_nodes": 4, "price_per_hour": 1.0}]
    r = rig(tmp_path, policy={"budget": {"amount": 30.0, "period": "day"}}, node_groups=groups)
    r.slurm.ask("node001", "node002")
    r.ask(RequestKind.RESUME, "node001,node002")
    summary = r.run()
    assert r.cloud.launched == ["node001"]
    assert [c[1] for c in r.scontrol("power_down_force")] == ["node002"]
    assert "given back node002" in summary
    answers = {n: a for n, _k, _t, a in r.journal.answered_asks()}
    assert answers["node002"].startswith("given back: budget: holding 1 of 2 launch(es)")
    # Nor does Slurm put the next job on a name the budget cannot pay for: they are held.
    assert r.scontrol("drain_all") == [("drain_all", "node003", "node004", "node005", "node006")]
    assert r.slurm.nodes["node003"].reason == "elb: held: the budget affords no more node of its group now"


def test_a_job_slurm_holds_is_held_not_unservable(tmp_path: Path) -> None:
    # A dependency or a powering-down node Slurm itself chose: Slurm holds the job whatever nodes
    # elb has. It is not demand, and not unservable either (the gauge behind a 30-minute alert).
    r = rig(tmp_path)
    r.slurm.jobs += [
        sjob("7", "PENDING", reason="Dependency"),
        sjob("8", "PENDING", reason="ReqNodeNotAvail, UnavailableNodes:node002"),
    ]
    r.run()
    assert r.bal.last.unservable_jobs == 0
    verdicts = sorted(n.describe() for n in r.bal.last.not_demand)
    assert verdicts == [
        "job 7: held: Slurm holds it: Dependency",
        "job 8: held: Slurm holds it: ReqNodeNotAvail, UnavailableNodes:node002",
    ]
    assert all(n.as_json()["held"] and not n.as_json()["unservable"] for n in r.bal.last.not_demand)


def test_a_pass_removing_three_nodes_reads_slurm_and_powers_them_down_together(tmp_path: Path) -> None:
    r = rig(tmp_path)
    names = ("node001", "node002", "node003")
    for name in names:
        _ready_idle(r, name)
    r.slurm.reads = 0
    r.run()
    assert r.books.runs == [("slurm_remove_node.yml", names)]
    # each node drained, then one power down for the three; Slurm's suspend clears the drain
    assert r.scontrol() == [*(("drain", n) for n in names), ("power_down_force", *names)]
    assert not any("drain" in r.slurm.nodes[n].flags for n in names)
    # the pass's read, the drain's read, the read before the power down, the "no longer listed" read
    assert r.slurm.reads == 4
    assert sorted(r.cloud.terminated) == [f"i-{n}" for n in names]


def test_a_failed_power_down_leaves_the_batch_drained_and_running(tmp_path: Path) -> None:
    r = rig(tmp_path)
    names = ("node001", "node002")
    for name in names:
        _ready_idle(r, name)
    r.slurm.fail = {"power_down_force"}
    r.run()
    assert r.scontrol("power_down_force") == [("power_down_force", *names)]
    assert r.scontrol("undrain") == []  # still drained: no job lands on them
    # Slurm still has them up: not terminated, said (reconcile deregisters them again)
    assert r.cloud.terminated == []
    for n in names:
        assert r.state(n) is NodeState.DEREGISTERED
        assert "drain" in r.slurm.nodes[n].flags


def test_a_warm_pool_stops_its_idle_nodes_together(tmp_path: Path) -> None:
    r = rig(tmp_path, policy={"warm_pool": {"max_nodes": 3}})
    names = ("node001", "node002", "node003")
    for name in names:
        _ready_idle(r, name)
    r.slurm.reads = 0
    r.run()
    assert r.cloud.stop_calls == [[f"i-{n}" for n in names]]  # one stop for the three
    assert r.scontrol() == [*(("drain", n) for n in names), ("power_down_force", *names)]
    assert r.slurm.reads == 3  # the pass's read, the drain's read, the read before the power down
    assert [r.state(n) for n in names] == [NodeState.STOPPED] * 3


def test_a_dry_run_without_the_clouds_workers_plans_the_scheduler_asks_as_the_pass_would(tmp_path: Path) -> None:
    """The dry run plans with the daemon's ``plan_pass`` even when the cloud's workers cannot be
    listed (they are taken as the journal has them): Slurm's asks, the back-off and the budget
    apply, and it says what the live pass would do."""
    r = rig(tmp_path)
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    r.bal.scheduler.take_requests(r.clock.t)

    def unlistable() -> list[Instance]:
        raise RuntimeError("RequestLimitExceeded")

    r.cloud.list_workers = unlistable  # type: ignore[method-assign]
    result = r.bal.run_pass(dry_run=True)
    assert result.ok
    assert result.planned is not None and result.planned.scaling is not None
    assert result.planned.scaling.add_names == ("node001",), result.planned.describe()
    assert "asked" in result.planned.scaling.add_reason, result.planned.scaling.add_reason
    assert "not read (listing the cloud's workers: RequestLimitExceeded)" in result.cloud_note
    assert r.cloud.instances == {} and r.books.runs == []


def test_no_node_slurm_is_powering_down_is_undrained(tmp_path: Path) -> None:
    """An undrain of a node powering down makes slurmctld ask it for its registration by the name
    its address was set back to (10 s a node where the name no longer resolves, slurmctld
    answering no one meanwhile: seen on slurmctld 22.05). The suspend clears the drain
    (idle_on_node_suspend); only a node powered down before its drain is undrained."""
    r = rig(tmp_path)
    r.slurm.set_flags("node001", "idle", "drain")  # up: elb powers it down
    r.slurm.set_flags("node002", "idle", "powered_down", "drain")  # powered down, then drained
    r.slurm.set_flags("node003", "idle", "powering_down", "drain")  # powering down
    r.bal.scheduler.out_of_service({n: "idle" for n in ("node001", "node002", "node003")})
    assert r.scontrol() == [
        ("power_down_force", "node001"),
        ("park", "node002", "node003"),
        ("undrain", "node002"),
    ]


def test_an_ask_left_open_under_the_back_off_is_said_once_per_ask_and_back_off_round(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = rig(tmp_path, slurm={"register_timeout": 0.5})
    r.slurm.resume_timeout_s = 7200.0  # Slurm waits long enough for the back-off and a boot
    r.slurm.silent.add("node005")
    r.slurm.ask("node005")
    r.ask(RequestKind.RESUME, "node005")
    r.run()  # node005 never registers: the launches are backed off
    assert r.state("node005") is NodeState.FAILED
    r.slurm.ask("node001")
    r.ask(RequestKind.RESUME, "node001")
    caplog.set_level(logging.INFO, logger="elb")
    for _ in range(4):
        r.run(5)
    said = [m for m in caplog.messages if m.startswith("node001: Slurm's ask left open")]
    assert len(said) == 1, said
    assert r.cloud.launched == ["node005"]  # still held: the ask stayed open all along


def test_names_past_max_nodes_are_held_from_slurm_and_reopened_when_room_frees(tmp_path: Path) -> None:
    """Slurm puts a job on any powered-down cloud node; one past max_nodes was given back, the
    job requeued with a begin time, and put on the next such node: minutes of waiting while
    elb's nodes sat idle. elb now keeps only as many names open as it may launch."""
    r = rig(tmp_path, policy={"max_nodes": 2})
    _ready_idle(r, idle=0.0)
    r.slurm.nodes["node004"] = replace(
        r.slurm.nodes["node004"], flags=frozenset({"cloud", "powered_down", "drain"}), reason="disk check"
    )
    summary = r.run()
    assert r.scontrol("drain_all") == [("drain_all", "node003", "node005", "node006")]
    held = {n for n, sn in r.slurm.nodes.items() if sn.reason.startswith("elb: held: no room within max_nodes 2")}
    assert held == {"node003", "node005", "node006"}
    assert "held from the scheduler's asks node003, node005, node006" in summary
    r.run(5)
    assert len(r.scontrol("drain_all")) == 1 and r.scontrol("undrain") == []  # held once, not every pass
    r.journal.record("node001", NodeState.TERMINATED, r.clock.t)  # removed; Slurm still powers it down
    r.slurm.set_flags("node001", "idle", "powering_down")
    r.run(5)
    # Room for two: node002 and node003, which Slurm can bring up now; node001, on its way down,
    # is held before Slurm can pick it (slurmctld drains a powering-down node).
    assert r.scontrol("undrain") == [("undrain", "node003")]
    assert r.scontrol("drain_all")[-1] == ("drain_all", "node001")
    drains = len(r.scontrol("drain_all"))
    r.slurm.set_flags("node001", "idle", "powered_down", "drain")
    r.run(5)
    assert len(r.scontrol("drain_all")) == drains and r.scontrol("undrain") == [("undrain", "node003")]  # no churn
    assert "drain" in r.slurm.nodes["node004"].flags  # an admin's drain is never undone


def test_a_refused_hold_is_said_and_the_pass_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    r = rig(tmp_path, policy={"max_nodes": 2})
    r.slurm.fail = {"drain_all"}
    r.run()
    assert "cannot hold node003, node004, node005, node006 from Slurm's asks" in caplog.text
    r.slurm.fail = set()
    r.run(5)
    assert r.scontrol("drain_all")[-1] == ("drain_all", "node003", "node004", "node005", "node006")


def test_elb_status_and_jobs_say_slurms_own_reason_for_a_job_that_is_not_demand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``elb status`` and ``elb jobs`` split the read with the driver that made it: Slurm's
    reason of each job (its squeue line), not "held by Slurm" for every one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 3600))
    scripts = {
        "sinfo": "echo 'node001|idle+cloud+powered_down|2|0/2/0/2|cloud*|none'; "
        "echo 'node002|idle+cloud+drain+powered_down|2|0/2/0/2|cloud*|elb: held: no room within max_nodes 1'",
        "squeue": f"echo '5|cloud|PENDING|BeginTime|1|1||{later}|{later}|UNLIMITED|user|a'",
        "scontrol": "echo 'ResumeTimeout           = 600 sec'",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "requests").mkdir()
    cfg = tmp_path / "elb.yml"
    cfg.write_text(
        f"scheduler: slurm\nstate_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\n"
        f"policy: {{slots_per_node: 2}}\nslurm: {{bin_dir: {bin_dir}, requests: {tmp_path / 'requests'}}}\n"
    )
    Journal(tmp_path / "state" / "journal.sqlite").close()
    assert main(["status", "-c", str(cfg)]) == Exit.OK
    out = capsys.readouterr().out
    assert "not demand, job 5" in out and "BeginTime" in out and "held by Slurm" not in out
    assert "held from Slurm's asks (no room to launch them now): node002" in out
    assert main(["jobs", "-c", str(cfg)]) == Exit.OK
    out = capsys.readouterr().out
    assert "BeginTime" in out and "held by Slurm" not in out
