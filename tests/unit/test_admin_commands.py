"""``elb nodes`` and ``elb history`` through the command line, with the in-memory SGE of
tests/unit/fakes.py (the factory hands it out) and a journal written by a real pass."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import load_config
from elb.core.exitcodes import Exit
from elb.core.model import Node, NodeState, Plan, Removal, WitnessKeep
from elb.core.orders import Orders, apply_orders
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.errors import SgeError
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, FakeSge]:
    """A config, and a journal in which a pass added two nodes; SGE then runs job 7 on node001."""
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 8}}\n")
    cfg = load_config(path)
    sge = FakeSge(T0, jobs=[pending(1, 20 * 60, slots=1, tasks=12)])
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=FakeCloud(T0), provisioner=FakeProvisioner(sge)
    )
    assert bal.run_pass().ok
    journal.close()
    sge.jobs = [running(7, "node001")]
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    return path, sge


def test_nodes_lists_every_managed_node_with_its_jobs(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = setup
    assert main(["nodes", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["node", "state", "type"]
    rows = {line.split()[0]: line for line in out[1:]}
    assert set(rows) == {"node001", "node002"}
    assert rows["node001"].split()[1] == "ready" and rows["node001"].endswith("7")
    assert rows["node002"].endswith("-")


def test_nodes_json_for_scripts(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["scheduler_read"] is True
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["node001"]["jobs"] == [7]
    assert by_name["node001"]["idle_for"] is None  # busy now
    assert by_name["node002"]["state"] == NodeState.READY.value
    assert by_name["node002"]["jobs"] == []
    assert by_name["node002"]["instance_id"]


def test_nodes_says_why_elb_keeps_a_node(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    journal = Journal(load_config(path).journal_path)
    why = "the scheduler lists no job on node002 but the node runs job processes; the two disagree"
    journal.record("node002", NodeState.READY, T0 + 60, detail=f"kept: {why}")
    journal.close()
    assert main(["nodes", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert out.splitlines()[-2:] == ["kept by elb:", f"  node002: {why}"]
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.OK
    by_name = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert by_name["node002"]["kept"] == why and by_name["node001"]["kept"] is None


def test_nodes_says_how_long_a_node_kept_on_its_own_word_is_held(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]
) -> None:
    """The hold's reason, as the pass gives it (``planner.witness_hold``), while it lasts."""
    path, _ = setup
    journal = Journal(load_config(path).journal_path)
    why = "the scheduler lists no job on node002 but the node runs job processes; the two disagree"
    busy_at = journal.node("node002").last_busy_at  # type: ignore[union-attr]
    keep = WitnessKeep(at=T0 - 60, busy_at=busy_at, found=True, why=why)
    journal.record("node002", NodeState.READY, T0 - 60, detail=f"kept: {why}", witness_keep=keep)
    journal.close()
    assert main(["nodes", "-c", str(path)]) == Exit.OK
    held = f"{why}; not drained again for 29 min unless the scheduler shows it busy again"
    assert capsys.readouterr().out.splitlines()[-2:] == ["kept by elb:", f"  node002: {held}"]


def test_nodes_without_sge_prints_the_journal_and_exits_4(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sge = setup

    def broken() -> None:
        raise SgeError("qstat: timed out")

    monkeypatch.setattr(sge, "read_snapshot", broken)
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.UNREADABLE
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["scheduler_read"] is False
    assert [n["jobs"] for n in doc["nodes"]] == [None, None]  # not known, not "none"
    assert "cannot read SGE" in captured.err


def test_history_of_a_node(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["history", "node001", "-c", str(path)]) == Exit.OK
    states = [line.split()[3] for line in capsys.readouterr().out.splitlines()]
    assert states[0] == "requested" and states[-1] == "ready"
    assert main(["history", "node001", "-c", str(path), "--json"]) == Exit.OK
    events = json.loads(capsys.readouterr().out)
    assert events[0]["state"] == "requested" and events[-1]["state"] == "ready"
    assert all(e["node"] == "node001" for e in events)


def test_history_of_an_unknown_node_says_so(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["history", "node099", "-c", str(path)]) == Exit.FAILED
    assert "no journal events for 'node099'" in capsys.readouterr().err


# -- standing orders ------------------------------------------------------------------------


def _node(name: str, state: NodeState = NodeState.READY) -> Node:
    return Node(name, state, launched_at=T0)


ADD_AND_REMOVE = Plan(add=1, add_names=("node003",), add_reason="3 jobs wait", remove=(Removal("node001", "idle"),))


@pytest.mark.parametrize(
    ("orders", "busy", "add", "removed", "says"),
    [
        (Orders(), set(), 1, ["node001"], ""),
        (Orders(paused_since=T0, pause_reason="maintenance"), set(), 0, [], "scaling paused by an admin (maintenance"),
        (Orders(kept=frozenset({"node001"})), set(), 1, [], "kept by an admin: node001"),
        (Orders(remove=frozenset({"node002"})), set(), 1, ["node001", "node002"], ""),
        (Orders(remove=frozenset({"node002"})), {"node002"}, 1, ["node001"], ""),  # busy: not yet
        (Orders(remove=frozenset({"node009"})), set(), 1, ["node001"], ""),  # not a ready node
        (  # paused: the policy's removals stop, an admin's removal order goes on
            Orders(paused_since=T0, remove=frozenset({"node002"})),
            set(),
            0,
            ["node002"],
            "the policy would: add 1",
        ),
    ],
)
def test_orders_applied_to_a_plan(orders: Orders, busy: set[str], add: int, removed: list[str], says: str) -> None:
    nodes = [_node("node001"), _node("node002"), _node("node009", NodeState.PROVISIONING)]
    plan = apply_orders(ADD_AND_REMOVE, orders, nodes, busy, cloud="EC2")
    assert plan.add == add
    assert [r.node for r in plan.remove] == removed
    assert says in plan.reason


def test_order_commands_write_the_journal(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    journal_path = load_config(path).journal_path
    assert main(["pause", "-c", str(path), "--reason", "kernel update"]) == Exit.OK
    assert main(["keep", "node001", "-c", str(path)]) == Exit.OK
    assert main(["remove", "node002", "-c", str(path)]) == Exit.OK
    assert main(["keep", "node077", "-c", str(path)]) == Exit.FAILED  # not a node elb manages
    j = Journal(journal_path)
    orders = j.orders()
    j.close()
    assert orders.paused and orders.pause_reason == "kernel update"
    assert orders.kept == {"node001"} and orders.remove == {"node002"}
    capsys.readouterr()
    assert main(["status", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "scaling PAUSED by an admin" in out and "kernel update" in out
    assert "kept by an admin: node001; to remove: node002" in out
    for argv in (["resume"], ["release", "node001"], ["remove", "node002", "--cancel"]):
        assert main([*argv, "-c", str(path)]) == Exit.OK
    j = Journal(journal_path)
    assert j.orders() == Orders()
    j.close()


def test_a_paused_balancer_launches_nothing(tmp_path: Path) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 8}}\n")
    cfg = load_config(path)
    sge = FakeSge(T0, jobs=[pending(1, 20 * 60, slots=1, tasks=12)])
    journal = Journal(cfg.journal_path)
    journal.set_paused(T0 - 60, "testing")
    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=FakeCloud(T0), provisioner=FakeProvisioner(sge)
    )
    result = bal.run_pass()
    assert result.ok and result.plan is not None
    assert result.plan.add == 0 and journal.nodes() == []
    assert "scaling paused by an admin (testing" in result.plan.reason
    assert "the policy would: add 2" in result.plan.reason
    journal.set_paused(None)
    assert bal.run_pass().plan.add == 2  # type: ignore[union-attr]
    journal.close()


def test_orders_need_a_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\n")
    assert main(["pause", "-c", str(path)]) == Exit.CONFIG
    assert "elb has not run with this config yet" in capsys.readouterr().err


# -- drain, jobs, status --json -------------------------------------------------------------


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, FakeSge, FakeCloud]:
    """As ``setup``, with the cloud kept for the passes that follow."""
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 8}}\n")
    sge = FakeSge(T0, jobs=[pending(1, 20 * 60, slots=1, tasks=12)])
    cloud = FakeCloud(T0)
    _pass(path, sge, cloud)
    sge.jobs = [running(7, "node001")]
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    return path, sge, cloud


def _pass(path: Path, sge: FakeSge, cloud: FakeCloud) -> None:
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=FakeProvisioner(sge))
    assert bal.run_pass().ok
    journal.close()


def test_drain_an_idle_node_is_removed_by_the_next_pass(
    live: tuple[Path, FakeSge, FakeCloud], capsys: pytest.CaptureFixture[str]
) -> None:
    path, sge, cloud = live
    assert main(["drain", "node002", "-c", str(path)]) == Exit.OK
    assert "node002: disabled and idle" in capsys.readouterr().out
    assert "node002" in sge.disabled  # no new job can land
    j = Journal(load_config(path).journal_path)
    assert j.orders().remove == {"node002"}  # the same order as elb remove
    j.close()
    _pass(path, sge, cloud)
    j = Journal(load_config(path).journal_path)
    assert j.node("node002").state is NodeState.TERMINATED  # type: ignore[union-attr]
    j.close()


def test_drain_a_busy_node_leaves_it_disabled_until_its_jobs_end(
    live: tuple[Path, FakeSge, FakeCloud], capsys: pytest.CaptureFixture[str]
) -> None:
    path, sge, cloud = live
    assert main(["drain", "node001", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "node001: disabled, but job 7 landed" in out
    assert "node001" in sge.disabled
    _pass(path, sge, cloud)  # job 7 still runs: kept, still disabled
    j = Journal(load_config(path).journal_path)
    assert j.node("node001").state is NodeState.READY  # type: ignore[union-attr]
    j.close()
    assert "node001" in sge.disabled
    sge.jobs = []
    _pass(path, sge, cloud)
    j = Journal(load_config(path).journal_path)
    assert j.node("node001").state is NodeState.TERMINATED  # type: ignore[union-attr]
    j.close()


def test_drain_cancel_and_refusals(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, sge = setup
    assert main(["drain", "node001", "-c", str(path)]) == Exit.OK
    assert main(["drain", "node001", "--cancel", "-c", str(path)]) == Exit.OK
    assert "node001" not in sge.disabled
    j = Journal(load_config(path).journal_path)
    assert j.orders().remove == frozenset()
    j.close()
    assert main(["drain", "node077", "-c", str(path)]) == Exit.FAILED
    assert "node077 is not a node elb manages" in capsys.readouterr().err


def test_drain_when_sge_fails_exits_4_without_an_order(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sge = setup

    def broken(host: str) -> None:
        raise SgeError("qmod: timed out")

    monkeypatch.setattr(sge, "disable_host", broken)
    assert main(["drain", "node002", "-c", str(path)]) == Exit.UNREADABLE
    assert "node002: cannot drain" in capsys.readouterr().err
    j = Journal(load_config(path).journal_path)
    assert j.orders().remove == frozenset()
    j.close()


def test_jobs_says_what_counts_as_demand(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, sge = setup
    sge.jobs = [
        running(7, "node001"),
        pending(10, 600),
        pending(11, 300, state="hqw"),
        pending(12, 200, state="Eqw"),
        replace(pending(13, 100, slots=40), pe="mpi", pe_range="40"),  # 5 nodes of 8: max_nodes is 4
        replace(pending(14, 50, slots=16), pe="mpi", pe_range="16"),
    ]
    assert main(["jobs", "-c", str(path), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["slots_per_node"] == 8
    verdicts = {j["job_id"]: (j["demand"], j["why_not"] or "") for j in doc["jobs"]}
    assert list(verdicts) == [10, 11, 12, 13, 14]  # oldest first, the running job left out
    assert verdicts[10] == (True, "") and verdicts[14] == (True, "")
    assert not verdicts[11][0] and verdicts[11][1].startswith("held (hqw)")
    assert not verdicts[12][0] and verdicts[12][1].startswith("in error (Eqw)")
    assert not verdicts[13][0]
    assert (
        verdicts[13][1]
        == "unservable: 40 slots in PE mpi ($fill_up): more than the 32 slots of group default at max_nodes 4"
    )
    assert doc["jobs"][0]["waited"] == 600
    assert main(["jobs", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "2 of 5 waiting job(s) count as demand" in out


def test_status_json(setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = setup
    assert main(["pause", "-c", str(path), "--reason", "x"]) == Exit.OK
    capsys.readouterr()
    assert main(["status", "-c", str(path), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["scheduler_read"] is True
    assert {n["name"] for n in doc["nodes"]} == {"node001", "node002"}
    assert doc["orders"]["pause_reason"] == "x" and doc["orders"]["paused_since"] is not None
    assert doc["last_pass"]["ok"] is True
    assert any("running" in line for line in doc["scheduler"])


def test_status_reads_the_journal_without_writing_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\n")
    main(["status", "-c", str(path)])
    assert "(no nodes managed by elb)" in capsys.readouterr().out
    assert not (tmp_path / "state").exists()  # a missing journal is "no nodes yet", not created


def test_status_and_nodes_show_a_node_stopped_in_the_warm_pool(
    setup: tuple[Path, FakeSge], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = setup
    journal = Journal(load_config(path).journal_path)
    journal.record("node002", NodeState.STOPPING, T0 - 600)
    journal.record("node002", NodeState.STOPPED, T0 - 540)
    journal.close()
    assert main(["status", "-c", str(path)]) == Exit.OK
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("node")}
    assert rows["node002"].split()[1] == "stopped"
    assert "stopped in the warm pool for 9 min" in rows["node002"]
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.OK
    by_name = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert by_name["node002"]["state"] == "stopped" and by_name["node002"]["stopped_for"] == 540
    assert by_name["node002"]["uptime"] == 0 and by_name["node001"]["stopped_for"] is None
