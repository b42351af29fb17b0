"""A node that fails for its own reasons while its group works starts no back-off round.

The launch back-off (``elb.core.backoff``) exists for a group whose nodes cannot come up (a bad
image, a broken play, a cloud without capacity). One node whose play failed while another node
of its group became ready after it was requested is the node's own fault: it is replaced at
once. Each node that became ready excuses one failure at most, so a group that fails more often
than it works still backs off. (Within one play the failures are recorded before the nodes
that came up, whose ready ends the streak the failures began: the rule matters for a failure
found later, a slurmd that never registered or a play of another pass.)
"""

from __future__ import annotations

from elb.core.backoff import Cause, Tracker, compute
from elb.core.model import Event, NodeState

R, RUN, OK, F = NodeState.REQUESTED, NodeState.RUNNING, NodeState.READY, NodeState.FAILED
PLAY = "provisioning failed at Fail when slurmd does not run: slurmd does not run"


def ev(t: float, node: str, state: NodeState, detail: str | None = None, cause: Cause | None = None) -> Event:
    return Event(t, node, state, None, detail, cause)


def test_a_play_that_fails_after_a_sibling_came_up_starts_no_round() -> None:
    events = [ev(0, "n1", R), ev(0, "n2", R), ev(60, "n1", OK), ev(90, "n2", F, PLAY, Cause.PROVISION)]
    b = compute(events, initial=60, maximum=3600)
    assert not b.active and b.cap(3, now=91) == 3


def test_a_sibling_that_came_up_before_the_node_was_requested_excuses_nothing() -> None:
    events = [ev(0, "n1", R), ev(60, "n1", OK), ev(100, "n2", R), ev(160, "n2", F, PLAY, Cause.PROVISION)]
    b = compute(events, initial=60, maximum=3600)
    assert (b.rounds, b.next_launch_at, b.cause) == (1, 220, Cause.PROVISION)
    assert b.cap(3, now=161) == 0


def test_each_node_that_came_up_excuses_one_failure_at_most() -> None:
    # Three launched together: one comes up, two fail their play. The group fails more often than
    # it works: one failure is excused, the other starts a round.
    events = [ev(0, n, R) for n in ("n1", "n2", "n3")]
    events += [ev(60, "n1", OK), ev(80, "n2", F, PLAY, Cause.PROVISION), ev(81, "n3", F, PLAY, Cause.PROVISION)]
    b = compute(events, initial=60, maximum=3600)
    assert (b.rounds, b.next_launch_at) == (1, 141)
    # Two that came up excuse two.
    events = [ev(0, n, R) for n in ("n1", "n2", "n3", "n4")]
    events += [ev(60, "n1", OK), ev(61, "n4", OK)]
    events += [ev(80, "n2", F, PLAY, Cause.PROVISION), ev(81, "n3", F, PLAY, Cause.PROVISION)]
    assert not compute(events, initial=60, maximum=3600).active


def test_a_launch_the_cloud_refused_is_never_the_nodes_own_fault() -> None:
    events = [ev(0, "n1", R), ev(0, "n2", R), ev(60, "n1", OK)]
    events += [ev(61, "n3", R), ev(62, "n3", F, "launch failed: InsufficientInstanceCapacity", Cause.LAUNCH)]
    b = compute(events, initial=60, maximum=3600)
    assert (b.rounds, b.cause) == (1, Cause.LAUNCH)


def test_a_group_whose_nodes_all_fail_backs_off_as_before() -> None:
    """No node ever comes up: nothing is excused, each round doubles the wait."""
    events = []
    for k, t in enumerate((0, 100, 300, 600)):
        events += [ev(t, f"n{k}", R), ev(t + 30, f"n{k}", RUN), ev(t + 40, f"n{k}", F, PLAY, Cause.PROVISION)]
    b = compute(events, initial=60, maximum=3600)
    assert (b.rounds, b.next_launch_at) == (4, 640 + 480)


def test_a_tracker_keeps_no_ready_that_no_node_could_use() -> None:
    """A ready excuses only a node requested before it: once nothing is coming up, the readies
    before are of no use, so a long history (a replay, a journal folded each pass) holds none."""
    t = Tracker(initial=60, maximum=3600)
    for k in range(1000):
        t.add(ev(10 * k, f"n{k}", R))
        t.add(ev(10 * k + 5, f"n{k}", OK))
    assert len(t._credits) <= 1
    # what is kept still excuses a failure of a node requested with it
    t.add(ev(10_000, "m1", R))
    t.add(ev(10_000, "m2", R))
    t.add(ev(10_040, "m1", OK))
    t.add(ev(10_050, "m2", F, PLAY, Cause.PROVISION))
    assert not t.state.active
