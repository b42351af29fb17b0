"""Boot timelines: the pure computation, the journal's once-only recording, the migration that
adds them to an older journal, the actuator's steps, and the step histogram."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from elb.core.config import Config, parse_config
from elb.core.model import NodeState
from elb.core.timeline import DAY, DURATION_NAMES, Step, Timeline, summarize, timeline_of
from elb.schedulers.sge.driver import GridEngine
from elb.service import migrations
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import PassMetrics
from tests.unit.factories import T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

FULL = {
    Step.REQUESTED: 100.0,
    Step.RUNNING: 140.0,
    Step.PROVISIONING: 141.0,
    Step.REACHABLE: 150.0,
    Step.PROVISIONED: 260.0,
    Step.REGISTERED: 290.0,
    Step.FIRST_JOB: 350.0,
}


# -- the pure computation ----------------------------------------------------------------------
def test_durations_run_from_one_step_to_the_next() -> None:
    t = Timeline("node001", 100.0, FULL)
    assert t.durations() == {"boot": 40.0, "ssh": 10.0, "provision": 110.0, "register": 30.0, "first_job": 60.0}


def test_a_step_not_reached_or_without_a_time_leaves_its_durations_unknown() -> None:
    t = Timeline("node001", 100.0, {Step.REQUESTED: 100.0, Step.RUNNING: 140.0, Step.REGISTERED: None})
    assert t.durations() == {"boot": 40.0, "ssh": None, "provision": None, "register": None, "first_job": None}
    assert t.reached(Step.REGISTERED) and t.at(Step.REGISTERED) is None
    assert not t.reached(Step.FIRST_JOB)


def test_a_step_seen_before_the_playbook_ended_lasts_0_never_less() -> None:
    t = Timeline("node001", 100.0, {Step.PROVISIONED: 260.0, Step.REGISTERED: 250.0})
    assert t.duration("register") == 0.0


def test_an_unknown_duration_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown boot step duration 'bot'"):
        Timeline("node001", 0.0).duration("bot")


def test_timeline_of_rows_orders_steps_skips_unknown_names_and_keeps_the_earliest() -> None:
    rows = [("first_job", 350.0), ("warp", 1.0), ("requested", 100.0), ("requested", 90.0), ("registered", None)]
    t = timeline_of("node001", 100.0, rows)
    assert list(t.steps) == [Step.REQUESTED, Step.REGISTERED, Step.FIRST_JOB]
    assert t.at(Step.REQUESTED) == 90.0


@pytest.mark.parametrize("order", [list(FULL), list(reversed(FULL)), [Step.REGISTERED, *FULL]])
def test_each_duration_is_completed_once_whatever_order_the_steps_come_in(order: list[Step]) -> None:
    steps: dict[Step, float | None] = {}
    given: list[str] = []
    for step in dict.fromkeys(order):
        steps[step] = FULL[step]
        given += [name for name, _ in Timeline("n", 0.0, dict(steps)).completed_by(step)]
    assert sorted(given) == sorted(DURATION_NAMES)


def test_summary_of_the_nodes_launched_in_the_window() -> None:
    now = 10 * DAY
    old = Timeline("node001", now - 2 * DAY, {Step.REQUESTED: 0.0, Step.RUNNING: 999.0})
    a = Timeline("node002", now - 3600, {Step.REQUESTED: 0.0, Step.RUNNING: 30.0})
    b = Timeline("node003", now - 60, {Step.REQUESTED: 0.0, Step.RUNNING: 50.0, Step.REACHABLE: 51.0})
    c = Timeline("node004", now - 10, {Step.REQUESTED: 0.0, Step.RUNNING: 90.0})
    s = summarize([old, a, b, c], now)
    assert s.nodes == 3 and s.since == now - DAY
    assert (s.steps["boot"].nodes, s.steps["boot"].median, s.steps["boot"].worst) == (3, 50.0, 90.0)
    assert (s.steps["ssh"].median, s.steps["ssh"].worst) == (1.0, 1.0)
    assert (s.steps["first_job"].nodes, s.steps["first_job"].median) == (0, None)
    assert s.describe(24) == (
        "boot timeline of 3 node(s) launched in the last 24 h, median/worst seconds: "
        "boot 50/90, ssh 1/1, provision -, register -, first job -"
    )


# -- the journal ---------------------------------------------------------------------------
def test_the_journal_records_each_step_once_the_first_time_wins(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = Journal(path)
    told: list[tuple[str, Step]] = []
    j.on_step = lambda t, step: told.append((t.node, step))
    j.record("node001", NodeState.REQUESTED, 100.0, step=Step.REQUESTED)
    j.record("node001", NodeState.READY, 200.0, step=Step.PROVISIONED)
    j.record("node001", NodeState.READY, 300.0, detail="kept", step=Step.PROVISIONED)
    j.mark_seen(400.0, up=["node001", "node099"], busy=[])
    j.mark_seen(500.0, up=["node001"], busy=["node001", "master"])
    j.mark_seen(600.0, up=["node001"], busy=["node001"])
    j.close()
    assert told == [
        ("node001", Step.REQUESTED),
        ("node001", Step.PROVISIONED),
        ("node001", Step.REGISTERED),
        ("node001", Step.FIRST_JOB),
    ]
    j = Journal(path)  # a restart: the steps stand, nothing is recorded again
    j.on_step = lambda t, step: told.append((t.node, step))
    j.mark_seen(700.0, up=["node001"], busy=["node001"])
    t = j.timeline("node001")
    assert t is not None
    assert dict(t.steps) == {
        Step.REQUESTED: 100.0,
        Step.PROVISIONED: 200.0,
        Step.REGISTERED: 400.0,
        Step.FIRST_JOB: 500.0,
    }
    assert len(told) == 4
    assert set(j.timelines()) == {"node001"}  # hosts elb does not manage have none
    assert j.timeline("node099") is None


def test_gone_nodes_get_no_new_step_and_a_reused_name_starts_afresh(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    j.record("node001", NodeState.REQUESTED, 100.0, step=Step.REQUESTED)
    j.record("node001", NodeState.TERMINATED, 200.0)
    j.mark_seen(300.0, up=["node001"])
    assert list(j.timelines(include_gone=True)["node001"].steps) == [Step.REQUESTED]
    assert j.timelines() == {}
    j.record("node001", NodeState.REQUESTED, 1000.0, step=Step.REQUESTED)
    assert dict(j.timelines()["node001"].steps) == {Step.REQUESTED: 1000.0}


def test_pruning_a_gone_node_forgets_its_timeline(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    j.record("node001", NodeState.REQUESTED, 100.0, step=Step.REQUESTED)
    j.record("node001", NodeState.TERMINATED, 200.0)
    j.prune_events(before=1000.0)
    assert j.node("node001") is None
    j.record("node001", NodeState.READY, 2000.0)  # a record made without a request
    assert dict(j.timelines()["node001"].steps) == {}


def test_a_failing_listener_leaves_the_record(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    j = Journal(tmp_path / "j.sqlite")

    def broken(t: Timeline, step: Step) -> None:
        raise RuntimeError("boom")

    j.on_step = broken
    j.record("node001", NodeState.REQUESTED, 100.0, step=Step.REQUESTED)
    assert j.node("node001") is not None
    assert j.timeline("node001").at(Step.REQUESTED) == 100.0  # type: ignore[union-attr]
    assert "listener of boot step requested failed" in caplog.text


# -- the migration -------------------------------------------------------------------------
def _version_3_journal(path: Path) -> None:
    """A journal as the elb before boot timelines left it (schema version 3), with a node that
    booted, ran a job and had a drain called off, and a node still provisioning."""
    db = sqlite3.connect(path, isolation_level=None)
    migrations.migrate(db, str(path), migrations.MIGRATIONS[:3])
    assert migrations.version(db) == 3
    db.execute(
        "INSERT INTO nodes (name, state, launched_at, updated_at, last_up_at, last_busy_at) VALUES "
        "('node001', 'ready', 95.0, 500.0, 600.0, 550.0), ('node002', 'provisioning', 700.0, 720.0, NULL, NULL)"
    )
    for t, node, state, detail in (
        (100.0, "node001", "requested", "3 jobs waiting"),
        (101.0, "node001", "launching", None),
        (140.0, "node001", "running", None),
        (141.0, "node001", "provisioning", None),
        (260.0, "node001", "ready", None),
        (400.0, "node001", "draining", "idle"),
        (410.0, "node001", "ready", "kept: job 5 while draining"),
        (700.0, "node002", "requested", "1 job waiting"),
        (730.0, "node002", "running", None),
        (731.0, "node002", "provisioning", None),
        (50.0, "node000", "requested", None),  # a node whose record was pruned
    ):
        db.execute(
            "INSERT INTO events (time, node, state, detail) VALUES (?, ?, ?, ?)",
            (t, node, state, detail),
        )
    db.close()


def test_a_version_3_journal_gets_timelines_from_its_events(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    _version_3_journal(path)
    j = Journal(path)
    assert migrations.version(j._db) == migrations.CURRENT
    lines = j.timelines()
    assert set(lines) == {"node001", "node002"}
    assert dict(lines["node001"].steps) == {
        Step.REQUESTED: 100.0,
        Step.RUNNING: 140.0,
        Step.PROVISIONING: 141.0,
        Step.PROVISIONED: 260.0,  # the playbook's ready, not the drain called off
        Step.REGISTERED: None,  # seen up and busy before: when first is not known
        Step.FIRST_JOB: None,
    }
    assert lines["node001"].durations() == {  # reaching it over SSH was not journalled then
        "boot": 40.0,
        "ssh": None,
        "provision": None,
        "register": None,
        "first_job": None,
    }
    j.mark_seen(800.0, up=["node001", "node002"], busy=["node001"])  # no pass passes for the first
    lines = j.timelines()
    assert lines["node001"].at(Step.REGISTERED) is None and lines["node001"].at(Step.FIRST_JOB) is None
    assert lines["node002"].at(Step.REGISTERED) == 800.0
    j.close()


def test_read_only_migrates_a_version_3_journal_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    _version_3_journal(path)
    j = Journal.read_only(path)
    assert j.timelines()["node002"].at(Step.RUNNING) == 730.0
    j.close()
    db = sqlite3.connect(path)
    assert int(db.execute("PRAGMA user_version").fetchone()[0]) == 3
    db.close()


# -- the actuator and the daemon's passes ----------------------------------------------------
class Ticking:
    """A clock that moves 10 s at each reading."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        self.t += 10.0
        return self.t


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config({"state_dir": str(tmp_path), "policy": {"max_nodes": 1, "slots_per_node": 8}})


def test_a_pass_records_the_launch_steps_and_later_passes_what_sge_shows(cfg: Config) -> None:
    sge = FakeSge(T0, jobs=[pending(1, 20 * 60, slots=1, tasks=4)])
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=FakeCloud(T0),
        provisioner=FakeProvisioner(sge),
        clock=Ticking(T0),
    )
    metrics = PassMetrics(CollectorRegistry())
    journal.on_step = metrics.observe_step
    assert bal.run_pass().ok
    t = journal.timeline("node001")
    assert t is not None
    assert list(t.steps) == [Step.REQUESTED, Step.RUNNING, Step.PROVISIONING, Step.REACHABLE, Step.PROVISIONED]
    times = [t.at(s) for s in t.steps]
    # times may hold None for mypy; with one the test fails whatever sorted() does with it.
    assert times == sorted(times) and all(x is not None for x in times)  # type: ignore[type-var]
    boot = t.duration("boot")
    assert boot is not None and boot > 0  # the clock moved between the request and the running instance

    sge.now = T0 + 3600
    sge.jobs = []
    assert bal.run_pass().ok  # node001 is up and idle
    sge.now = T0 + 3700
    sge.jobs = [running(1, "node001")]
    assert bal.run_pass().ok
    sge.now = T0 + 3800
    assert bal.run_pass().ok
    t = journal.timeline("node001")
    assert t is not None
    assert (t.at(Step.REGISTERED), t.at(Step.FIRST_JOB)) == (T0 + 3600, T0 + 3700)
    assert t.duration("first_job") == 100.0

    def count(step: str) -> float | None:
        return metrics.registry.get_sample_value("elb_boot_step_seconds_count", {"step": step})

    def total(step: str) -> float | None:
        return metrics.registry.get_sample_value("elb_boot_step_seconds_sum", {"step": step})

    assert {name: count(name) for name in DURATION_NAMES} == dict.fromkeys(DURATION_NAMES, 1.0)
    assert total("first_job") == 100.0 and total("boot") == boot
    journal.close()


def test_an_instance_without_an_address_is_not_running_yet(tmp_path: Path) -> None:
    from dataclasses import replace

    from elb.core.interfaces import LaunchResult
    from elb.service.actuator import Actuator, Outcomes

    class NoAddress(FakeCloud):
        def launch(
            self, names: Sequence[str], groups: Mapping[str, str] | None = None, boot: object = None, **kw: Any
        ) -> LaunchResult:
            done = super().launch(names, groups, **kw)
            return LaunchResult(tuple(replace(i, private_ip=None) for i in done.launched), done.failed)

    sge = FakeSge(T0)
    journal = Journal(tmp_path / "j.sqlite")
    act = Actuator(journal, GridEngine(Config(), sge), NoAddress(T0), FakeProvisioner(sge), Ticking(T0))
    out = Outcomes()
    act.request(["node001"], "test")
    act.launch(["node001"], out)
    assert "node001" in out.failed  # no private address: cleaned up
    t = journal.timelines(include_gone=True)["node001"]
    assert list(t.steps) == [Step.REQUESTED]
    journal.close()


def test_the_metrics_registry_feeds_the_step_histogram_from_the_journal(cfg: Config) -> None:
    from elb.service.metrics import metrics_registry

    sge = FakeSge(T0, jobs=[pending(1, 20 * 60, slots=1, tasks=4)])
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=FakeCloud(T0),
        provisioner=FakeProvisioner(sge),
        clock=Ticking(T0),
    )
    registry = metrics_registry(bal, bal.metrics)
    assert registry.get_sample_value("elb_boot_step_seconds_count", {"step": "boot"}) == 0.0
    assert bal.run_pass().ok
    assert registry.get_sample_value("elb_boot_step_seconds_count", {"step": "boot"}) == 1.0
    assert registry.get_sample_value("elb_boot_step_seconds_count", {"step": "provision"}) == 1.0
    assert registry.get_sample_value("elb_boot_step_seconds_count", {"step": "register"}) == 0.0
    journal.close()


# -- elb nodes and elb status --------------------------------------------------------------
STATE_AT = {  # the node's state as the actuator records each of its steps
    Step.REQUESTED: NodeState.REQUESTED,
    Step.RUNNING: NodeState.RUNNING,
    Step.PROVISIONING: NodeState.PROVISIONING,
    Step.PROVISIONED: NodeState.READY,
}


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config and a journal: node001 booted and ran a job, node002 is provisioning, node003
    was launched two days ago and is gone, node004 launched an hour ago and failed."""
    from elb.core.config import load_config
    from elb.service import factory

    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 8}}\n")
    j = Journal(load_config(path).journal_path)

    def boot(name: str, start: float, steps: int, state: NodeState) -> None:
        offsets = (0.0, 40.0, 41.0, 50.0, 160.0, 190.0, 250.0)
        for step, offset in list(zip(Step, offsets, strict=True))[:steps]:
            if step is Step.REACHABLE:
                j.reach(name, step, start + offset)
            elif step in (Step.REGISTERED, Step.FIRST_JOB):
                up, busy = ([name], []) if step is Step.REGISTERED else ([name], [name])
                j.mark_seen(start + offset, up=up, busy=busy)
            else:
                j.record(name, STATE_AT[step], start + offset, launched_at=start, step=step)
        j.record(name, state, start + 300.0)

    boot("node001", T0 - 3600, 7, NodeState.READY)
    boot("node002", T0 - 100, 2, NodeState.PROVISIONING)
    boot("node003", T0 - 2 * DAY, 5, NodeState.TERMINATED)
    boot("node004", T0 - 3000, 1, NodeState.FAILED)
    j.close()
    sge = FakeSge(T0, jobs=[running(7, "node001")])
    sge.add_host("node001")
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    return path


def test_nodes_shows_the_seconds_of_each_boot_step(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from elb.cli.main import main
    from elb.core.exitcodes import Exit

    assert main(["nodes", "-c", str(cli)]) == Exit.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[7:] == ["boot", "ssh", "provision", "register", "first", "job", "jobs"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert set(rows) == {"node001", "node002"}
    assert rows["node001"][-6:] == ["40", "10", "110", "30", "60", "7"]
    assert rows["node002"][-6:] == ["40", "-", "-", "-", "-", "-"]
    assert main(["nodes", "-c", str(cli), "--all"]) == Exit.OK
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["node003"][-6:-1] == ["40", "10", "110", "-", "-"]
    assert rows["node004"][-6:-1] == ["-"] * 5


def test_nodes_json_carries_the_boot_steps(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from elb.cli.main import main
    from elb.core.exitcodes import Exit

    assert main(["nodes", "-c", str(cli), "--json"]) == Exit.OK
    by_name = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert by_name["node001"]["boot_steps"] == {
        "boot": 40.0,
        "ssh": 10.0,
        "provision": 110.0,
        "register": 30.0,
        "first_job": 60.0,
    }
    assert by_name["node001"]["boot_times"]["requested"] == T0 - 3600
    assert by_name["node002"]["boot_steps"]["ssh"] is None
    assert list(by_name["node002"]["boot_times"]) == ["requested", "running"]


def test_status_sums_up_the_boot_steps_of_the_last_day(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from elb.cli.main import main
    from elb.core.exitcodes import Exit

    assert main(["status", "-c", str(cli)]) == Exit.OK
    out = capsys.readouterr().out
    assert (
        "boot timeline of 3 node(s) launched in the last 24 h, median/worst seconds: "
        "boot 40/40, ssh 10/10, provision 110/110, register 30/30, first job 60/60"
    ) in out.splitlines()
    assert main(["status", "-c", str(cli), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["boot_timeline"]["nodes"] == 3 and doc["boot_timeline"]["since"] == T0 - DAY
    assert doc["boot_timeline"]["steps"]["boot"] == {"nodes": 2, "median": 40.0, "worst": 40.0}
    assert doc["boot_timeline"]["steps"]["first_job"] == {"nodes": 1, "median": 60.0, "worst": 60.0}
    assert {n["name"]: n["boot_steps"]["register"] for n in doc["nodes"]} == {"node001": 30.0, "node002": None}


def test_status_without_a_recent_launch_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from elb.cli.main import main

    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\n")
    main(["status", "-c", str(path)])
    assert "boot timeline: no node launched in the last 24 h" in capsys.readouterr().out


def test_the_summary_counts_only_the_nodes_elb_launched_and_names_the_adopted_apart() -> None:
    """A node reconcile adopted (no ``requested`` step: elb did not launch it) is not one of the
    nodes "launched in the last 24 h"; the line says how many were adopted instead."""
    now = 100_000.0
    launched = Timeline("node001", now - 600, {Step.REQUESTED: now - 600, Step.RUNNING: now - 560})
    adopted = Timeline("node002", now - 600, {Step.RUNNING: now - 500, Step.PROVISIONED: now - 400})
    summary = summarize([launched, adopted], now)
    assert (summary.nodes, summary.adopted) == (1, 1)
    line = summary.describe(24)
    assert line.startswith("boot timeline of 1 node(s) launched in the last 24 h")
    assert line.endswith("; 1 node(s) adopted, not launched by elb, are not in it")
    only_adopted = summarize([adopted], now)
    assert only_adopted.describe(24) == (
        "boot timeline: no node launched in the last 24 h (1 node(s) adopted, not launched by elb)"
    )
