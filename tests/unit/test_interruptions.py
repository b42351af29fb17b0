"""Jobs that spot interruptions keep requeueing go to on-demand nodes: the pure rule
(``elb.core.interruptions``), its limit (``policy.spot_interruptions_allowed``, and its older name
``cloud.ec2.spot_interruptions_allowed``), the journal's count per job, and each driver's way of
binding (``elb.core.scheduler.BindsOnDemand``): Grid Engine gives such a job a hard request only
on-demand nodes satisfy (``qalter -l``, answer recorded in tests/unit/test_sge_commands.py),
Slurm moves it to the on-demand groups' partitions. A driver without the capability:
tests/unit/test_third_scheduler.py."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from elb.core.config import ConfigError, parse_config
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.interfaces import Notice, NoticeKind
from elb.core.interruptions import job_number, moves
from elb.core.scheduler import BindsOnDemand, SchedulerError
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.ondemand import on_demand_request, with_request
from elb.schedulers.slurm.driver import Slurm
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import BalancerCollector
from tests.unit.factories import T0, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge
from tests.unit.slurm_fakes import FakeSlurm
from tests.unit.test_notices import Notices


def groups(*offers: tuple[str, dict[str, str]]) -> NodeGroups:
    made = [
        NodeGroup.model_validate(dict(name=f"g{i}", slots=8, max_nodes=4, market=market, offers=o))
        for i, (market, o) in enumerate(offers)
    ]
    return NodeGroups(groups=made)


SPLIT = groups(("spot", {"market": "spot"}), ("on-demand", {"market": "on-demand", "h_vmem": "30G"}))


def test_job_numbers_of_jobs_and_array_tasks() -> None:
    assert job_number("123") == 123 and job_number("123.4") == 123
    with pytest.raises(ValueError, match="not a job number"):
        job_number("123.x")


def test_the_on_demand_request_is_a_value_no_spot_group_offers() -> None:
    assert on_demand_request(SPLIT) == ("market", "on-demand")
    same = groups(("spot", {"h_vmem": "30G"}), ("on-demand", {"h_vmem": "30G"}))
    assert on_demand_request(same) is None
    assert on_demand_request(groups(("spot", {}))) is None  # no on-demand group at all


def test_only_jobs_interrupted_more_than_allowed_and_not_moved_yet_move() -> None:
    counts = [(7, 2, False), (8, 3, False), (9, 5, True)]
    out = moves(counts, 2, {8: {"h_rt": "3600", "market": "spot"}})
    assert [m.job for m in out] == [8]
    assert dict(out[0].hard_requests) == {"h_rt": "3600", "market": "spot"}  # as the read listed them
    assert out[0].reason == "requeued by 3 spot interruptions (more than 2)"


def test_grid_engines_request_keeps_the_jobs_own_and_replaces_the_complexs_value() -> None:
    merged = with_request({"h_rt": "3600", "market": "spot"}, ("market", "on-demand"))
    assert merged == {"h_rt": "3600", "market": "on-demand"}


def test_without_an_on_demand_only_value_grid_engine_cannot_bind_and_says_why() -> None:
    sge = FakeSge(T0)
    driver = GridEngine(parse_config({}), sge)
    with pytest.raises(SchedulerError, match=r"no on-demand node group offers .* may land on spot again"):
        driver.bind_on_demand(8, {}, groups(("spot", {}), ("on-demand", {})))
    assert sge.calls == []


@pytest.mark.parametrize(
    "raw",
    [
        {"policy": {"spot_interruptions_allowed": 3}},
        {"cloud": {"ec2": {"spot_interruptions_allowed": 3}}},  # the older name, as configs have it
        {"policy": {"spot_interruptions_allowed": 3}, "cloud": {"ec2": {"spot_interruptions_allowed": 3}}},
    ],
)
def test_the_limit_is_the_policys_and_its_older_name_means_the_same(raw: dict[str, object]) -> None:
    assert parse_config(raw).policy.spot_interruptions_allowed == 3
    assert parse_config({}).policy.spot_interruptions_allowed == 2


def test_the_limit_given_twice_differently_is_an_error() -> None:
    raw = {"policy": {"spot_interruptions_allowed": 3}, "cloud": {"ec2": {"spot_interruptions_allowed": 2}}}
    with pytest.raises(ConfigError, match=r"policy\.spot_interruptions_allowed: 3 differs from cloud\.ec2"):
        parse_config(raw)
    with pytest.raises(ConfigError, match=r"cloud\.ec2\.spot_interruptions_allowed: .*greater than or equal to 1"):
        parse_config({"cloud": {"ec2": {"spot_interruptions_allowed": 0}}})


def test_slurm_binds_by_the_on_demand_groups_partitions(tmp_path: Path) -> None:
    spot = {"name": "spot", "slots": 2, "max_nodes": 4, "market": "spot"}
    ondemand = {"name": "ondemand", "slots": 2, "max_nodes": 2}
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp_path),
            "node_groups": [spot, ondemand],
            "slurm": {"partition_groups": {"cloud": "spot", "safe": "ondemand", "safe2": "ondemand"}},
        }
    )
    slurm = FakeSlurm()
    driver = Slurm(cfg, Journal(cfg.journal_path), slurm)
    assert isinstance(driver, BindsOnDemand)
    how = driver.bind_on_demand(7, {"h_rt": "3600"}, cfg.groups(2))
    assert slurm.calls == [("partition", "7", "safe,safe2")]
    assert how == "it now runs only in safe, safe2, the partitions of the on-demand node groups"
    only_spot = parse_config({"scheduler": "slurm", "state_dir": str(tmp_path), "node_groups": [spot]})
    with pytest.raises(SchedulerError, match="no partition of an on-demand node group"):
        Slurm(only_spot, Journal(cfg.journal_path), slurm).bind_on_demand(7, {}, only_spot.groups(2))


def test_the_journal_counts_each_job_once_per_interruption(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite")
    assert j.count_interruptions([7, 7, 8], T0) == [(7, 1, False), (8, 1, False)]  # two tasks of 7: once
    j.mark_moved(7)
    assert j.count_interruptions([7], T0 + 60) == [(7, 2, True)]
    j.prune_events(T0 + 30)  # 8 was last interrupted before: forgotten
    assert j.count_interruptions([8], T0 + 90) == [(8, 1, False)]


def _cluster(
    tmp_path: Path, allowed: int, node_groups: list[dict[str, object]] | None = None, *, older_name: bool = False
) -> tuple[Balancer, FakeSge, FakeCloud, Notices]:
    """``older_name``: the limit given as ``cloud.ec2.spot_interruptions_allowed``."""
    policy = {"max_nodes": 4} if node_groups is not None else {"max_nodes": 4, "slots_per_node": 8, "min_nodes": 1}
    raw: dict[str, object] = {"state_dir": str(tmp_path), "policy": policy}
    if older_name:
        raw["cloud"] = {"ec2": {"spot_interruptions_allowed": allowed}}
    else:
        raw["policy"] = {**policy, "spot_interruptions_allowed": allowed}
    if node_groups is not None:
        raw["node_groups"] = node_groups
    cfg = parse_config(raw)
    sge, cloud, notices = FakeSge(T0), FakeCloud(T0), Notices()
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
        notices=notices,
    )
    return bal, sge, cloud, notices


def _interrupt(bal: Balancer, sge: FakeSge, cloud: FakeCloud, notices: Notices) -> None:
    """Job 7 runs on node001 (again) and node001 gets a spot interruption warning."""
    sge.jobs = [dataclasses.replace(running(7, "node001"), hard_requests={"h_rt": "3600"})]
    iid = next(i for i, inst in cloud.instances.items() if inst.name == "node001")
    notices.notices = [Notice(NoticeKind.INTERRUPTION, iid, T0, "spot interruption")]
    assert bal.run_pass().ok


@pytest.mark.parametrize("older_name", [False, True])
def test_a_job_interrupted_once_too_often_requests_on_demand_nodes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, older_name: bool
) -> None:
    spot = {"name": "spot", "slots": 8, "max_nodes": 4, "min_nodes": 1, "market": "spot", "offers": {"market": "spot"}}
    ondemand = {"name": "ondemand", "slots": 8, "max_nodes": 2, "offers": {"market": "on-demand"}}
    bal, sge, cloud, notices = _cluster(tmp_path, 1, [spot, ondemand], older_name=older_name)
    bal.run_pass()  # min_nodes: node001 of the spot group
    assert bal.journal.node("node001") is not None
    _interrupt(bal, sge, cloud, notices)
    assert not any(c.startswith("qalter") for c in sge.calls)  # once is allowed
    with caplog.at_level(logging.WARNING, logger="elb"):
        _interrupt(bal, sge, cloud, notices)
    assert [c for c in sge.calls if c.startswith("qalter")] == ["qalter -l h_rt=3600,market=on-demand 7"]
    assert (
        "job 7: requeued by 2 spot interruptions (more than 1): it now requests market=on-demand, which only "
        "on-demand nodes offer"
    ) in [r.getMessage() for r in caplog.records]
    assert bal.counters.moved_on_demand == 1
    metric = [m for m in BalancerCollector(bal).collect() if m.name == "elb_jobs_moved_on_demand"]
    assert metric[0].samples[0].value == 1
    _interrupt(bal, sge, cloud, notices)  # moved already: not again
    assert len([c for c in sge.calls if c.startswith("qalter")]) == 1


def test_with_one_group_a_job_interrupted_too_often_is_named_in_an_alarm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bal, sge, cloud, notices = _cluster(tmp_path, 1)
    bal.run_pass()
    _interrupt(bal, sge, cloud, notices)
    with caplog.at_level(logging.ERROR, logger="elb"):
        _interrupt(bal, sge, cloud, notices)
    assert not any(c.startswith("qalter") for c in sge.calls)
    assert any(r.getMessage().startswith("ALARM: job 7: requeued by 2 spot interruptions") for r in caplog.records)
