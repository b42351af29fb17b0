"""Launch back-off: a launch the cloud refused for the account's API request rate (EC2's
``RequestLimitExceeded``, ``Throttling``) is no group's lack of capacity and no node's fault: it
pauses the group's launches briefly (``THROTTLE_INITIAL`` doubling to ``THROTTLE_MAX``), apart
from the group's streak of failed rounds, which it neither starts nor lengthens."""

from __future__ import annotations

from pathlib import Path

from elb.core.backoff import THROTTLE_INITIAL, THROTTLE_MAX, Cause, compute
from elb.core.config import parse_config
from elb.core.model import Event, NodeState
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

R, OK, F = NodeState.REQUESTED, NodeState.READY, NodeState.FAILED
THROTTLED = "launch failed: launching n: RequestLimitExceeded after retries: Request limit exceeded."


def throttled(t: float, node: str) -> Event:
    return Event(t, node, F, None, THROTTLED, Cause.THROTTLED)


def test_throttled_launches_pause_a_group_for_minutes_at_most_not_a_doubling_back_off(tmp_path: Path) -> None:
    """EC2 throttles four launch passes in a row (60 s apart), then takes the launch. Counted as
    failed launch rounds they held the group back 1, 2, 4, then 8 minutes: no node for 15
    minutes. A pause of seconds: the fifth pass launches, and the node is ready."""
    cfg = parse_config(
        {"state_dir": str(tmp_path), "poll_interval": 60, "policy": {"max_nodes": 3, "slots_per_node": 1}}
    )
    sge, cloud = FakeSge(T0), FakeCloud(T0, throttled_launches=4)
    prov = FakeProvisioner(sge)
    journal = Journal(cfg.journal_path)
    clock = Clock(T0)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=prov, clock=clock)
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=3)]
    for k in range(5):
        clock.t = sge.now = T0 + 60 * k
        bal.run_pass()
    assert cloud.throttled_launches == 0
    ready = [n.name for n in journal.nodes() if n.state is NodeState.READY]
    assert len(ready) == 3, ready  # the whole batch: a pause, not a probe at a time
    failed = [e for e in journal.events() if e.state is F]
    assert failed and {e.cause for e in failed} == {Cause.THROTTLED}
    assert bal.last.backoff_rounds == 0


def test_a_throttle_pause_doubles_from_seconds_to_its_cap_and_leaves_the_failure_streak_alone() -> None:
    events = [
        x for k in range(10) for x in (Event(k * 1000.0, f"n{k}", R, None, None), throttled(k * 1000.0 + 1, f"n{k}"))
    ]
    b = compute(events, initial=60, maximum=3600)
    assert b.rounds == 0 and b.throttled == 10 and b.cause is Cause.THROTTLED and b.active
    assert b.waiting(9001) == THROTTLE_MAX  # capped: two minutes, not an hour
    assert b.cap(7, 9001 + THROTTLE_MAX) == 7  # after the pause: the batch, not a probe
    assert b.cap(7, 9001) == 0
    first = compute(events[:2], initial=60, maximum=3600)
    assert first.waiting(1) == THROTTLE_INITIAL
    # a node launched and failed to provision afterwards: the failure streak starts at its first round
    after = compute(
        [*events, Event(9500, "m", R, None, None), Event(9600, "m", F, None, "unreachable")], initial=60, maximum=3600
    )
    assert after.rounds == 1 and after.throttled == 0 and after.waiting(9600) == 60
    # a node that becomes ready ends the pause's streak
    assert not compute(
        [*events, Event(9500, "m", R, None, None), Event(9600, "m", OK, None, None)], initial=60, maximum=3600
    ).active


def test_a_throttled_round_during_a_failure_streak_neither_lengthens_nor_shortens_it() -> None:
    events = [Event(0, "a", R, None, None), Event(10, "a", F, None, "unreachable")]  # round 1: until 70
    events += [Event(80, "b", R, None, None), throttled(81, "b")]
    b = compute(events, initial=60, maximum=3600)
    assert b.rounds == 1 and b.waiting(81) == THROTTLE_INITIAL
    events += [Event(90, "c", R, None, None), Event(95, "c", F, None, "unreachable")]
    assert compute(events, initial=60, maximum=3600).rounds == 2  # the next failed round: doubled from round 1


def test_an_event_of_an_older_journal_without_a_cause_is_classified_by_its_detail() -> None:
    b = compute(
        [Event(0, "a", R, None, None), Event(5, "a", F, None, "launch failed: no capacity")], initial=60, maximum=3600
    )
    assert b.cause is Cause.LAUNCH and b.rounds == 1


def test_the_journal_keeps_a_failures_cause_and_reads_none_for_events_recorded_without_one(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    for name in ("a", "b"):
        journal.record(name, R, 1.0)
    journal.record("a", F, 2.0, detail="launch failed: x", cause=Cause.THROTTLED)
    journal.record("b", F, 2.0, detail="unreachable")
    causes = {e.node: e.cause for e in journal.bring_up_events() if e.state is F}
    assert causes == {"a": Cause.THROTTLED, "b": None}
    journal.close()
    reopened = Journal(tmp_path / "journal.sqlite")
    assert [e.cause for e in reopened.events("a")] == [None, Cause.THROTTLED]
