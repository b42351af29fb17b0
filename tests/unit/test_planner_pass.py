"""The whole pass as one pure function: ``plan_pass(inputs, config, policy, now)``. What a pass
read goes in as values; the repairs, the scaling plan and their reasons come out. No journal,
no cloud, no SGE: the daemon's tests check that it carries the plan out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from elb.core.backoff import Backoff, Backoffs, Cause
from elb.core.config import Config
from elb.core.demand import DemandSplit
from elb.core.interfaces import InstanceWord
from elb.core.model import History, Node, NodeState, Snapshot, WitnessKeep
from elb.core.orders import Orders
from elb.core.planner import (
    WITNESS_HOLD,
    WITNESS_SILENT_HOLD,
    PassInputs,
    PassPlan,
    plan_pass,
    scale,
    scaling_waits,
)
from elb.core.policy.grouped import policy_for
from elb.core.reconcile import RepairKind
from tests.unit.factories import EC2, T0, host, instance, node, pending, running, small_config, snap


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return small_config(tmp_path, add_nodes_per_iteration=2, shrink="timer")


def inputs(snapshot: Snapshot, **kw: object) -> PassInputs:
    """A pass's inputs with an empty journal and cloud unless given, and all waiting jobs demand."""
    values: dict[str, object] = {
        "snapshot": snapshot,
        "nodes": (),
        "instances": (),
        "demand": DemandSplit(snapshot),
        "history": History(),
        "orders": Orders(),
        "backoff": Backoffs(),
        "scheduler": "SGE",
        "cloud": EC2,
    }
    values.update(kw)
    return PassInputs(**values)  # type: ignore[arg-type]


def plan(cfg: Config, **kw: object) -> PassPlan:
    snapshot = kw.pop("snapshot", snap([pending(1, 600, slots=8), pending(2, 600, slots=8)]))
    assert isinstance(snapshot, Snapshot)
    return plan_pass(inputs(snapshot, **kw), cfg, policy_for(cfg), T0)


# A node the journal has as ready whose instance the cloud no longer lists: a repair.
VANISHED = node("node001", 3600, instance_id="i-node001")


def test_waiting_jobs_and_no_repair_give_a_launch_with_its_reason(cfg: Config) -> None:
    p = plan(cfg)
    assert p.repairs == () and p.scaling is not None
    assert p.scaling.add == 2 and p.scaling.add_names == ("node001", "node002")
    assert p.scaling.add_reason
    assert p.wanted == 2 and p.launches_held == 0


def test_a_repair_comes_first_and_scaling_waits_for_the_next_pass(cfg: Config) -> None:
    p = plan(cfg, nodes=(VANISHED,))
    assert [r.kind for r in p.repairs] == [RepairKind.VANISHED]
    assert p.scaling is None and "scaling waits" in p.scaling_note


def test_a_node_with_an_operation_in_flight_gets_no_repair_and_scaling_goes_on(cfg: Config) -> None:
    p = plan(cfg, nodes=(VANISHED,), in_flight=frozenset({"node001"}))
    assert p.repairs == ()
    assert p.scaling is not None and p.scaling.add == 2


def test_stuck_repairs_are_named_and_scaling_goes_on_around_them(cfg: Config) -> None:
    fails = {(RepairKind.VANISHED, "node001"): cfg.failed_passes_alarm}
    p = plan(cfg, nodes=(VANISHED,), repair_fails=fails)
    assert [r.node for r in p.stuck] == ["node001"] and [r.node for r in p.repairs] == ["node001"]
    assert p.scaling is not None and p.scaling.add == 2


def test_scaling_never_removes_a_node_under_repair_or_in_flight(cfg: Config) -> None:
    # Two idle ready nodes the timer rule would remove, no waiting job.
    a = node("node001", 3500, instance_id="i-node001")
    b = node("node002", 3500, instance_id="i-node002")
    c = node("node003", 3500, instance_id="i-node003")
    idle = snap(hosts=[host("node001"), host("node002"), host("node003")])
    free = plan_pass(
        inputs(idle, nodes=(a, b, c), instances=tuple(instance(n.name) for n in (a, b, c))), cfg, policy_for(cfg), T0
    )
    assert free.scaling is not None and {r.node for r in free.scaling.remove} >= {"node002", "node003"}
    # node002's removal is under way: the planner leaves it to that operation.
    busy = plan_pass(
        inputs(
            idle,
            nodes=(a, b, c),
            instances=tuple(instance(n.name) for n in (a, b, c)),
            in_flight=frozenset({"node002"}),
        ),
        cfg,
        policy_for(cfg),
        T0,
    )
    assert busy.scaling is not None and "node002" not in {r.node for r in busy.scaling.remove}


def test_the_back_off_cuts_the_launches_and_says_how_many_were_held(cfg: Config) -> None:
    backoff = Backoffs(
        default=Backoff(rounds=2, next_launch_at=T0 + 300, cause=Cause.PROVISION, last_failure="node001: failed")
    )
    p = plan(cfg, backoff=backoff)
    assert p.scaling is not None and p.scaling.add == 0
    assert p.wanted == 2 and p.launches_held == 2
    assert "backed off" in p.scaling.reason


def test_unknown_demand_means_no_scaling_but_repairs_go_on(cfg: Config) -> None:
    p = plan(
        cfg,
        nodes=(VANISHED,),
        repair_fails={(RepairKind.VANISHED, "node001"): 99},
        demand=None,
        demand_error="reading the site's complexes: qconf failed; no scaling this pass",
    )
    assert [r.node for r in p.repairs] == ["node001"]
    assert p.scaling is None and "qconf failed" in p.scaling_note


def test_removal_orders_of_gone_nodes_are_done_and_live_ones_stand(cfg: Config) -> None:
    gone = node("node005", 7200, state=NodeState.TERMINATED)
    live = node("node006", 3500, instance_id="i-node006")
    orders = Orders(remove=frozenset({"node005", "node006", "node404"}))
    idle = snap(hosts=[host("node006")])
    p = plan_pass(
        inputs(idle, nodes=(gone, live), instances=(instance("node006"),), orders=orders), cfg, policy_for(cfg), T0
    )
    assert p.orders_done == ("node005", "node404")
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node006"]


def test_an_admin_pause_holds_scaling_not_repairs(cfg: Config) -> None:
    paused = Orders(paused_since=T0 - 60, pause_reason="maintenance")
    p = plan(cfg, orders=paused)
    assert p.scaling is not None and p.scaling.empty and "paused" in p.scaling.reason
    q = plan(cfg, orders=paused, nodes=(VANISHED,))
    assert [r.node for r in q.repairs] == ["node001"]


def test_a_busy_node_is_never_removed_by_an_order(cfg: Config) -> None:
    live = node("node006", 3500, instance_id="i-node006")
    orders = Orders(remove=frozenset({"node006"}))
    working = snap([running(7, on="node006")], hosts=[host("node006", used=1)])
    p = plan_pass(
        inputs(working, nodes=(live,), instances=(instance("node006"),), orders=orders), cfg, policy_for(cfg), T0
    )
    assert p.scaling is not None and p.scaling.remove == ()


def test_a_node_holding_a_reservation_is_never_removed_by_an_order(cfg: Config) -> None:
    live = node("node006", 3500, instance_id="i-node006")
    orders = Orders(remove=frozenset({"node006"}))
    reserved = snap([], hosts=[host("node006", reserved=8)])
    i = inputs(reserved, nodes=(live,), instances=(instance("node006"),), orders=orders)
    p = plan_pass(i, cfg, policy_for(cfg), T0)
    assert p.scaling is not None and p.scaling.remove == ()
    assert scale(i, policy_for(cfg), T0).remove == ()


def test_the_dry_runs_plan_is_the_live_scaling_plan(cfg: Config) -> None:
    i = inputs(snap([pending(1, 600, slots=8)]))
    live = plan_pass(i, cfg, policy_for(cfg), T0)
    assert live.scaling == scale(i, policy_for(cfg), T0)


def test_scaling_waits_says_beforehand_what_the_plan_does_and_an_unknown_back_off_scales_nothing(
    cfg: Config,
) -> None:
    held = inputs(snap([pending(1, 600, slots=8)]), nodes=(VANISHED,), demand=None, backoff=None)
    assert scaling_waits(held, cfg, T0)
    assert plan_pass(held, cfg, policy_for(cfg), T0).scaling is None
    free = inputs(snap([pending(1, 600, slots=8)]), backoff=None)
    assert not scaling_waits(free, cfg, T0)
    p = plan_pass(free, cfg, policy_for(cfg), T0)  # a shell that did not gather the back-off
    assert p.scaling is None and p.scaling_note == "the launch back-off is not known"


def kept_on_its_word(name: str, *, found: bool, at: float, busy_at: float = T0 - 3000) -> Node:
    """An idle ready node a read showed busy at ``busy_at``, kept on its own word at ``at``."""
    why = f"{name} says so" if found else f"{name} could not be asked"
    keep = WitnessKeep(at=at, busy_at=busy_at, found=found, why=why)
    return node(name, 3500, instance_id=f"i-{name}", last_busy_at=busy_at, witness_keep=keep)


def idle_pass(cfg: Config, *records: Node, orders: Orders | None = None) -> PassPlan:
    """The pass on ``records`` as idle ready nodes, each with its instance, no job waiting."""
    idle = snap(hosts=[host(n.name) for n in records])
    instances = tuple(instance(n.name) for n in records)
    return plan_pass(
        inputs(idle, nodes=records, instances=instances, orders=orders or Orders()), cfg, policy_for(cfg), T0
    )


def test_a_node_kept_on_its_own_word_lately_is_not_removed_and_the_plan_says_why(cfg: Config) -> None:
    held = kept_on_its_word("node001", found=True, at=T0 - 60)
    other = node("node002", 3500, instance_id="i-node002")
    p = idle_pass(cfg, held, other)
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node002"]
    assert [r.node for r in p.held] == ["node001"]
    why = "node001 says so; not drained again for 29 min unless the scheduler shows it busy again"
    assert p.held[0].reason == why
    assert f"kept node001: {why}" in p.describe()


def test_the_hold_ends_with_its_time_or_when_the_scheduler_shows_the_node_busy_again(cfg: Config) -> None:
    over = kept_on_its_word("node001", found=True, at=T0 - WITNESS_HOLD)
    moved = kept_on_its_word("node002", found=True, at=T0 - 60, busy_at=T0 - 3000)
    moved = replace(moved, last_busy_at=T0 - 30)  # a read since showed it busy
    silent_over = kept_on_its_word("node003", found=False, at=T0 - WITNESS_SILENT_HOLD)
    silent = kept_on_its_word("node004", found=False, at=T0 - WITNESS_SILENT_HOLD + 60)
    p = idle_pass(cfg, over, moved, silent_over, silent)
    assert p.scaling is not None
    assert {r.node for r in p.scaling.remove} == {"node001", "node002", "node003"}, p.describe()
    assert [r.node for r in p.held] == ["node004"]
    assert "node004 could not be asked; not drained again for 60 s" in p.held[0].reason


def test_an_admin_order_ends_the_hold_of_a_node_that_could_not_be_asked_not_of_one_that_runs_jobs(
    cfg: Config,
) -> None:
    found = kept_on_its_word("node001", found=True, at=T0 - 60)
    silent = kept_on_its_word("node002", found=False, at=T0 - 60)
    p = idle_pass(cfg, found, silent, orders=Orders(remove=frozenset({"node001", "node002"})))
    assert p.scaling is not None and [r.node for r in p.scaling.remove] == ["node002"], p.describe()
    assert [r.node for r in p.held] == ["node001"]
    # A removal the cloud's notice ordered is no admin's word: the silent node stays held.
    cause = {"node002": ("rebalance", "instance at elevated risk")}
    p = idle_pass(cfg, found, silent, orders=Orders(remove=frozenset({"node002"}), causes=cause))
    assert sorted(r.node for r in p.held) == ["node001", "node002"], p.describe()


def test_a_node_held_on_its_own_word_is_not_stopped_into_a_warm_pool_either(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, shrink="timer", warm_pool={"max_nodes": 2, "max_age": 7200, "restart_time": 60})
    held = kept_on_its_word("node001", found=True, at=T0 - 60)
    other = node("node002", 3500, instance_id="i-node002")
    p = idle_pass(cfg, held, other)
    assert [r.node for r in p.pool.stops] == ["node002"], p.describe()
    assert [r.node for r in p.held] == ["node001"]


# A cluster at max_nodes (4) whose node004 died under a job: its instance is listed as stopped,
# Grid Engine no longer reaches its host and still lists the job there. Two 8-slot jobs wait.
def _died_under_a_job(cfg: Config, dead: InstanceWord | None) -> PassPlan:
    names = ("node001", "node002", "node003", "node004")
    records = tuple(node(n, 3600, instance_id=f"i-{n}") for n in names)
    hosts = [host(n, used=8) for n in names[:3]] + [host("node004", used=8, states="au")]
    jobs = [running(10 + i, n, slots=8, ran=3000) for i, n in enumerate(names)]
    found = tuple(instance(n) for n in names[:3]) + (() if dead is None else (instance("node004", dead),))
    snapshot = snap([*jobs, pending(1, 900, slots=8), pending(2, 900, slots=8)], hosts)
    return plan_pass(inputs(snapshot, nodes=records, instances=found), cfg, policy_for(cfg), T0)


@pytest.mark.parametrize("dead", ["stopped", "stopping"])
def test_a_node_whose_instance_is_listed_stopped_under_a_job_is_kept_and_takes_no_place(
    cfg: Config, dead: InstanceWord
) -> None:
    p = _died_under_a_job(cfg, dead)
    (kept,) = p.kept
    assert kept.node == "node004" and "takes no place under max_nodes" in kept.reason
    assert p.scaling is not None and p.scaling.remove == ()
    # Its place is taken by a new node, named after every name in use (node004's included).
    assert p.scaling.add == 1 and p.scaling.add_names == ("node005",), p.scaling.reason


def test_a_node_whose_instance_is_missing_from_the_listing_keeps_its_place(cfg: Config) -> None:
    # Not listed at all: the listing may be hollow; that is no evidence the machine is down.
    p = _died_under_a_job(cfg, None)
    (kept,) = p.kept
    assert kept.node == "node004" and "takes no place" not in kept.reason
    assert p.scaling is not None and p.scaling.add == 0 and "max_nodes (4/4)" in p.scaling.reason
