"""``molecule test`` for every scenario in ``molecule/``, against the real test cluster.

Marked ``cluster``: run with ``python -m pytest -m cluster tests/molecule`` (as root). The
session's ``testcluster`` fixture (tests/conftest.py) holds the cluster's lock and brings it
up (and down at the end). Each scenario launches its own node containers (delegated driver,
``molecule/_shared``), runs the roles through the playbooks (converge, idempotence, verify)
and removes its nodes again.
"""

from __future__ import annotations

import pytest

from elbdev.testcluster.cluster import TestCluster
from tests.molecule.runner import run_scenario, scenarios

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("scenario", scenarios())
def test_molecule_scenario(testcluster: TestCluster, scenario: str) -> None:
    before = sorted(w.name for w in testcluster.workers())
    run = run_scenario(scenario)
    print(f"\nmolecule test -s {scenario}: rc {run.rc} in {run.seconds:.0f} s")
    assert run.rc == 0, f"molecule test -s {scenario} failed (rc {run.rc}):\n{run.output[-6000:]}"
    assert "Molecule executed 1 scenario (1 successful)" in run.output
    # destroy removed the scenario's nodes and nothing else
    assert sorted(w.name for w in testcluster.workers()) == before
