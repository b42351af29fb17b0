"""Idle nodes of a group whose launches the back-off holds are kept (``kept_while_held``): a
relaunch would wait for the hold, and a job that comes meanwhile with it. Bounded: at most
``backoff.max`` past the shrink rule's own idle limit; never for per-period billing, an
admin's order, or a node that is not idle."""

from __future__ import annotations

from pathlib import Path

from elb.core.backoff import Backoff, Backoffs, Cause
from elb.core.config import Config, parse_config
from elb.core.demand import DemandSplit
from elb.core.model import History, Node, Snapshot
from elb.core.orders import Orders
from elb.core.planner import PassInputs, PassPlan, plan_pass
from elb.core.policy.grouped import policy_for
from tests.unit.factories import EC2, T0, host, instance, node, snap

REFUSED = Backoff(
    rounds=3, next_launch_at=T0 + 120, cause=Cause.LAUNCH, last_failure="node009: launch failed: no capacity"
)


def config(tmp_path: Path, **policy: object) -> Config:
    return parse_config(
        {
            "state_dir": str(tmp_path),
            "backoff": {"initial": 60, "max": 900},
            "policy": {
                "max_nodes": 4,
                "slots_per_node": 8,
                "billing": "second",
                "shrink": "timer",
                "idle_time": 300,
                **policy,
            },
        }
    )


def idle(name: str, idle_for: float) -> Node:
    """A ready node that has run nothing for ``idle_for`` seconds."""
    return node(name, 3600, instance_id=f"i-{name}", last_busy_at=T0 - idle_for)


def removed(cfg: Config, nodes: tuple[Node, ...], backoff: Backoffs, orders: Orders | None = None) -> PassPlan:
    shown: Snapshot = snap(hosts=[host(n.name) for n in nodes])
    p = plan_pass(
        PassInputs(
            snapshot=shown,
            nodes=nodes,
            instances=tuple(instance(n.name) for n in nodes),
            demand=DemandSplit(shown),
            history=History(),
            orders=orders or Orders(),
            backoff=backoff,
            scheduler="SGE",
            cloud=EC2,
        ),
        cfg,
        policy_for(cfg),
        T0,
    )
    assert p.scaling is not None
    return p


def names(p: PassPlan) -> set[str]:
    assert p.scaling is not None
    return {r.node for r in p.scaling.remove}


def test_an_idle_node_goes_when_launching_works(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    assert names(removed(cfg, (idle("node001", 400),), Backoffs())) == {"node001"}


def test_an_idle_node_is_kept_while_its_group_cannot_launch_and_the_plan_says_why(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    p = removed(cfg, (idle("node001", 400),), Backoffs(default=REFUSED))
    assert names(p) == set()
    assert p.scaling is not None
    assert "kept node001 idle while launches are held" in p.scaling.reason
    assert "no capacity" in p.scaling.reason and "2 min" in p.scaling.reason


def test_a_probe_on_its_way_holds_launches_too(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    probing = Backoff(rounds=3, next_launch_at=T0 - 5, cause=Cause.PROVISION, last_failure="x", probing=True)
    assert names(removed(cfg, (idle("node001", 400),), Backoffs(default=probing))) == set()
    # the wait over and no probe out: the next pass may launch, the node goes
    over = Backoff(rounds=3, next_launch_at=T0 - 5, cause=Cause.PROVISION, last_failure="x")
    assert names(removed(cfg, (idle("node001", 400),), Backoffs(default=over))) == {"node001"}


def test_a_throttling_pause_holds_launches(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    paused = Backoff(cause=Cause.THROTTLED, last_failure="x", throttled=2, paused_until=T0 + 10)
    assert names(removed(cfg, (idle("node001", 400),), Backoffs(default=paused))) == set()


def test_a_node_is_kept_at_most_backoff_max_past_the_shrink_rules_limit(tmp_path: Path) -> None:
    cfg = config(tmp_path)  # idle_time 300 + backoff.max 900
    held = Backoffs(default=REFUSED)
    assert names(removed(cfg, (idle("node001", 1199),), held)) == set()
    assert names(removed(cfg, (idle("node001", 1200),), held)) == {"node001"}
    # the cost rule's limit: idle_factor boot times (0.5 x 300 s) + 900
    cost = config(tmp_path, shrink="cost", boot_time=300)
    assert names(removed(cost, (idle("node001", 1049),), held)) == set()
    assert names(removed(cost, (idle("node001", 1050),), held)) == {"node001"}


def test_only_the_held_groups_nodes_are_kept(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "backoff": {"initial": 60, "max": 900},
            "policy": {"billing": "second", "shrink": "timer", "idle_time": 300},
            "node_groups": [{"name": "small", "slots": 8, "max_nodes": 2}, {"name": "big", "slots": 8, "max_nodes": 2}],
        }
    )
    nodes = (idle("node001", 400), node("node002", 3600, instance_id="i-node002", last_busy_at=T0 - 400, group="big"))
    p = removed(cfg, nodes, Backoffs(groups=(("big", REFUSED),)))
    assert names(p) == {"node001"}
    assert p.scaling is not None and "kept node002 idle" in p.scaling.reason and "group big" in p.scaling.reason


def test_per_period_billing_and_the_admins_order_are_not_kept(tmp_path: Path) -> None:
    held = Backoffs(default=REFUSED)
    ordered = removed(config(tmp_path), (idle("node001", 400),), held, Orders(remove=frozenset({"node001"})))
    assert names(ordered) == {"node001"}
    # per hour: the cost rule keeps a node to the end of its paid hour already (removed at its last poll)
    hourly = config(tmp_path, billing="hour", shrink="cost", poll_interval=60)
    at_hours_end = node("node001", 3600 - 61, instance_id="i-node001", last_busy_at=T0 - 400)
    assert names(removed(hourly, (at_hours_end,), held)) == {"node001"}
