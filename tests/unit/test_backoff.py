"""Launch back-off: computed purely from journal events; the daemon launches a handful of nodes an
hour, not a batch a pass, while provisioning fails for every new node."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.core.backoff import Backoff, Backoffs, Cause, compute
from elb.core.config import ConfigError, parse_config
from elb.core.model import Event, NodeState, Plan, Removal
from elb.core.planner import limit_launches
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

R, OK, F = NodeState.REQUESTED, NodeState.READY, NodeState.FAILED


def ev(t: float, node: str, state: NodeState, detail: str | None = None) -> Event:
    return Event(t, node, state, None, detail)


@pytest.mark.parametrize(
    ("events", "rounds", "next_at", "cause"),
    [
        ([], 0, None, None),
        ([ev(0, "n1", R), ev(50, "n1", OK)], 0, None, None),
        # one round: a batch of three failing together is one failure round
        (
            [ev(0, "n1", R), ev(0, "n2", R), ev(0, "n3", R)]
            + [ev(40, n, F, "unreachable: x") for n in ("n1", "n2", "n3")],
            1,
            100,
            Cause.PROVISION,
        ),
        # a failure of a node launched before the wait began is the same round
        ([ev(0, "n1", R), ev(40, "n1", F), ev(30, "n2", R), ev(90, "n2", F)], 1, 100, Cause.PROVISION),
        # a second round after the wait: doubled
        (
            [ev(0, "n1", R), ev(40, "n1", F), ev(110, "n2", R), ev(150, "n2", F, "launch failed: no capacity")],
            2,
            270,
            Cause.LAUNCH,
        ),
        # ... capped at the maximum
        (
            [x for k in range(10) for x in (ev(k * 10_000, f"n{k}", R), ev(k * 10_000 + 5, f"n{k}", F))],
            10,
            90_005 + 1000,
            Cause.PROVISION,
        ),
        # a node that becomes ready ends the streak
        ([ev(0, "n1", R), ev(40, "n1", F), ev(110, "n2", R), ev(150, "n2", OK)], 0, None, None),
        # a ready node kept after a drain (ready again, not a bring-up) does not end it; nor does the
        # failure of a ready node (vanished) start one
        (
            [ev(0, "n1", R), ev(40, "n1", F), ev(45, "n0", OK, "kept: job landed"), ev(46, "n9", F, "vanished")],
            1,
            100,
            Cause.PROVISION,
        ),
    ],
)
def test_backoff_from_events(events: list[Event], rounds: int, next_at: float | None, cause: Cause | None) -> None:
    b = compute(events, initial=60, maximum=1000)
    assert (b.rounds, b.next_launch_at, b.cause) == (rounds, next_at, cause)


def test_one_probe_at_a_time() -> None:
    """A probe still on its way (its operation runs in the background) holds further launches:
    seen on the test cluster, where each pass after the wait launched one more probe."""
    events = [ev(0, "n1", R), ev(40, "n1", F), ev(100, "n2", R)]
    b = compute(events, initial=60, maximum=1000)
    assert b.probing and b.cap(3, now=101) == 0
    b = compute([*events, ev(130, "n2", F, "cleanup: unreachable")], initial=60, maximum=1000)
    assert not b.probing and b.rounds == 2 and b.cap(3, now=130 + 120) == 1


RUN = NodeState.RUNNING


def test_a_probe_the_cloud_launched_ends_a_refusal_streak() -> None:
    """After launches the cloud refused (no capacity, throttled), the probe asks only whether the
    cloud launches again: its instance running answers it, so the batch need not wait for the
    probe's boot and play. A probe after failed plays must still become ready."""
    refused = [ev(0, "n1", R), ev(2, "n1", F, "launch failed: InsufficientInstanceCapacity"), ev(70, "n2", R)]
    b = compute([*refused, ev(75, "n2", RUN)], initial=60, maximum=1000)
    assert not b.active and b.cap(3, now=76) == 3
    # a node of the refused round that ran anyway (a fleet filled in part) is no probe
    partial = [ev(0, "n1", R), ev(0, "n3", R), ev(2, "n1", F, "launch failed: x"), ev(5, "n3", RUN)]
    assert compute(partial, initial=60, maximum=1000).rounds == 1
    played = [ev(0, "n1", R), ev(40, "n1", F, "provisioning failed"), ev(100, "n2", R), ev(105, "n2", RUN)]
    b = compute(played, initial=60, maximum=1000)
    assert b.active and b.probing and b.cap(3, now=106) == 0
    # the probe that ran and then failed its play starts a round of its own cause
    b = compute([*refused, ev(75, "n2", RUN), ev(140, "n2", F, "provisioning failed")], initial=60, maximum=1000)
    assert (b.rounds, b.cause, b.next_launch_at) == (1, Cause.PROVISION, 200)


def test_refused_launches_stop_doubling_at_four_initial_waits() -> None:
    """A launch the cloud refused (no capacity) costs nothing but an API call, and capacity can
    come back at any moment: its rounds wait at most 4 initial waits (60, 120, 240, 240 s), where
    failed plays, which cost an instance each, double on up to ``max``."""

    def rounds(detail: str) -> list[float]:
        waits, events = [], []
        t = 0.0
        for k in range(6):
            events += [ev(t, f"n{k}", R), ev(t + 1, f"n{k}", F, detail)]
            b = compute(events, initial=60, maximum=3600)
            assert b.next_launch_at is not None
            waits.append(b.next_launch_at - (t + 1))
            t = b.next_launch_at
        return waits

    assert rounds("launch failed: InsufficientInstanceCapacity") == [60, 120, 240, 240, 240, 240]
    assert rounds("provisioning failed") == [60, 120, 240, 480, 960, 1920]
    # never past max
    few = [ev(0, "n1", R), ev(1, "n1", F, "launch failed: x")]
    assert compute(few, initial=60, maximum=100).next_launch_at == 61
    more = [*few, ev(61, "n2", R), ev(62, "n2", F, "launch failed: x")]
    assert compute(more, initial=60, maximum=100).next_launch_at == 162


@pytest.mark.parametrize(
    ("backoff", "now", "wanted", "allowed"),
    [
        (Backoff(), 0, 7, 7),
        (Backoff(1, 100, Cause.PROVISION, "n1: x"), 99, 7, 0),
        (Backoff(1, 100, Cause.PROVISION, "n1: x"), 100, 7, 1),  # a probe, not a batch
        (Backoff(3, 100, Cause.LAUNCH, "n1: x"), 500, 0, 0),
    ],
)
def test_limit_launches(backoff: Backoff, now: float, wanted: int, allowed: int) -> None:
    names = tuple(f"node{i:03d}" for i in range(1, wanted + 1))
    plan = Plan(add=wanted, add_names=names, add_reason="jobs wait")
    out = limit_launches(plan, Backoffs(default=backoff), now, group_of=lambda _name: "default")
    assert out.add == allowed and out.add_names == names[:allowed]
    if allowed < wanted:
        assert "failed launch round" in out.reason


@pytest.mark.parametrize("bad", [{"initial": 0}, {"max": -1}, {"initial": float("inf")}, {"initial": 10, "max": 5}])
def test_backoff_config_must_be_positive_finite_and_ordered(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="backoff"):
        parse_config({"backoff": bad})


def test_provisioning_failing_for_every_node_launches_a_handful_an_hour(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each pass used to launch a new batch (up to max_nodes), clean it up and launch again:
    98 instances in 5 minutes at a 5 s poll. With back-off: the first batch, then one probe per
    doubling wait."""
    cfg = parse_config(
        {"state_dir": str(tmp_path), "poll_interval": 60, "policy": {"max_nodes": 7, "slots_per_node": 1}}
    )
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    prov = FakeProvisioner(sge, unreachable_adds=True)
    journal = Journal(cfg.journal_path)
    clock = Clock(T0)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=clock)
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=50)]
    passes = 60  # an hour at a 60 s poll
    for k in range(passes):
        clock.t = sge.now = T0 + 60 * k
        assert bal.run_pass().ok
    launched = sum(1 for line in prov.log if line.startswith("add "))
    assert launched == 7 + 5, launched  # the batch, then probes at minutes 1, 3, 7, 15, 31
    assert cloud.list_workers() == []  # every failed node terminated
    assert "ALARM: launch backed off" in caplog.text
    assert bal.last.backoff_rounds >= 5
    # The back-off survives a restart: it comes from the journal.
    bal2 = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=prov,
        clock=clock,
    )
    before = len(prov.log)
    clock.t = sge.now = clock.t + 60
    bal2.run_pass()
    assert len(prov.log) == before


def test_a_probes_why_is_said_once_in_the_pass_line() -> None:
    # The back-off lets one launch of three start: its why goes with that launch and with the
    # plan's reason (the alarm's text), and the pass's line says it once.
    backoff = Backoff(rounds=2, next_launch_at=60.0, cause=Cause.PROVISION, last_failure="node004: x; y")
    names = ("node001", "node002", "node003")
    plan = Plan(add=3, add_names=names, add_reason="the scheduler asked (job 5; job 7)", reason="no idle node is due")
    out = limit_launches(plan, Backoffs(default=backoff), 61.0, group_of=lambda _name: "default")
    assert out.add == 1 and "(a probe)" in out.add_reason and "(a probe)" in out.reason
    lines = out.describe()
    assert sum(line.count("(a probe)") for line in lines) == 1, lines
    assert lines[-1] == "no idle node is due"
    # Nothing let through: the why is the plan's reason, said once.
    none = limit_launches(plan, Backoffs(default=backoff), 11.0, group_of=lambda _name: "default")
    assert none.add == 0 and sum(line.count("backed off") for line in none.describe()) == 1


def test_nodes_removed_for_the_same_reason_are_named_on_one_line() -> None:
    idle = "idle 30 s >= 0.5 x boot time (30 s)"
    plan = Plan(
        remove=(
            Removal("node001", idle),
            Removal("node002", "idle 35 s >= 0.5 x boot time (30 s)"),
            Removal("node003", idle),
        ),
        reason="no job waits",
    )
    assert plan.describe() == [
        f"remove node001, node003: {idle}",
        "remove node002: idle 35 s >= 0.5 x boot time (30 s)",
        "no job waits",
    ]


def test_the_journals_bring_up_events_end_a_refused_launch_streak_at_the_probes_instance_running(
    tmp_path: Path,
) -> None:
    """After launches the cloud refused (no capacity), the probe's instance running answers the
    question the wait asked: the daemon's back-off (from the journal's bring-up events) ends there,
    as the simulator's (fed every event) does, not only once the probe is ready after its play."""
    journal = Journal(tmp_path / "journal.sqlite")
    journal.record("a", NodeState.REQUESTED, 0.0)
    journal.record("a", NodeState.FAILED, 1.0, detail="launch failed: no capacity", cause=Cause.LAUNCH)
    events = journal.bring_up_events()
    assert compute(events, initial=60, maximum=3600).active
    journal.record("probe", NodeState.REQUESTED, 70.0)
    journal.record("probe", NodeState.LAUNCHING, 71.0)
    journal.record("probe", NodeState.RUNNING, 90.0)
    fed_all = compute(journal.events("a") + journal.events("probe"), initial=60, maximum=3600)
    assert not fed_all.active  # the rule, every event at hand
    assert not compute(journal.bring_up_events(), initial=60, maximum=3600).active
    journal.close()
