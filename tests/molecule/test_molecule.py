"""``molecule test`` for every scenario in ``molecule/``, against the real test cluster.

Marked ``cluster``: run with ``python -m pytest -m cluster tests/molecule`` (as root). Each
scenario launches its own node containers (delegated driver, ``molecule/_shared``), runs the
roles through the playbooks (converge, idempotence, verify) and removes the nodes again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.molecule.runner import cluster_lock, lock_held_by_this_process, run_scenario, scenarios

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def molecule_cluster() -> Iterator[None]:
    """The test cluster, up and locked for this module.

    When the cluster tests' session fixture (tests/cluster/conftest.py) already holds the
    lock in this process, the cluster is up and it will tear it down: use it as it is.
    Otherwise take the lock, bring the cluster up, and always tear it down afterwards.
    """
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root")
    if lock_held_by_this_process():
        yield
        return
    from elb.testcluster.cluster import TestCluster

    with cluster_lock():
        tc = TestCluster()
        try:
            tc.up(nodes=0)
            yield
        finally:
            tc.down()


def test_there_are_scenarios() -> None:
    assert {"default", "remove"} <= set(scenarios())


@pytest.mark.parametrize("scenario", scenarios())
def test_molecule_scenario(molecule_cluster: None, scenario: str) -> None:
    run = run_scenario(scenario)
    print(f"\nmolecule test -s {scenario}: rc {run.rc} in {run.seconds:.0f} s")
    assert run.rc == 0, f"molecule test -s {scenario} failed (rc {run.rc}):\n{run.output[-6000:]}"
    assert "Molecule executed 1 scenario (1 successful)" in run.output
