"""Reconcile reads the joined cluster state: on generated clusters, each repair it plans agrees
with the managed node's predicates (``elb.core.state.ManagedNode``), so a fact of a node (busy, lost
for, its instance gone) is never decided one way by reconcile and another by the state."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.interfaces import Instance, InstanceState
from elb.core.model import Host, Job, Node, NodeState, QueueInstance, Snapshot
from elb.core.reconcile import RepairKind, plan_repairs
from elb.core.state import join
from elb.schedulers.sge.states import queue_flags
from tests.unit.factories import T0, running

TIMEOUT = 600.0

_node = st.fixed_dictionaries(
    {
        "state": st.sampled_from(list(NodeState)),
        "with_id": st.booleans(),
        "instance": st.sampled_from([None, *InstanceState]),
        "host": st.sampled_from([None, "", "u"]),  # absent, up, unreachable
        "job": st.booleans(),
        "reserved": st.booleans(),
        "age": st.sampled_from([60.0, 2 * TIMEOUT]),
        "up_ago": st.sampled_from([None, 30.0, 2 * TIMEOUT]),
    }
)


def _cluster(specs: list[dict[str, object]]) -> tuple[list[Node], list[Instance], Snapshot, dict[str, bool]]:
    records: list[Node] = []
    instances: list[Instance] = []
    hosts: list[Host] = []
    jobs: list[Job] = []
    busy: dict[str, bool] = {}
    for k, s in enumerate(specs):
        name, iid = f"node{k:03d}", f"i-{k}"
        age, up_ago = s["age"], s["up_ago"]
        assert isinstance(age, float)
        up = None if up_ago is None else T0 - float(up_ago)  # type: ignore[arg-type]
        state = s["state"]
        assert isinstance(state, NodeState)
        records.append(
            Node(name, state, T0 - age, iid if s["with_id"] else None, ready_at=T0 - age + 10, last_up_at=up)
        )
        if s["instance"] is not None:
            instances.append(Instance(iid, name, InstanceState(str(s["instance"])), T0 - age, "10.0.0.9"))
        if s["host"] is not None:
            q = QueueInstance(
                "all.q", name, 8, 1 if s["job"] else 0, 1 if s["reserved"] else 0, queue_flags(str(s["host"]))
            )
            hosts.append(Host(name, (q,)))
        if s["job"]:
            jobs.append(running(100 + k, name))
        # Busy, as SGE shows it: a job listed on the host, or slots used or reserved there.
        busy[name] = bool(s["job"]) or (s["host"] is not None and bool(s["reserved"]))
    snap = Snapshot(T0, tuple(jobs), tuple(hosts))
    return records, instances, snap, busy


@settings(max_examples=400, deadline=None)
@given(specs=st.lists(_node, min_size=1, max_size=6))
def test_each_repair_agrees_with_the_managed_nodes_predicates(specs: list[dict[str, object]]) -> None:
    records, instances, snap, busy = _cluster(specs)
    state = join(records, instances, snap, include_gone=True)
    repairs = plan_repairs(
        records,
        instances,
        snap,
        T0,
        master="master",
        boot_timeout=TIMEOUT,
        orphan_timeout=TIMEOUT,
        unreachable_timeout=TIMEOUT,
        scheduler="SGE",
    )
    # Each record's own repair (an instance the records do not account for is an orphan, apart).
    by_node = {r.node: r.kind for r in repairs if r.kind is not RepairKind.ORPHAN}
    for m in state.nodes:
        assert m.busy == busy[m.name]
        kind = by_node.get(m.name)
        live = m.instance_live
        if m.ready and not live:
            assert kind is (RepairKind.KEPT if m.busy else RepairKind.VANISHED)
        elif m.ready:
            lost = m.lost_for() >= TIMEOUT
            assert kind is ((RepairKind.KEPT if m.busy else RepairKind.UNREACHABLE) if lost else None)
        elif m.draining:
            assert kind is RepairKind.FINISH_DRAIN
        elif m.record.state in (NodeState.RUNNING, NodeState.PROVISIONING) and not live:
            assert kind is RepairKind.VANISHED
        elif m.record.state is NodeState.STOPPED:
            assert kind is (RepairKind.VANISHED if m.instance_gone else None)
        elif not m.record.state.alive and not m.record.state.pooled and m.record.state is not NodeState.STARTING:
            assert (kind is RepairKind.DEREGISTER_STALE) == (m.host is not None)
        if kind is RepairKind.KEPT:
            assert m.ready and m.busy
