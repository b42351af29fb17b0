"""The policies' view (``elb.core.policy.view.Worker``) reads the joined cluster state
(``elb.core.state.ManagedNode``): on generated clusters, every managed worker is booting, serving, busy
and idle since the same time as its managed node, and its host's facts agree with the host, when
the view is built afresh and when it reuses the workers of an earlier view; hosts of one queue, of
several (each usable, unreachable or disabled), or of none."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.model import Host, Job, Node, NodeState, QueueInstance, Snapshot
from elb.core.policy.view import cluster_view
from elb.core.state import join
from elb.schedulers.sge.states import queue_flags
from tests.unit.factories import T0, running

_node = st.fixed_dictionaries(
    {
        "state": st.sampled_from([s for s in NodeState if s.alive]),
        "host": st.sampled_from([None, "", "u", "d"]),  # absent, up, unreachable, disabled
        "job": st.booleans(),
        "reserved": st.booleans(),
        "busy_ago": st.sampled_from([None, 30.0, 900.0]),
        "more": st.lists(st.sampled_from(["", "u", "d"]), max_size=2),  # other queues (Slurm's partitions)
        "none": st.booleans(),  # a host of no queue at all (its queues replaced by none)
        "next": st.sampled_from([s for s in NodeState if s.alive]),  # its record's state at the next pass
        "seen_busy": st.booleans(),  # the next pass saw it busy (a later ``last_busy_at``)
    }
)


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(_node, min_size=1, max_size=6))
def test_a_managed_worker_is_its_managed_node_in_the_view(specs: list[dict[str, object]]) -> None:
    records: list[Node] = []
    hosts: list[Host] = []
    jobs: list[Job] = []
    for k, s in enumerate(specs):
        name = f"node{k:03d}"
        state, busy_ago = s["state"], s["busy_ago"]
        assert isinstance(state, NodeState)
        last_busy = None if busy_ago is None else T0 - float(busy_ago)  # type: ignore[arg-type]
        records.append(Node(name, state, T0 - 1000, f"i-{k}", ready_at=T0 - 600, last_busy_at=last_busy))
        if s["host"] is not None:
            q = QueueInstance(
                "all.q", name, 8, 1 if s["job"] else 0, 1 if s["reserved"] else 0, queue_flags(str(s["host"]))
            )
            flags: list[str] = s["more"]  # type: ignore[assignment]
            more = [QueueInstance(f"q{i}", name, 8, 0, 0, queue_flags(f)) for i, f in enumerate(flags)]
            hosts.append(Host(name, () if s["none"] else (q, *more)))
            if s["job"]:
                jobs.append(running(100 + k, name))
    snap = Snapshot(T0, tuple(jobs), tuple(hosts))
    state = join(records, (), snap, now=T0)
    fresh = cluster_view(state, "master", 8)
    reused = cluster_view(state, "master", 8, reuse={w.name: w for w in fresh.workers})
    # The next pass: the same hosts and jobs, every record new (seen up now, perhaps busy, its
    # state perhaps moved): a worker kept from the earlier view reads its new record.
    moved = [
        replace(
            r,
            state=cast("NodeState", s["next"]),
            last_up_at=T0 + 5,
            last_busy_at=T0 + 5 if s["seen_busy"] else r.last_busy_at,
        )
        for r, s in zip(records, specs, strict=True)
    ]
    later = join(moved, (), snap, now=T0 + 5)
    carried = cluster_view(later, "master", 8, reuse={w.name: w for w in fresh.workers})
    for st_, view in ((state, fresh), (state, reused), (later, carried)):
        workers = {w.name: w for w in view.workers}
        for m in st_.nodes:
            w = workers[m.name]
            assert w.node is m.record
            assert (w.booting, w.ready, w.busy, w.idle_since) == (m.booting, m.serves, m.busy, m.idle_since)
            assert w.idle == (m.serves and not m.busy)
            if m.host is not None:
                assert w.facts is not None and w.facts.up == m.reachable
                assert (w.facts.busy or bool(w.jobs)) == m.busy


def test_a_worker_kept_with_a_new_record_reads_its_idle_time_and_state() -> None:
    """The next pass's records are new (seen up, seen busy, moved to another state) while the
    hosts and jobs are the very same: each worker of the view that reuses the earlier one's is
    the worker a view made afresh has."""
    hosts = tuple(
        Host(f"node{k:03d}", (QueueInstance("all.q", f"node{k:03d}", 8, 0, 0, queue_flags("")),)) for k in range(4)
    )
    records = [Node(h.name, NodeState.READY, T0 - 1000, f"i-{k}", ready_at=T0 - 600) for k, h in enumerate(hosts)]
    snap = Snapshot(T0, (), hosts)
    earlier = cluster_view(join(records, (), snap, now=T0), "master", 8)
    later_records = [
        replace(records[0], last_up_at=T0 + 5),  # seen up: the same idle time
        replace(records[1], last_up_at=T0 + 5, last_busy_at=T0 + 5),  # seen busy since: idle since then
        replace(records[2], state=NodeState.DRAINING),  # draining now: not ready
        replace(records[3], ready_at=T0 - 100),  # (ready later: idle since then)
    ]
    later = join(later_records, (), Snapshot(T0 + 5, (), hosts), now=T0 + 5)
    kept = cluster_view(later, "master", 8, reuse={w.name: w for w in earlier.workers})
    fresh = cluster_view(later, "master", 8)
    assert kept.workers == fresh.workers
    assert [w.idle_since for w in kept.workers] == [T0 - 600, T0 + 5, None, T0 - 100]
    assert all(w.host is h for w, h in zip(kept.workers, hosts, strict=True))


def test_the_workers_of_a_view_that_reuses_another_are_in_name_order() -> None:
    """A view that reuses an earlier one's workers lists its own in name order: of the very same
    names, whatever the order of the workers handed to it; of a name more, a name less, or as many
    names but one other, each new one in its place and each one gone out."""
    names = ["node003", "node001", "node004", "node002"]
    hosts = [Host(n, (QueueInstance("all.q", n, 8, 0, 0, queue_flags("")),)) for n in names]
    records = [Node(n, NodeState.READY, T0 - 1000, f"i-{n}", ready_at=T0 - 600) for n in names]
    state = join(records, (), Snapshot(T0, (), tuple(hosts)), now=T0)
    earlier = cluster_view(state, "master", 8)
    assert [w.name for w in earlier.workers] == sorted(names)
    backwards = {w.name: w for w in reversed(earlier.workers)}
    assert [w.name for w in cluster_view(state, "master", 8, reuse=backwards).workers] == sorted(names)
    node000 = Host("node000", hosts[0].queues)
    for kept in (hosts[:3], [*hosts, node000], [*hosts[:3], node000]):
        other = join([r for r in records if r.name in {h.name for h in kept}], (), Snapshot(T0, (), tuple(kept)))
        workers = cluster_view(other, "master", 8, reuse={w.name: w for w in earlier.workers}).workers
        assert [w.name for w in workers] == sorted(h.name for h in kept)


def test_a_worker_kept_with_a_new_host_of_equal_queues_keeps_its_facts_and_reads_changed_ones() -> None:
    """The next pass's hosts are new objects (a scheduler's read may make each anew): a worker
    whose host has queues equal to its earlier host's keeps its facts; one whose queues changed
    (a slot used, a queue unreachable or disabled, a queue more) reads them anew; each worker is
    the worker a view made afresh has."""

    def hosts_of(flags: list[tuple[int, str]], more: int = 0) -> tuple[Host, ...]:
        out = []
        for k, (used, flag) in enumerate(flags):
            name = f"node{k:03d}"
            queues = [QueueInstance("all.q", name, 8, used, 0, queue_flags(flag))]
            queues += [QueueInstance(f"q{i}", name, 8, 0, 0, queue_flags("")) for i in range(more if k == 4 else 0)]
            out.append(Host(name, tuple(queues)))
        return tuple(out)

    before = [(0, ""), (1, ""), (0, ""), (0, ""), (0, "")]
    after = [(0, ""), (1, ""), (1, ""), (0, "u"), (0, "")]  # node002 busy, node003 unreachable, node004 a queue more
    records = [Node(f"node{k:03d}", NodeState.READY, T0 - 1000, f"i-{k}", ready_at=T0 - 600) for k in range(5)]
    earlier = cluster_view(join(records, (), Snapshot(T0, (), hosts_of(before)), now=T0), "master", 8)
    later_records = [replace(r, last_up_at=T0 + 5) for r in records]
    later = join(later_records, (), Snapshot(T0 + 5, (), hosts_of(after, more=1)), now=T0 + 5)
    kept = cluster_view(later, "master", 8, reuse={w.name: w for w in earlier.workers})
    fresh = cluster_view(later, "master", 8)
    assert kept.workers == fresh.workers
    assert [w.facts is e.facts for w, e in zip(kept.workers, earlier.workers, strict=True)] == [
        True, True, False, False, False
    ]  # fmt: skip
    assert [(w.busy, w.ready) for w in kept.workers][2:4] == [(True, True), (False, False)]
