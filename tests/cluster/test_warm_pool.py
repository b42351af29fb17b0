"""The warm pool on the real test cluster: real SGE, podman nodes through LocalCloud (``podman
stop``/``start`` keep a container's filesystem and name), real Ansible. No stand-in.

A node of a group with a warm pool goes idle and is stopped (its container stopped, its queue
instances disabled, still an exec host); new demand starts it again, and a job runs on it; the
test prints its time to ready against the new node's (both measured here, from the journal:
requested to ready, and starting to ready). Idle again, it is stopped again, and once past the
pool's ``max_age`` it is removed for good: deregistered, no container left, the cluster as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.core.model import NodeState
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.passrecord import PassResult
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, written
from tests.cluster.test_elb_e2e import balancer, e2e_config, passes_until

pytestmark = pytest.mark.cluster

# Seconds a stopped node may stay in the pool: past the few passes (poll 2 s) from its first stop to
# the demand that starts it again, and no more, as the test waits it out at the end.
MAX_AGE = 15.0

JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
sleep 3
hostname > "$HOME/warm/$JOB_ID.host"
"""


def ready_after(journal: Journal, name: str, start: NodeState) -> float:
    """Seconds from the node's last ``start`` event to the ready event that follows it."""
    events = journal.events(name)
    i = max(k for k, e in enumerate(events) if e.state is start)
    ready = next(e for e in events[i:] if e.state is NodeState.READY)
    return ready.time - events[i].time


def stopped(bal: Balancer, name: str) -> bool:
    node = bal.journal.node(name)
    return node is not None and node.state is NodeState.STOPPED


def test_an_idle_node_is_stopped_restarted_for_demand_and_removed_past_max_age(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    before = cluster_state(tc)
    home = Path("/home") / C.CLUSTER_USER / "warm"
    tc.master_run(["rm", "-rf", str(home)], check=False)
    tc.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    cfg = e2e_config(tmp_path, max_nodes=1, warm_pool={"max_nodes": 1, "max_age": MAX_AGE, "restart_time": 5})
    bal = balancer(cfg)

    # A new node for the first job.
    first = tc.submit(JOB, "-N", "warm-new", "-o", "/dev/null")
    grown = passes_until(bal, "a new node", lambda rs: bool(rs[-1].outcomes.added), timeout=300)
    (name,) = grown[-1].outcomes.added
    new_ready = ready_after(bal.journal, name, NodeState.REQUESTED)
    instance = bal.journal.node(name).instance_id  # type: ignore[union-attr]
    address = bal.journal.node(name).private_ip  # type: ignore[union-attr]

    # Idle: stopped into the pool, not terminated.
    passes_until(bal, "the first job to end", lambda _: written(home / f"{first}.host") is not None, timeout=120)
    passes_until(bal, "the idle node to be stopped", lambda _: stopped(bal, name), timeout=120)
    (inst,) = [i for i in bal.cloud.list_workers() if i.name == name]  # type: ignore[union-attr]
    assert (inst.instance_id, inst.state) == (instance, "stopped")  # the same container, stopped
    assert isinstance(bal.scheduler, GridEngine)
    assert name in bal.scheduler.sge.configured_exec_hosts()  # still an exec host
    host = bal.scheduler.sge.read_snapshot().host(name)
    assert host is not None and all(q.disabled for q in host.queues)

    # New demand starts it again: the same container, ready, and the job runs there.
    second = tc.submit(JOB, "-N", "warm-restart", "-o", "/dev/null")
    back = passes_until(bal, "the restart", lambda rs: bool(rs[-1].outcomes.restarted), timeout=300)
    assert back[-1].outcomes.restarted == [name] and back[-1].outcomes.added == []
    restart_ready = ready_after(bal.journal, name, NodeState.STARTING)
    assert [i.instance_id for i in bal.cloud.list_workers()] == [instance]  # type: ignore[union-attr]
    assert bal.journal.node(name).private_ip == address  # type: ignore[union-attr]  # as on EC2
    passes_until(bal, "the second job to end", lambda _: written(home / f"{second}.host") is not None, timeout=120)
    assert written(home / f"{second}.host") == name
    print(
        f"\ntime to ready: new node {new_ready:.1f} s (launch and provisioning), "
        f"restarted from the warm pool {restart_ready:.1f} s"
    )

    # Idle again: stopped again, then past max_age removed for good.
    passes_until(bal, "the node to be stopped again", lambda _: stopped(bal, name), timeout=120)

    def gone(rs: list[PassResult]) -> bool:
        return bal.journal.node(name).state is NodeState.TERMINATED  # type: ignore[union-attr]

    passes_until(bal, "the pooled node to go past max_age", gone, timeout=MAX_AGE + 120)
    assert bal.cloud.list_workers() == []  # type: ignore[union-attr]  # no container left, stopped or not
    assert any("max_age reached" in (e.detail or "") for e in bal.journal.events(name))
    assert cluster_state(tc) == before
    bal.journal.close()
