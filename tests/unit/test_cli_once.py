"""``elb once`` and ``elb once --dry-run`` through the command line, with the in-memory stand-ins
of tests/unit/fakes.py in place of SGE, the cloud and the provisioner (the factory builds them):
the exit codes, and the dry run planning with the node size the daemon would use."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import Config, load_config
from elb.core.exitcodes import Exit
from elb.core.interfaces import CloudError, Instance
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import HOUR, T0, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

WAITING = [pending(1, 20 * 60, slots=1, tasks=12)]  # 12 slots wait


class UnsizedCloud(FakeCloud):
    """A cloud that cannot say what a new node has (EC2 without DescribeInstanceTypes)."""

    def new_node_slots(self) -> int | None:
        raise CloudError("UnauthorizedOperation: ec2:DescribeInstanceTypes")


class UnlistableCloud(FakeCloud):
    def list_workers(self) -> list[Instance]:
        raise CloudError("RequestLimitExceeded")


@dataclass
class Stand:
    """What the factory hands out, and what was asked of it."""

    sge: FakeSge
    cloud: FakeCloud | None
    cloud_error: str | None = None
    clouds_built: int = 0


@pytest.fixture
def stand(monkeypatch: pytest.MonkeyPatch) -> Stand:
    s = Stand(FakeSge(T0), FakeCloud(T0))

    def make_cloud(cfg: Config) -> FakeCloud:
        s.clouds_built += 1
        if s.cloud is None:
            raise CloudError(s.cloud_error or "no cloud")
        return s.cloud

    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, s.sge))
    monkeypatch.setattr(factory, "make_cloud", make_cloud)
    monkeypatch.setattr(factory, "make_provisioner", lambda cfg: FakeProvisioner(s.sge))
    return s


def config(tmp_path: Path, policy: str = "{max_nodes: 20}") -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {policy}\n")
    return path


def dry_run_out(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``elb once --dry-run`` on ``path``: it must exit 0; what it printed."""
    assert main(["once", "--dry-run", "-c", str(path)]) == Exit.OK
    return capsys.readouterr().out


def daemon_adds(cfg_path: Path, cloud: FakeCloud, tmp_path: Path) -> int:
    """How many nodes the daemon's first live pass adds on the same SGE view."""
    cfg = load_config(cfg_path).model_copy(update={"state_dir": tmp_path / "daemon"})
    sge = FakeSge(T0, jobs=list(WAITING))
    journal = Journal(cfg.journal_path)
    try:
        bal = Balancer(
            cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=FakeProvisioner(sge)
        )
        result = bal.run_pass()
    finally:
        journal.close()
    assert result.ok
    return len(result.outcomes.added)


def test_dry_run_asks_the_cloud_for_the_node_size_as_the_daemon_does(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand.sge.jobs = list(WAITING)
    path = config(tmp_path)
    out = dry_run_out(path, capsys)
    assert "  a new node has 8 slots (asked the ec2 cloud)\n" in out
    assert "  a new node is ready 5 min after launch (policy.boot_time)\n" in out
    assert "add 2 (node001, node002)" in out  # 12 slots on 8-slot nodes, not 12 one-slot nodes
    assert daemon_adds(path, FakeCloud(T0), tmp_path) == 2
    assert stand.cloud is not None and stand.cloud.instances == {} and stand.cloud.counter == 0  # nothing launched
    assert not (tmp_path / "state").exists()  # nothing written


def test_dry_run_falls_back_as_the_daemon_does_when_the_cloud_cannot_say(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand.sge.jobs = list(WAITING)
    stand.cloud = UnsizedCloud(T0)
    path = config(tmp_path)
    out = dry_run_out(path, capsys)
    assert (
        "  a new node has 1 slot (the ec2 cloud could not be asked: UnauthorizedOperation: "
        "ec2:DescribeInstanceTypes; no worker to learn from, so 1)\n"
    ) in out
    assert "add 12 (node001, " in out
    assert daemon_adds(path, UnsizedCloud(T0), tmp_path) == 12


def test_dry_run_without_a_cloud_learns_from_the_workers(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand.sge.jobs = list(WAITING)
    stand.sge.add_host("node001", slots=4)
    stand.sge.jobs.append(running(2, "node001", slots=4, ran=HOUR))
    stand.cloud, stand.cloud_error = None, "botocore: NoCredentialsError"
    out = dry_run_out(config(tmp_path), capsys)
    assert (
        "  a new node has 4 slots (the ec2 cloud could not be asked: CloudError: botocore: NoCredentialsError; "
        "the workers' most common size)\n"
    ) in out
    assert "add 3 (node002, node003, node004)" in out  # 12 slots on 4-slot nodes


def test_dry_run_with_slots_per_node_set_does_not_ask_the_cloud_for_the_size(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand.sge.jobs = list(WAITING)
    stand.cloud = UnsizedCloud(T0)  # asked for the size, it would fail: the line below says it was not
    path = config(tmp_path, "{max_nodes: 20, slots_per_node: 6, boot_time: 90}")
    out = dry_run_out(path, capsys)
    assert "  a new node has 6 slots (policy.slots_per_node)\n" in out
    assert "  a new node is ready 90 s after launch (policy.boot_time)\n" in out
    assert "add 2 (node001, node002)" in out
    assert stand.clouds_built == 1  # built once, for its list of workers


def test_dry_run_with_sge_unreadable_exits_4(stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stand.sge.fail_reads = 1
    assert main(["once", "--dry-run", "-c", str(config(tmp_path))]) == Exit.UNREADABLE
    captured = capsys.readouterr()
    assert captured.err == ("elb: pass failed, nothing changed: reading SGE: qstat: error: unable to contact qmaster\n")
    assert captured.out == ""


def test_once_exit_codes(stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(config(tmp_path))
    assert main(["once", "-c", path]) == Exit.OK  # nothing waits, nothing to do

    stand.sge.fail_reads = 1
    assert main(["once", "-c", path]) == Exit.UNREADABLE
    assert "reading SGE" in capsys.readouterr().err

    stand.cloud = UnlistableCloud(T0)
    assert main(["once", "-c", path]) == Exit.UNREADABLE
    assert "listing the cloud's workers: RequestLimitExceeded" in capsys.readouterr().err

    stand.cloud = None
    stand.cloud_error = "You must specify a region."
    assert main(["once", "-c", path]) == Exit.UNREADABLE
    assert capsys.readouterr().err == "elb: cloud ec2: cannot be used: You must specify a region.\n"

    stand.cloud = FakeCloud(T0, raise_on_launch="InsufficientInstanceCapacity")
    stand.sge.jobs = list(WAITING)
    assert main(["once", "-c", path]) == Exit.PASS_FAILED
    last = capsys.readouterr().err.splitlines()[-1]  # after the pass's log lines
    assert last == "elb: pass failed: node001, node002: launch failed: InsufficientInstanceCapacity"

    stand.cloud = FakeCloud(T0)
    assert main(["once", "-c", path]) == Exit.OK


def test_once_and_run_refuse_bad_extra_vars_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sge = FakeSge(T0)
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path}\nprovision: {{extra_vars: {{bad-name: 1}}}}\n")
    for argv in (["once"], ["run"]):
        assert main([*argv, "-c", str(path)]) == Exit.CONFIG
        assert "'bad-name' is not a valid Ansible variable name" in capsys.readouterr().err
    assert sge.calls == []


def test_a_journal_that_cannot_be_opened_is_one_line_and_exit_3(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path)
    (tmp_path / "state" / "journal.sqlite").mkdir(parents=True)  # sqlite cannot open a directory
    for argv in (["once"], ["run"], ["status"], ["nodes"], ["history", "node001"], ["jobs"], ["spend"]):
        assert main([*argv, "-c", str(path)]) == Exit.CONFIG, argv
        err = capsys.readouterr().err
        assert err.startswith(f"elb: state_dir {tmp_path / 'state'}: cannot open the journal ") and err.count("\n") == 1
    assert stand.sge.calls == []


def test_run_with_its_metrics_port_taken_is_one_line_and_exit_3(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = tmp_path / "elb.yml"
        path.write_text(f"state_dir: {tmp_path}\nmetrics_port: {port}\n")
        assert main(["run", "-c", str(path)]) == Exit.CONFIG
    assert capsys.readouterr().err.endswith(
        f"elb: metrics_port {port}: cannot listen on 127.0.0.1: Address already in use\n"
    )
    assert stand.sge.calls == []


def test_dry_run_and_status_leave_an_existing_journal_as_it_was(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path)
    stand.sge.jobs = list(WAITING)
    assert main(["once", "-c", str(path)]) == Exit.OK  # a live pass writes the journal
    journal = tmp_path / "state" / "journal.sqlite"
    Journal(journal).close()  # checkpointed: the file alone holds it all
    before = journal.read_bytes()
    assert main(["once", "--dry-run", "-c", str(path)]) == Exit.OK
    assert main(["status", "-c", str(path)]) == Exit.OK
    assert main(["nodes", "-c", str(path)]) == Exit.OK
    assert journal.read_bytes() == before


def test_a_journal_from_a_newer_elb_is_exit_3_everywhere(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    path = config(tmp_path)
    (tmp_path / "state").mkdir()
    db = sqlite3.connect(tmp_path / "state" / "journal.sqlite")
    db.execute("PRAGMA user_version = 99")
    db.close()
    for argv in (["once"], ["status"], ["spend"], ["pause"]):
        assert main([*argv, "-c", str(path)]) == Exit.CONFIG, argv
        err = capsys.readouterr().err
        assert "schema version 99" in err and "newer elb" in err and err.count("\n") == 1, err


def test_dry_run_plans_the_whole_pass_on_the_clouds_workers_read_only(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dry run builds the joined state the daemon's pass builds (SGE, the journal, the
    cloud's workers) and prints the same plan: here an orphan instance the daemon would terminate
    first, and scaling held until the next pass, as the live pass holds it. Nothing is changed."""
    stand.sge.jobs = list(WAITING)
    assert stand.cloud is not None
    stand.cloud.instances["i-orphan"] = Instance("i-orphan", "node007", "running", T0 - 3600, "10.0.0.7")
    path = config(tmp_path, "{max_nodes: 20, slots_per_node: 4}")
    out = dry_run_out(path, capsys)
    assert "  the cloud's workers: 1 listed (read only)\n" in out
    assert "  repair (orphan) node007: " in out
    assert "no scaling this pass: " in out and "add " not in out
    assert set(stand.cloud.instances) == {"i-orphan"} and stand.cloud.counter == 0  # nothing terminated or launched
    assert not (tmp_path / "state").exists()


def test_dry_run_without_the_clouds_workers_plans_on_the_journals_and_says_so(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An instance elb cannot see is not gone: without the cloud's list the pass is planned on the
    workers as the journal has them (no node looks vanished), and the output says so."""
    stand.sge.jobs = list(WAITING)
    stand.cloud = UnlistableCloud(T0)
    path = config(tmp_path, "{max_nodes: 20, slots_per_node: 4}")
    out = dry_run_out(path, capsys)
    assert (
        "  the cloud's workers: not read (listing the cloud's workers: RequestLimitExceeded): "
        "taken as the journal has them; no repair the cloud's list would show is planned\n"
    ) in out
    assert "add 3 (node001, node002, node003)" in out
