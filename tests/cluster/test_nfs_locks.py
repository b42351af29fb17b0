"""Locks on /home hold across nodes (marked ``cluster``): a lock one node holds on a file in the
shared /home makes another node's non-blocking lock fail (EWOULDBLOCK) and its blocking lock wait
until the first lets go; for fcntl (POSIX) locks and for flock, taken as the cluster user."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.core.interfaces import Instance
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster import lockers

pytestmark = pytest.mark.cluster

HOME = Path(f"/home/{C.CLUSTER_USER}")


def on(node: Instance) -> lockers.Node:
    """Lockers on ``node``, run as the cluster user."""

    def start(*args: str) -> subprocess.Popen[str]:
        command = ["podman", "exec", node.name, "runuser", "-u", C.CLUSTER_USER, "--", *lockers.argv("python3", *args)]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    return lockers.Node(start, lambda name: HOME / name)


@pytest.fixture
def two_nodes(testcluster: TestCluster) -> Iterator[list[Instance]]:
    nodes = testcluster.add_nodes(2)
    try:
        yield nodes
    finally:
        testcluster.remove_nodes([n.name for n in nodes])  # terminates them when the play succeeds
        left = [w.instance_id for w in testcluster.workers() if w.name in {n.name for n in nodes}]
        testcluster.cloud().terminate(left)


def test_a_lock_on_home_holds_against_another_node(two_nodes: list[Instance]) -> None:
    """Both kinds on the same two nodes, one after the other (a test's nodes go with it: the
    session removes whatever a test leaves)."""
    first, second = two_nodes
    for kind in ("posix", "bsd"):
        lock_holds(first, second, kind)


def lock_holds(first: Instance, second: Instance, kind: str) -> None:
    stamp = time.time_ns()
    target, release = HOME / f"lock-{kind}-{stamp}", HOME / f"release-{kind}-{stamp}"
    try:
        lockers.lock_holds(on(first), on(second), kind, target.name, release)  # release: written on the master
    finally:
        target.unlink(missing_ok=True)
        release.unlink(missing_ok=True)
