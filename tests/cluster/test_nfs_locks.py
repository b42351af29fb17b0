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
from tests.cluster.helpers import wait_for

pytestmark = pytest.mark.cluster

HOME = Path(f"/home/{C.CLUSTER_USER}")

# Run on a node as the cluster user: take a lock (``posix``: lockf, ``bsd``: flock) on FILE and
# say how it went; ``hold`` keeps it until RELEASE exists.
LOCKER = """
import fcntl, os, sys, time
kind, what, path = sys.argv[1:4]
f = open(path, "a")
take = fcntl.lockf if kind == "posix" else fcntl.flock
flags = fcntl.LOCK_EX | (fcntl.LOCK_NB if what == "try" else 0)
print("asking", flush=True)
try:
    take(f, flags)
except BlockingIOError as err:
    print("refused", err.errno, flush=True)
    sys.exit(0)
print("locked", flush=True)
if what == "hold":
    while not os.path.exists(sys.argv[4]):
        time.sleep(0.1)
f.close()
print("released", flush=True)
"""


def locker(node: Instance, *args: str) -> subprocess.Popen[str]:
    argv = ["podman", "exec", node.name, "runuser", "-u", C.CLUSTER_USER, "--", "python3", "-c", LOCKER, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=120)
    return out.strip()


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
    for kind in ("posix", "bsd"):
        lock_holds(*two_nodes, kind)


def lock_holds(first: Instance, second: Instance, kind: str) -> None:
    stamp = time.time_ns()
    target, release = HOME / f"lock-{kind}-{stamp}", HOME / f"release-{kind}-{stamp}"
    holder = locker(first, kind, "hold", str(target), str(release))
    waiter: subprocess.Popen[str] | None = None
    try:
        assert line(holder) == "asking" and line(holder) == "locked"

        refused = locker(second, kind, "try", str(target))
        assert finish(refused).splitlines() == ["asking", "refused 11"]  # EWOULDBLOCK

        waiter = locker(second, kind, "wait", str(target))
        assert line(waiter) == "asking"
        # While the first node holds the lock, the second's blocking lock has not been granted:
        # another non-blocking try from there is still refused, and the waiter has said nothing.
        again = locker(second, kind, "try", str(target))
        assert finish(again).splitlines() == ["asking", "refused 11"]
        assert waiter.poll() is None

        release.write_text("")  # on the master: the first node lets go
        assert finish(holder).splitlines()[-1] == "released"
        assert finish(waiter).splitlines() == ["locked", "released"]
        # Free again for everyone.
        assert finish(locker(first, kind, "try", str(target))).splitlines() == ["asking", "locked", "released"]
    finally:
        release.write_text("")
        for proc in (holder, waiter):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        wait_for("the lockers to end", lambda: holder.poll() is not None, timeout=30)
        target.unlink(missing_ok=True)
        release.unlink(missing_ok=True)
