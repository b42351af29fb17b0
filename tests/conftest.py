"""The real test cluster for the ``cluster`` and ``faults`` tests: brought up once per session, always torn down.

Shared by tests/cluster and tests/faults (one definition, so one session holds one cluster and one lock
even when both directories run together).

Needs root, podman, and Debian's packages (``scripts/install-system-deps.sh`` is run by
``TestCluster.up``). The tests run as the master would: after ``up`` this process joins the
master's UTS namespace (hostname ``master``), so elb's provisioner reaches the master with a
local connection exactly as when elb runs on the SGE master.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import time
from collections.abc import Iterator

import pytest
from hypothesis import settings

from elbdev.testcluster import constants as C
from tests.lanes import lane, lane_of, slurm_node_names
from tests.product_paths import PRODUCT_PATHS, fingerprint, written

# ``scripts/test`` (what CI runs) passes ``--hypothesis-profile=ci``: the property tests try the
# same examples every run, so a run's outcome is the code's, not the draw's; run by hand they
# draw new examples each time (and keep what failed in .hypothesis/).
settings.register_profile("ci", derandomize=True)

CLONE_NEWUTS = 0x04000000


def _enter_master_uts() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(C.UTS_NS, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWUTS) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({C.UTS_NS}): {os.strerror(err)}")
    finally:
        os.close(fd)


LOCK = C.STATE_DIR.parent / "elb-testcluster.lock"


@pytest.fixture(scope="session")
def _cluster_lock() -> Iterator[None]:
    """One user of the machine's single test cluster at a time (pytest sessions, Molecule).
    ``ELB_TESTCLUSTER_LOCK_HELD=1``: the caller holds the lock for the session already, e.g.
    ``flock /var/lib/elb-testcluster.lock env ELB_TESTCLUSTER_LOCK_HELD=1 python -m pytest ...``
    around a sequence of sessions and benchmarks."""
    if os.environ.get("ELB_TESTCLUSTER_LOCK_HELD") == "1":
        yield
        return
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A lane of the test cluster's session (``ELB_TEST_LANE``, tests/lanes.py) runs its own tests."""
    own = lane()
    if not own:
        return
    kept: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        (kept if lane_of(item.nodeid) == own else other).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = kept


@pytest.fixture(scope="session")
def testcluster(_cluster_lock: None) -> Iterator[object]:
    """The test cluster, brought up for the session and torn down after it; with
    ``ELB_TESTCLUSTER_SHARED=1`` the caller brought it up and tears it down (``scripts/test``,
    whose lanes share it: tests/lanes.py)."""
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root")
    from elbdev.testcluster.cluster import TestCluster
    from tests.cluster.names import reserve

    shared = os.environ.get("ELB_TESTCLUSTER_SHARED") == "1"
    tc = TestCluster()
    t = time.monotonic()
    try:
        if not shared:
            times = tc.up(nodes=0)
            print(f"\ntest cluster up in {time.monotonic() - t:.1f} s: {times}")
        _enter_master_uts()
        for k, v in C.SGE_ENV.items():
            os.environ[k] = v
        if lane() != "slurm":
            reserve(len(slurm_node_names()))  # Grid Engine's node names after Slurm's
        yield tc
    finally:
        if not shared:
            tc.down()


@pytest.fixture(autouse=True)
def _leftover_workers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test on the test cluster, workers it left (a test that failed half way) are removed
    from the cluster and terminated, so the next test does not find, and adopt, a stranger's node;
    the names its elb gave are noted, never given again this session (tests/cluster/names.py)."""
    yield
    if "testcluster" not in request.fixturenames:
        return
    from elbdev.testcluster._run import TestClusterError
    from elbdev.testcluster.cluster import TestCluster
    from tests.cluster.names import note_used

    if lane() != "slurm":  # Slurm's names are its slurm.conf's; Grid Engine's lane keeps the counter
        note_used()  # the names the test's elb gave, never given again this session
    tc = request.getfixturevalue("testcluster")
    assert isinstance(tc, TestCluster)
    left = tc.workers()
    if not left:
        return
    print(f"\nworkers left by {request.node.nodeid}: {[w.name for w in left]}; removing them")
    try:
        tc.remove_nodes([w.name for w in left if w.state == "running"])
    except TestClusterError as err:
        print(f"removing them from the cluster failed: {err}")
    tc.cloud().terminate([w.instance_id for w in tc.workers()])


@pytest.fixture(autouse=True)
def _no_writes_to_product_paths(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test fails if it wrote into elb's own directories (``tests.product_paths``): a config
    without ``state_dir`` or ``provision.private_data_dir`` (or ``host_keys_dir``) of a tmp path
    writes there, and a later real run of elb on that machine takes the files for its own."""
    before = fingerprint()
    yield
    changed = written(before, fingerprint())
    if changed:
        roots = ", ".join(str(p) for p in PRODUCT_PATHS)
        pytest.fail(f"{request.node.nodeid} wrote into {roots}: {', '.join(changed[:10])}; use tmp paths")
