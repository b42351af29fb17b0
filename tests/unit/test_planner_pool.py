"""The warm pool in the pure pass (``plan_pass`` with ``elb.core.poolplan``): stops instead of
removals, restarts instead of launches, pooled nodes past their limits terminated; each with
its reason. Values in, values out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elb.core.backoff import Backoff, Backoffs, Cause
from elb.core.config import Config
from elb.core.demand import DemandSplit
from elb.core.interfaces import Instance
from elb.core.model import History, Node, NodeState, Snapshot
from elb.core.orders import Orders
from elb.core.planner import PassInputs, PassPlan, plan_pass
from elb.core.policy.grouped import policy_for
from tests.unit.factories import EC2, T0, host, node, pending, small_config, snap


def config(tmp_path: Path, **pool: Any) -> Config:
    warm = {"max_nodes": 2, "max_age": 7200, "restart_time": 60, **pool}
    return small_config(tmp_path, add_nodes_per_iteration=2, shrink="timer", boot_time=300, warm_pool=warm)


def stopped(name: str, ago: float, **kw: Any) -> Node:
    return node(name, 86400, state=NodeState.STOPPED, stopped_at=T0 - ago, instance_id=f"i-{name}", **kw)


def pass_of(cfg: Config, snapshot: Snapshot, nodes: tuple[Node, ...], **kw: Any) -> PassPlan:
    instances = tuple(
        Instance(f"i-{n.name}", n.name, "stopped" if n.state.pooled else "running", T0 - 86400, "10.0.0.9")
        for n in nodes
    )
    inputs = PassInputs(
        snapshot=snapshot,
        nodes=nodes,
        instances=instances,
        demand=kw.pop("demand", DemandSplit(snapshot)),
        history=History(),
        orders=Orders(),
        backoff=kw.pop("backoff", Backoffs()),
        scheduler="SGE",
        cloud=EC2,
        **kw,
    )
    return plan_pass(inputs, cfg, policy_for(cfg), T0)


IDLE = node("node001", 3500, instance_id="i-node001")  # idle for long: the timer rule removes it
WAITING = snap([pending(1, 600, slots=8)])


def test_an_idle_node_of_a_group_with_a_pool_is_stopped_with_its_reason(tmp_path: Path) -> None:
    p = pass_of(config(tmp_path), snap(hosts=[host("node001")]), (IDLE,))
    assert p.scaling is not None and p.scaling.remove == ()
    [stop] = p.pool.stops
    assert stop.node == "node001"
    assert "stopped into the warm pool (1/2)" in stop.reason and "instead of a 5 min boot" in stop.reason


def test_without_a_pool_the_idle_node_is_removed(tmp_path: Path) -> None:
    p = pass_of(config(tmp_path, max_nodes=0), snap(hosts=[host("node001")]), (IDLE,))
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node001"]
    assert p.pool.stops == ()


def test_a_full_pool_terminates_and_says_so(tmp_path: Path) -> None:
    pooled = (stopped("node002", 60), stopped("node003", 120))
    p = pass_of(config(tmp_path), snap(hosts=[host("node001")]), (IDLE, *pooled))
    assert p.scaling is not None and p.pool.stops == ()
    [removal] = p.scaling.remove
    assert removal.node == "node001" and "the warm pool is full (2/2 stopped)" in removal.reason


def test_a_node_being_stopped_takes_its_room_in_the_pool(tmp_path: Path) -> None:
    on_its_way = node("node002", 86400, state=NodeState.STOPPING, instance_id="i-node002")
    p = pass_of(
        config(tmp_path, max_nodes=1),
        snap(hosts=[host("node001")]),
        (IDLE, on_its_way),
        in_flight=frozenset({"node002"}),
    )
    assert p.pool.stops == ()
    assert p.scaling is not None and "full (1/1" in p.scaling.remove[0].reason


def test_a_restart_that_saves_nothing_is_a_termination(tmp_path: Path) -> None:
    p = pass_of(config(tmp_path, restart_time=300), snap(hosts=[host("node001")]), (IDLE,))
    assert p.scaling is not None and "no faster than a boot" in p.scaling.remove[0].reason


def test_a_launch_restarts_the_youngest_pooled_node_instead(tmp_path: Path) -> None:
    pooled = (stopped("node002", 600), stopped("node003", 60))
    hosts = [host("node002", states="du"), host("node003", states="du")]
    p = pass_of(config(tmp_path), snap([pending(1, 600, slots=8)], hosts), pooled)
    assert [r.node for r in p.pool.restarts] == ["node003"]
    assert "instead of launching node004" in p.pool.restarts[0].reason
    assert "the youngest of 2" in p.pool.restarts[0].reason
    assert p.scaling is not None and p.scaling.add == 0 and p.wanted == 0


def test_pooled_hosts_are_no_size_for_the_policy(tmp_path: Path) -> None:
    # max_nodes 4: two pooled exec hosts (disabled, out of reach) would leave room for two nodes
    # if they counted; they don't: four are wanted, two restarted, two launched.
    pooled = (stopped("node001", 600), stopped("node002", 60))
    hosts = [host("node001", states="du"), host("node002", states="du")]
    jobs = [pending(i, 600, slots=8) for i in range(1, 5)]
    cfg = small_config(
        tmp_path, add_nodes_per_iteration=4, boot_time=300, warm_pool={"max_nodes": 2, "restart_time": 60}
    )
    p = pass_of(cfg, snap(jobs, hosts), pooled)
    assert sorted(r.node for r in p.pool.restarts) == ["node001", "node002"]
    assert p.scaling is not None and p.scaling.add == 2
    assert not {"node001", "node002"} & set(p.scaling.add_names)  # new names never reuse a pooled one


def test_the_back_off_holds_launches_not_restarts(tmp_path: Path) -> None:
    backoff = Backoffs(
        default=Backoff(rounds=2, next_launch_at=T0 + 300, cause=Cause.PROVISION, last_failure="node009: failed")
    )
    p = pass_of(config(tmp_path), WAITING, (stopped("node002", 60),), backoff=backoff)
    assert [r.node for r in p.pool.restarts] == ["node002"]
    assert p.launches_held == 0


def test_pooled_nodes_past_max_age_or_beyond_the_pool_size_are_terminated(tmp_path: Path) -> None:
    old = stopped("node001", 7200)
    p = pass_of(config(tmp_path), snap(), (old,))
    assert [(r.node, r.reason) for r in p.pool.expire] == [
        ("node001", "stopped 120 min: max_age reached (group default's warm pool)")
    ]
    three = (stopped("node001", 300), stopped("node002", 200), stopped("node003", 100))
    p = pass_of(config(tmp_path), snap(), three)
    assert [r.node for r in p.pool.expire] == ["node001"]
    assert "holds 3 > max_nodes 2: the oldest goes" in p.pool.expire[0].reason


def test_a_pool_turned_off_lets_its_nodes_go(tmp_path: Path) -> None:
    p = pass_of(config(tmp_path, max_nodes=0), snap(), (stopped("node001", 60),))
    assert [r.node for r in p.pool.expire] == ["node001"]


def test_a_pooled_node_of_an_older_template_version_is_terminated_not_restarted(tmp_path: Path) -> None:
    old = stopped("node002", 60, template_version="3")
    p = pass_of(config(tmp_path), WAITING, (old,), template_versions={"default": "4"})
    assert [r.node for r in p.pool.expire] == ["node002"]
    assert "launch template version 3, group default's is now 4" in p.pool.expire[0].reason
    assert p.pool.restarts == ()
    assert p.scaling is not None and p.scaling.add == 1
    same = pass_of(config(tmp_path), WAITING, (old,), template_versions={"default": "3"})
    assert [r.node for r in same.pool.restarts] == ["node002"] and same.pool.expire == ()


def test_a_pooled_node_in_flight_is_left_alone(tmp_path: Path) -> None:
    p = pass_of(config(tmp_path), WAITING, (stopped("node002", 7200),), in_flight=frozenset({"node002"}))
    assert p.pool.expire == () and p.pool.restarts == ()


def test_expiry_goes_on_while_scaling_waits(tmp_path: Path) -> None:
    p = pass_of(config(tmp_path), WAITING, (stopped("node002", 7200),), demand=None, demand_error="site unreadable")
    assert p.scaling is None and [r.node for r in p.pool.expire] == ["node002"]
