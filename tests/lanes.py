"""The test cluster's session in lanes: Grid Engine's tests beside Slurm's, on the one test cluster.

The cluster and fault tests mostly wait on nodes, so ``scripts/test`` runs them as two pytest
sessions side by side over one test cluster it brings up and down itself
(``ELB_TESTCLUSTER_SHARED=1``): Grid Engine's lane (``ELB_TEST_LANE=sge``) and Slurm's
(``ELB_TEST_LANE=slurm``).

The lanes keep apart by what each owns on the cluster:

- the label of their nodes: each lane's elb is a cluster of its own (``ELB_TESTCLUSTER_NAME``,
  read by ``elbdev.testcluster.constants.CLUSTER_NAME``), so neither adopts, terminates or
  counts the other's nodes as leftovers;
- the node names (podman's container names are one namespace): Slurm's are its slurm.conf's
  (``node001``-``node008``); Grid Engine's come after them (tests/cluster/names.py);
- their controllers: each is started, stopped and restarted (the soak's faults) only by its
  lane's tests;
- the master's files: each lane compares /etc/hosts and the exports without the lines that name
  the other lane's nodes (``own_lines``), which that lane adds and removes meanwhile; job files
  in directories of their own.

Without ``ELB_TEST_LANE`` one session runs every test, one after the other, as before.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from elbdev.testcluster import slurm

LANE_ENV = "ELB_TEST_LANE"
LANES = ("sge", "slurm")
MOLECULE = Path(__file__).resolve().parents[1] / "molecule"


def lane() -> str:
    """This session's lane, "" when it runs every test."""
    value = os.environ.get(LANE_ENV, "")
    if value and value not in LANES:
        raise ValueError(f"{LANE_ENV}={value!r}: expected one of {', '.join(LANES)}")
    return value


# Tests of neither scheduler that touch nothing of the master's, put in Slurm's lane, the shorter:
# the NFS locks of a private nfs-ganesha, and the spot agent's Molecule scenario (its nodes are
# never added to the master).
NEUTRAL = ("test_nfs_locks_private.py", "test_molecule.py::test_molecule_scenario[spot_agent]")


def lane_of(nodeid: str) -> str:
    """The lane of a test by its node id: Slurm's modules, soak and Molecule scenarios and the
    ``NEUTRAL`` tests in Slurm's lane, every other test in Grid Engine's."""
    path, _, name = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    if "slurm" in module or (module in ("test_soak.py", "test_molecule.py") and "slurm" in name):
        return "slurm"
    if module in NEUTRAL or f"{module}::{name}" in NEUTRAL:
        return "slurm"
    return "sge"


def slurm_node_names() -> list[str]:
    """Slurm's node names (its slurm.conf's cloud nodes, at least as many as by default)."""
    count = max(slurm.CLOUD_NODES, slurm.cloud_nodes_now())
    return [f"node{i:03d}" for i in range(1, count + 1)]


def _molecule_names(in_lane: str) -> list[str]:
    """The node names of the Molecule scenarios of a lane (their molecule.yml's platforms)."""
    names = []
    for path in sorted(MOLECULE.glob("*/molecule.yml")):
        if lane_of(f"tests/molecule/test_molecule.py::test_molecule_scenario[{path.parent.name}]") == in_lane:
            names += [str(p["name"]) for p in yaml.safe_load(path.read_text()).get("platforms", [])]
    return names


def other_lane_names() -> str:
    """A regular expression that finds a node name of the lane beside this one in a line of
    text, "" outside the two lanes: Grid Engine's lane sees Slurm's names, Slurm's every other."""
    own = lane()
    if not own:
        return ""
    slurm_names = "|".join(map(re.escape, [*slurm_node_names(), *_molecule_names("slurm")]))
    if own == "sge":
        return rf"\b(?:{slurm_names})\b"
    return rf"\b(?!(?:{slurm_names})\b)(?:node[0-9]+|mol[a-z]+[0-9]+)\b"


def own_lines(text: str) -> str:
    """``text`` (the master's /etc/hosts or exports) without the lines that name a node of the
    lane beside this one, which that lane adds and removes meanwhile; all of it outside lanes."""
    pattern = other_lane_names()
    if not pattern:
        return text
    other = re.compile(pattern)
    return "".join(line for line in text.splitlines(keepends=True) if not other.search(line))
