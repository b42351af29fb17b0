"""The fault tests share the session's test cluster (``testcluster`` in tests/conftest.py)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from elbdev.testcluster.cluster import TestCluster
from tests.faults.support import reset_job_outputs
from tests.lanes import lane_of


@pytest.fixture(autouse=True)
def no_leftover_workers(testcluster: TestCluster, request: pytest.FixtureRequest) -> Iterator[None]:
    """Start from a cluster with no workers: a session before ours (another suite, killed
    mid-run) may have left some, and elb would adopt them. Each fault test checks its own
    leaks at its end. Grid Engine's fault tests start with no job files (Slurm's have their
    own directory, and may run beside them: tests/lanes.py)."""
    if lane_of(request.node.nodeid) != "slurm":
        reset_job_outputs()
    left = [w.name for w in testcluster.workers()]
    if left:
        warnings.warn(f"workers left by an earlier session, removed before the test: {left}", stacklevel=1)
        testcluster.remove_nodes(left)
        cloud = testcluster.cloud()
        cloud.terminate([w.instance_id for w in cloud.list_workers()])
    yield
