"""The metrics endpoint with ``scheduler: slurm``: ``elb run`` serves it, and the pass's figures
(nodes by state, launches, removals, failures, the back-off, waiting jobs, spend) are what
Prometheus reads, every metric as with Grid Engine. Stand-ins for Slurm's commands, the cloud
and the playbooks (tests/unit/slurm_fakes.py, tests/unit/test_slurm_pass.py); the endpoint on
localhost."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from elb.cli import commands
from elb.cli.main import main
from elb.core.config import Config, parse_config
from elb.core.exitcodes import Exit
from elb.schedulers.slurm.config import slurm_settings
from elb.schedulers.slurm.driver import Slurm
from elb.schedulers.slurm.parse import SlurmJob
from elb.schedulers.slurm.requests import RequestKind, write
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import metrics_registry
from tests.ports import free_port
from tests.unit.slurm_fakes import NOW, FakeSlurm
from tests.unit.test_slurm_pass import Cloud, Playbooks


def values(body: str) -> dict[str, float]:
    """``name{labels}`` -> value of each sample in a scrape."""
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in body.splitlines() if line and line[0] != "#")}


def slurm_cfg(tmp: Path, **extra: object) -> Config:
    (tmp / "requests").mkdir(exist_ok=True)
    return parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp / "state"),
            "policy": {"max_nodes": 4, "billing": "second", "idle_time": 3600},
            "node_groups": [{"name": "cloud", "slots": 2, "max_nodes": 4, "price_per_hour": 0.25}],
            "slurm": {"requests": str(tmp / "requests"), "partition_groups": {"cloud": "cloud"}},
            "cloud": {"provider": "local"},
            **extra,
        }
    )


def fake_slurm() -> FakeSlurm:
    slurm = FakeSlurm()
    slurm.add("node001", "node002")
    return slurm


def balancer(cfg: Config, slurm: FakeSlurm, books: Playbooks, clock: list[float]) -> Balancer:
    journal = Journal(cfg.journal_path)
    return Balancer(
        cfg,
        scheduler=Slurm(cfg, journal, slurm),
        journal=journal,
        cloud=Cloud(),
        provisioner=books,
        clock=lambda: clock[0],
    )


def scrape(bal: Balancer) -> dict[str, float]:
    return values(generate_latest(metrics_registry(bal, bal.metrics)).decode())


def waiting_job(job_id: str, cpus: int, waited: float) -> SlurmJob:
    return SlurmJob(job_id, "cloud", "PENDING", "Resources", 1, cpus, (), NOW - waited, None, None, "u", "j")


def test_elb_run_with_slurm_serves_the_metrics_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    cfg_path = tmp_path / "elb.yml"
    (tmp_path / "requests").mkdir()
    cfg_path.write_text(
        f"scheduler: slurm\nstate_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\n"
        f"slurm: {{requests: {tmp_path / 'requests'}}}\nmetrics_port: {port}\n"
    )
    slurm, books = fake_slurm(), Playbooks()
    slurm.ask("node001")
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: Slurm(cfg, journal, slurm))
    monkeypatch.setattr(factory, "make_cloud", lambda cfg: Cloud())
    monkeypatch.setattr(factory, "make_provisioner", lambda cfg: books)
    scraped: list[str] = []

    def one_pass_then_scrape(bal: Balancer, interval: float) -> None:
        import time

        write(slurm_settings(bal.config).requests, RequestKind.RESUME, "node001", time.time() - 1)
        assert bal.run_pass().ok
        url = f"http://127.0.0.1:{port}/metrics"
        scraped.append(urllib.request.urlopen(url, timeout=5).read().decode())

    monkeypatch.setattr(commands, "run_forever", one_pass_then_scrape)
    assert main(["run", "-c", str(cfg_path)]) == Exit.OK
    got = values(scraped[0])
    assert got['elb_nodes{state="ready"}'] == 1.0
    assert got["elb_nodes_added_total"] == 1.0
    assert got['elb_passes_total{outcome="ok"}'] == 1.0


def test_the_slurm_pass_feeds_the_gauges_and_counters(tmp_path: Path) -> None:
    cfg = slurm_cfg(tmp_path)
    clock = [NOW]
    slurm, books = fake_slurm(), Playbooks()
    slurm.jobs = [waiting_job("7", 4, 600), waiting_job("8_[1-3]", 2, 60)]
    slurm.ask("node001")
    bal = balancer(cfg, slurm, books, clock)
    write(slurm_settings(cfg).requests, RequestKind.RESUME, "node001", NOW - 1)
    assert bal.run_pass().ok
    got = scrape(bal)
    assert got['elb_nodes{state="ready"}'] == 1.0 and got['elb_nodes{state="provisioning"}'] == 0.0
    assert got["elb_nodes_added_total"] == 1.0 and got["elb_nodes_removed_total"] == 0.0
    assert got['elb_passes_total{outcome="ok"}'] == 1.0 and got['elb_passes_total{outcome="failed"}'] == 0.0
    assert got["elb_launch_to_ready_seconds_count"] == 1.0
    assert got["elb_last_good_pass_timestamp_seconds"] == NOW
    assert got['elb_spend_dollars_per_hour{group="cloud"}'] == 0.25
    # Slurm's pending jobs that wait for nodes: a job of 4 CPUs and an array's three tasks of 2.
    assert (got["elb_waiting_jobs"], got["elb_waiting_slots"], got["elb_oldest_wait_seconds"]) == (2.0, 10.0, 600.0)
    assert (got["elb_launch_backoff_rounds"], got["elb_launch_backoff_seconds"]) == (0.0, 0.0)

    # Slurm suspends the node: the next pass removes it.
    clock[0] = NOW + 60
    slurm.jobs = []
    slurm.set_flags("node001", "idle", "powering_down")
    write(slurm_settings(cfg).requests, RequestKind.SUSPEND, "node001", NOW + 59)
    assert bal.run_pass().ok
    got = scrape(bal)
    assert got['elb_nodes{state="ready"}'] == 0.0 and got["elb_nodes_removed_total"] == 1.0
    assert got["elb_waiting_jobs"] == 0.0 and got['elb_spend_dollars_per_hour{group="cloud"}'] == 0.0
    assert got["elb_node_failures_total"] == 0.0 and got["elb_last_good_pass_timestamp_seconds"] == NOW + 60


def test_failed_bring_ups_back_off_and_the_held_launches_are_counted(tmp_path: Path) -> None:
    cfg = slurm_cfg(tmp_path)
    clock = [NOW]
    slurm, books = fake_slurm(), Playbooks(ok=False)
    # A ResumeTimeout above boot, play and registration (what ``elb validate`` asks for).
    slurm.resume_timeout_s = 1920.0
    slurm.ask("node001")
    bal = balancer(cfg, slurm, books, clock)
    write(slurm_settings(cfg).requests, RequestKind.RESUME, "node001", NOW - 1)
    assert bal.run_pass().ok
    got = scrape(bal)
    assert got["elb_node_failures_total"] == 1.0 and got["elb_nodes_added_total"] == 0.0
    assert got['elb_nodes{state="ready"}'] == 0.0
    # The back-off this pass planned with is the one before the failure; the next pass sees it.
    clock[0] = NOW + 10
    slurm.ask("node001")  # the failed node was given back (powered down); Slurm asks again
    write(slurm_settings(cfg).requests, RequestKind.RESUME, "node001", NOW + 9)
    assert bal.run_pass().ok
    got = scrape(bal)
    assert got["elb_launch_backoff_rounds"] == 1.0
    assert 0 < got["elb_launch_backoff_seconds"] <= cfg.backoff.initial
    assert got["elb_launches_held_total"] == 1.0  # launching backed off
    # Slurm waits ResumeTimeout for the node, long enough for the back-off, a boot, a play and a
    # registration: the ask stays open for the back-off's end.
    assert got["elb_nodes_given_back_total"] == 0.0


def test_a_failed_slurm_pass_is_counted_and_keeps_the_last_good_time(tmp_path: Path) -> None:
    from elb.schedulers.slurm.commands import SlurmError, SlurmRead

    cfg = slurm_cfg(tmp_path)
    clock = [NOW]
    slurm = fake_slurm()
    bal = balancer(cfg, slurm, Playbooks(), clock)
    assert bal.run_pass().ok

    def broken(*, mine: object = None) -> SlurmRead:
        raise SlurmError("sinfo: cannot reach slurmctld")

    slurm.read = broken  # type: ignore[method-assign]
    clock[0] = NOW + 60
    assert not bal.run_pass().ok
    got = scrape(bal)
    assert got['elb_passes_total{outcome="failed"}'] == 1.0 and got['elb_passes_total{outcome="ok"}'] == 1.0
    assert got["elb_last_good_pass_timestamp_seconds"] == NOW
    assert got["elb_pass_duration_seconds_count"] == 2.0


def test_every_metric_is_served_with_slurm_as_with_grid_engine(tmp_path: Path) -> None:
    """One pass for every scheduler: the same metrics, warm pool and notices included."""
    cfg = slurm_cfg(tmp_path)
    bal = balancer(cfg, fake_slurm(), Playbooks(), [NOW])
    assert bal.run_pass().ok
    served = {k.split("{")[0] for k in scrape(bal)}
    for name in (
        "elb_unservable_jobs",
        "elb_lost_nodes_kept",
        "elb_nodes_given_back_total",
        "elb_jobs_rescheduled_total",
    ):
        assert name in served
    assert 'elb_nodes{state="stopped"}' in scrape(bal)
