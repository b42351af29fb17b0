"""Waiting jobs no node elb launches could ever run are never demand (``elb.schedulers.sge.servable``).

Each job below made elb launch nodes and keep them idle before waiting jobs were matched against
what a new node offers: a queue its nodes do not join, a host that is not one of them, a
consumable nobody offers, a ``$pe_slots`` job wider than a node, a PE job wider than
``max_nodes`` nodes. Passes run through the real Balancer with the in-memory SGE of
tests/unit/fakes.py (whose ``read_site`` answers with the fixture ``qconf`` outputs).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.model import Job
from elb.schedulers.sge.commands import CommandResult, SgeCommands
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.servable import node_groups, split_demand
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import BalancerCollector
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge, default_site

LONG = 30 * 60  # waited well past every wait rule


def bound(job: Job, **changes: object) -> Job:
    from dataclasses import replace

    return replace(job, **changes)  # type: ignore[arg-type]


UNSERVABLE = [
    bound(pending(10, LONG), hard_queues=("other.q",)),
    bound(pending(11, LONG), hard_requests={"hostname": "foo"}),
    bound(pending(12, LONG), hard_requests={"gpu": "1"}),
    bound(pending(13, LONG, slots=64), pe="mpi", pe_range="64"),
    bound(pending(14, LONG, slots=4), pe="smp", pe_range="4"),
]


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config({"state_dir": str(tmp_path), "policy": {"max_nodes": 4, "slots_per_node": 2}})


def balancer(cfg: Config, jobs: list[Job]) -> tuple[Balancer, FakeSge, FakeCloud]:
    sge = FakeSge(T0, jobs=list(jobs), complexes="qconf-sc-site.txt")
    cloud = FakeCloud(T0)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
    )
    return bal, sge, cloud


def test_jobs_no_new_node_could_run_launch_nothing_over_many_passes(cfg: Config) -> None:
    bal, _sge, cloud = balancer(cfg, UNSERVABLE)
    for _ in range(5):
        assert bal.run_pass().ok
    assert cloud.counter == 0  # no instance launched
    assert bal.last.unservable_jobs == len(UNSERVABLE)
    reasons = {n.job.job_id: n.reason for n in bal.last.not_demand}
    assert "other.q" in reasons[10]
    assert "foo" in reasons[11]
    assert "gpu" in reasons[12]
    assert "64" in reasons[13]
    assert "$pe_slots" in reasons[14]


def test_the_cluster_still_scales_for_the_jobs_it_can_serve(cfg: Config) -> None:
    bal, _sge, cloud = balancer(cfg, [*UNSERVABLE, pending(20, LONG, slots=2)])
    result = bal.run_pass()
    assert result.ok
    assert [i.name for i in cloud.instances.values()] == ["node001"]  # one 2-slot node for job 20, none for the others


def test_each_unservable_job_is_logged_when_it_appears_or_its_reason_changes_and_counted_in_a_metric(
    cfg: Config, caplog: pytest.LogCaptureFixture
) -> None:
    bal, sge, _cloud = balancer(cfg, UNSERVABLE[:2])
    with caplog.at_level(logging.WARNING, logger="elb"):
        for _ in range(3):
            bal.run_pass()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not demand")]
    assert len(lines) == 2 and "job 10" in lines[0]  # once each over three passes
    caplog.clear()
    sge.jobs[1] = bound(sge.jobs[1], hard_requests={"hostname": "bar"})  # job 11's reason changes
    sge.jobs.append(UNSERVABLE[2])  # job 12 appears
    with caplog.at_level(logging.WARNING, logger="elb"):
        bal.run_pass()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not demand")]
    assert len(lines) == 2 and "bar" in lines[0] and "job 12" in lines[1]
    metric = {m.name: m.samples[0].value for m in BalancerCollector(bal).collect() if m.samples}
    assert metric["elb_unservable_jobs"] == 3


def test_an_unreadable_site_launches_nothing_and_the_pass_goes_on(cfg: Config) -> None:
    bal, sge, cloud = balancer(cfg, [pending(20, LONG, slots=2)])
    sge.site_error = "qconf: unable to contact qmaster"
    result = bal.run_pass()
    assert cloud.counter == 0  # no instance launched
    assert result.ok  # repairs and removals are not held by it; only launches wait
    sge.site_error = None
    bal.run_pass()
    assert [i.name for i in cloud.instances.values()] == ["node001"]


def test_no_waiting_job_no_site_read(cfg: Config) -> None:
    bal, sge, _cloud = balancer(cfg, [])
    bal.run_pass()
    assert "qconf site" not in sge.calls


def test_split_leaves_running_and_held_jobs_and_servable_ones_in_place(cfg: Config) -> None:
    from tests.unit.factories import running, snap

    jobs = [running(1, "node001"), pending(2, 60, state="hqw"), *UNSERVABLE, pending(30, 60)]
    split = split_demand(snap(jobs), node_groups(cfg, 2), default_site("qconf-sc-site.txt"), new_node_name="node002")
    assert [j.job_id for j in split.snapshot.jobs] == [1, 2, 30]
    assert [n.job.job_id for n in split.not_demand] == [10, 11, 12, 13, 14]


def test_a_host_request_for_the_next_node_name_is_demand(cfg: Config) -> None:
    from tests.unit.factories import snap

    job = bound(pending(40, 60), hard_requests={"hostname": "node00*"})
    split = split_demand(snap([job]), node_groups(cfg, 2), default_site(), new_node_name="node001")
    assert split.not_demand == ()


def test_the_real_client_reads_the_site_with_four_qconf_calls(tmp_path: Path) -> None:
    here = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"
    answers = {
        ("-spl",): b"smp\nmpi\n",
        ("-sp", "smp"): (here / "qconf-sp-smp.txt").read_bytes(),
        ("-sp", "mpi"): (here / "qconf-sp-mpi.txt").read_bytes(),
        ("-sc",): (here / "qconf-sc-site.txt").read_bytes(),
        ("-se", "global"): b"hostname              global\ncomplex_values        license=4\n",
    }
    calls: list[tuple[str, ...]] = []

    def runner(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        args = tuple(argv)[1:]
        calls.append(args)
        return CommandResult(tuple(argv), 0, answers[args], "")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "qconf"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    from elb.schedulers.sge.config import SgeConfig

    sge = SgeCommands(SgeConfig(bin_dir=bin_dir), runner=runner)
    site = sge.read_site()
    assert sorted(site.pes) == ["mpi", "smp"]
    assert dict(site.global_values) == {"license": "4"}
    assert site.complexes.get("gpu") is not None
    assert calls[0] == ("-spl",)


def test_dry_run_status_and_jobs_name_each_job_that_is_not_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from elb.cli.main import main
    from elb.service import factory

    sge = FakeSge(T0, jobs=[*UNSERVABLE[:2], pending(20, LONG)], complexes="qconf-sc-site.txt")
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    monkeypatch.setattr(factory, "make_cloud", lambda cfg: FakeCloud(T0))
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 2}}\n")
    assert main(["once", "--dry-run", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "waiting jobs that are not demand (no node is launched for them):" in out
    assert "job 10: unservable: bound to queue other.q: no node group joins it" in out
    assert "job 11: unservable: bound to host foo" in out
    assert main(["status", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not demand, job 10: unservable" in out
    import json

    assert main(["status", "--json", "-c", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["job_id"] for n in doc["not_demand"]] == [10, 11]
    assert main(["jobs", "--json", "-c", str(path)]) == 0
    verdicts = {j["job_id"]: j["why_not"] for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert verdicts[20] is None and verdicts[10].startswith("unservable: bound to queue other.q")
    sge.site_error = "qconf: timed out"
    assert main(["jobs", "-c", str(path)]) == 4
    assert "reading the site's complexes" in capsys.readouterr().err


def test_a_job_held_by_qsub_a_is_not_demand_before_its_start_time(cfg: Config) -> None:
    later = pending(50, LONG)
    bal, sge, cloud = balancer(cfg, [later])
    sge.starts = {50: T0 + 3 * 3600}
    bal.run_pass()
    assert cloud.counter == 0
    (refused,) = bal.last.not_demand
    assert refused.until == T0 + 3 * 3600 and not refused.unservable
    assert refused.describe().startswith("job 50: not yet: qsub -a: not before")
    assert bal.last.unservable_jobs == 0  # not yet is not never
    sge.now = T0 + 3 * 3600 + 1  # its time has come: it is demand
    bal.run_pass()
    assert [i.name for i in cloud.instances.values()] == ["node001"]


def test_start_times_are_read_a_bounded_number_per_pass_and_remembered() -> None:
    from elb.schedulers.sge.starttimes import StartTimes

    sge = FakeSge(T0, starts={3: T0 + 60})
    jobs = [pending(n, 1000 - n) for n in range(1, 121)]
    times = StartTimes(per_pass=50)
    assert times.update(sge, jobs) == {3: T0 + 60}
    assert times.update(sge, jobs) == {3: T0 + 60}
    times.update(sge, jobs)
    asked = [c for c in sge.calls if c.startswith("qstat -j")]
    assert [len(c.split()[-1].split(",")) for c in asked] == [50, 50, 20]  # then never again
    times.update(sge, jobs)
    assert len([c for c in sge.calls if c.startswith("qstat -j")]) == 3
    assert times.update(sge, jobs[3:]) == {}  # job 3 ended: forgotten


def test_unreadable_start_times_hold_the_jobs_back_and_are_asked_again(cfg: Config) -> None:
    from elb.schedulers.sge.starttimes import StartTimes

    class Failing(FakeSge):
        def start_times(self, job_ids: object) -> dict[int, float | None]:
            raise RuntimeError("qstat: Following jobs do not exist: 7")

    times = StartTimes()
    assert times.update(Failing(T0), [pending(7, 60)]) == {}
    assert dict(times.unread) == {7: "qstat: Following jobs do not exist: 7"}  # not demand this pass
    sge = FakeSge(T0, starts={7: T0 + 60})
    assert times.update(sge, [pending(7, 60)]) == {7: T0 + 60}
    assert dict(times.unread) == {}


def test_dry_run_json_is_the_plan_as_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from elb.cli.main import main
    from elb.service import factory

    sge = FakeSge(T0, jobs=[UNSERVABLE[0], pending(20, LONG, slots=2), pending(21, LONG, slots=2)])
    sge.complexes = "qconf-sc-site.txt"
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    monkeypatch.setattr(factory, "make_cloud", lambda cfg: FakeCloud(T0))
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 2}}\n")
    assert main(["once", "--dry-run", "--json", "-c", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["add"] == [{"group": "default", "count": 2, "names": ["node001", "node002"]}]
    assert doc["snapshot"]["jobs_waiting"] == 3 and doc["snapshot"]["slots_waiting"] == 5
    assert doc["groups"][0]["slots"] == 2 and doc["assumptions"]["slots_per_node_from"] == "policy.slots_per_node"
    assert [n["job_id"] for n in doc["unservable"]] == [10] and doc["not_yet"] == []
    assert doc["remove"] == []
    assert main(["once", "--json", "-c", str(path)]) == 2  # --json is for the dry run
