"""Money, not only node-hours: billed time by EC2's rule, each node group's spend in ``elb status``
(text and JSON) and the ``elb_spend_dollars_per_hour`` gauge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import load_config
from elb.core.exitcodes import Exit
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Node, NodeState
from elb.core.spend import billed_seconds, lives, spend_by_group
from elb.core.warmpool import WarmPool
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import BalancerCollector
from tests.unit.factories import T0
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

PRICED = """\
cloud: {provider: local}
state_dir: STATE
policy: {max_nodes: 6, billing: second}
node_groups:
  - {name: small, slots: 2, max_nodes: 4, price_per_hour: 0.5}
  - {name: big, slots: 8, max_nodes: 2, price_per_hour: 2.0}
"""


def groups(priced: bool = True) -> NodeGroups:
    return NodeGroups(
        groups=[
            NodeGroup(name="small", slots=2, max_nodes=4, price_per_hour=0.5 if priced else None),
            NodeGroup(name="big", slots=8, max_nodes=2, price_per_hour=2.0 if priced else None),
        ]
    )


def node(name: str, launched: float, group: str | None, state: NodeState = NodeState.READY) -> Node:
    return Node(name, state, launched_at=launched, group=group)


@pytest.mark.parametrize(
    ("up", "billing", "billed"),
    [
        (0.0, "second", 60.0),  # the 60 s minimum
        (59.0, "second", 60.0),
        (61.5, "second", 61.5),
        (-5.0, "second", 60.0),  # a clock step back bills nothing less than the minimum
        (1.0, "hour", 3600.0),  # every started hour
        (3600.0, "hour", 3600.0),
        (3601.0, "hour", 7200.0),
    ],
)
def test_billed_seconds_follow_ec2s_rule(up: float, billing: str, billed: float) -> None:
    assert billed_seconds(up, billing, 3600.0) == billed  # type: ignore[arg-type]


def test_spend_per_group_counts_the_nodes_up_now_at_their_groups_price() -> None:
    nodes = [
        node("node001", T0 - 3600, "small"),
        node("node002", T0 - 1800, "big"),
        node("node003", T0 - 600, None),  # no group recorded: the first group's
        node("node004", T0 - 7200, "gone-group"),  # a group no longer configured: the first group's
        node("node005", T0 - 9000, "big", NodeState.TERMINATED),  # not up: not counted
    ]
    small, big = spend_by_group(nodes, groups(), T0, "second")
    assert (small.nodes, big.nodes) == (3, 1)
    assert small.node_hours == pytest.approx(1.0 + 600 / 3600 + 2.0)
    assert small.money == pytest.approx(small.node_hours * 0.5) and small.per_hour == pytest.approx(1.5)
    assert big.node_hours == pytest.approx(0.5) and big.money == pytest.approx(1.0) and big.per_hour == 2.0
    assert (
        big.describe() == "group big: 1 node up, 0.5 node-hours billed so far at 2/h: 1.00 so far, spending 2.00/h now"
    )


def test_the_rate_counts_the_volumes_of_nodes_stopped_in_the_warm_pool() -> None:
    """A stopped node costs its volumes (the group's ``warm_pool.volume_price_per_hour``) while it
    waits in the pool: the rate spent now counts them; billed node-hours do not."""
    pooled = NodeGroups(
        groups=[
            NodeGroup(
                name="small", slots=2, max_nodes=4, price_per_hour=0.5, warm_pool=WarmPool(volume_price_per_hour=0.02)
            ),
            NodeGroup(name="big", slots=8, max_nodes=2, price_per_hour=2.0),
        ]
    )
    nodes = [
        node("node001", T0 - 3600, "small"),
        node("node002", T0 - 3600, "small", NodeState.STOPPED),
        node("node003", T0 - 3600, "small", NodeState.STOPPING),
        node("node004", T0 - 3600, "big", NodeState.STOPPED),  # its group's volumes are free here
    ]
    small, big = spend_by_group(nodes, pooled, T0, "second")
    assert (small.nodes, small.stopped, big.nodes, big.stopped) == (1, 2, 0, 1)
    assert small.node_hours == pytest.approx(1.0)
    assert small.per_hour == pytest.approx(0.5 + 2 * 0.02) and big.per_hour == 0.0
    assert small.describe() == (
        "group small: 1 node up, 2 stopped in the warm pool, 1.0 node-hours billed so far at 0.5/h: "
        "0.50 so far, spending 0.54/h now"
    )


def test_without_prices_spend_is_node_hours_only() -> None:
    (small, _big) = spend_by_group([node("node001", T0 - 1800, "small")], groups(priced=False), T0, "hour")
    assert small.node_hours == 1.0 and small.money is None and small.per_hour is None
    assert small.describe() == "group small: 1 node up, 1.0 node-hours billed so far"


def test_status_and_the_gauge_give_each_groups_spend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(PRICED.replace("STATE", str(tmp_path / "state")))
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    journal.record("node001", NodeState.READY, T0 - 3000, launched_at=T0 - 3600, slots=2, group="small")
    journal.record("node002", NodeState.READY, T0 - 1200, launched_at=T0 - 1800, slots=8, group="big")
    journal.close()
    sge = FakeSge(T0, jobs=[])
    sge.add_host("node001", 2)
    sge.add_host("node002", 8)
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    assert main(["status", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "group small: 1 node up, 1.0 node-hours billed so far at 0.5/h: 0.50 so far, spending 0.50/h now" in out
    assert "group big: 1 node up, 0.5 node-hours billed so far at 2/h: 1.00 so far, spending 2.00/h now" in out
    assert main(["status", "-c", str(path), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)
    assert [(g["group"], g["nodes"], g["per_hour"]) for g in doc["groups"]] == [("small", 1, 0.5), ("big", 1, 2.0)]

    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=FakeCloud(T0),
        provisioner=FakeProvisioner(sge),
        clock=lambda: T0,
    )
    spend = next(m for m in BalancerCollector(bal).collect() if m.name == "elb_spend_dollars_per_hour")
    assert {s.labels["group"]: s.value for s in spend.samples} == {"small": 0.5, "big": 2.0}
    journal.close()


def test_each_life_of_a_reused_name_is_billed_from_its_own_launch(tmp_path: Path) -> None:
    """node001 of group small ran an hour and went; launched again under its name 8 s ago: the
    spend of the nodes up now bills the new node from its request, not from the gone one's
    launch; the journal's stretches give each life its own."""
    j = Journal(tmp_path / "journal.sqlite")
    j.record("node001", NodeState.REQUESTED, T0 - 7200, group="small")
    j.record("node001", NodeState.RUNNING, T0 - 7190, instance_id="i-1", slots=2, launched_at=T0 - 7195)
    j.record("node001", NodeState.READY, T0 - 7100)
    j.record("node001", NodeState.TERMINATED, T0 - 3600)
    j.record("node001", NodeState.REQUESTED, T0 - 8, group="small")
    small, _big = spend_by_group(j.nodes(), groups(), T0, "second")
    assert small.nodes == 1 and small.node_hours == pytest.approx(60 / 3600)  # EC2's minimum
    booting, _ = lives(j.nodes(include_gone=True), j.events(), groups())
    assert [(life.start, life.end) for life in booting] == [(T0 - 7190, T0 - 3600)]  # the new one runs no instance yet
    j.record("node001", NodeState.RUNNING, T0 + 20, instance_id="i-2", slots=2, launched_at=T0 + 15)
    found, _ = lives(j.nodes(include_gone=True), j.events(), groups())
    j.close()
    assert [(life.start, life.end, life.slots) for life in found] == [(T0 - 7190, T0 - 3600, 2), (T0 + 15, None, 2)]
