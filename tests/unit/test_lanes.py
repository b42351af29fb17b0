"""The test cluster's lanes (tests/lanes.py): which lane runs a test, and what each lane compares
of the master's files."""

from __future__ import annotations

import pytest

from tests import lanes

HOSTS = (
    "127.0.0.1 localhost\n"
    "10.77.0.1 master\n"
    "10.77.0.2 node001\n"  # Slurm's
    "10.77.0.3 node012\n"  # Grid Engine's
    "10.77.0.4 molrm1\n"  # a Molecule scenario of Grid Engine's lane
    "10.77.0.5 molsite2\n"  # one of Slurm's lane
)
EXPORTS = "/home node001(rw,sync)\n/home node012(rw,sync)\n/home molsite2(rw,sync)\n"


@pytest.mark.parametrize(
    ("nodeid", "lane"),
    [
        ("tests/cluster/test_slurm_e2e.py::test_x", "slurm"),
        ("tests/faults/test_slurm_faults.py::test_x", "slurm"),
        ("tests/faults/test_soak.py::test_soak_slurm", "slurm"),
        ("tests/faults/test_soak.py::test_soak_sge", "sge"),
        ("tests/molecule/test_molecule.py::test_molecule_scenario[slurm_site]", "slurm"),
        ("tests/molecule/test_molecule.py::test_molecule_scenario[spot_agent]", "slurm"),
        ("tests/molecule/test_molecule.py::test_molecule_scenario[default]", "sge"),
        ("tests/cluster/test_nfs_locks_private.py::test_x[posix]", "slurm"),
        ("tests/cluster/test_nfs_locks.py::test_x", "sge"),
        ("tests/faults/test_faults.py::test_x", "sge"),
        ("tests/package/test_install.py::test_x", "sge"),
    ],
)
def test_each_test_has_its_lane(nodeid: str, lane: str) -> None:
    assert lanes.lane_of(nodeid) == lane


def test_grid_engines_lane_leaves_out_the_lines_of_slurms_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lanes.LANE_ENV, "sge")
    assert lanes.own_lines(HOSTS) == "127.0.0.1 localhost\n10.77.0.1 master\n10.77.0.3 node012\n10.77.0.4 molrm1\n"
    assert lanes.own_lines(EXPORTS) == "/home node012(rw,sync)\n"


def test_slurms_lane_leaves_out_the_lines_of_every_other_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lanes.LANE_ENV, "slurm")
    assert lanes.own_lines(HOSTS) == "127.0.0.1 localhost\n10.77.0.1 master\n10.77.0.2 node001\n10.77.0.5 molsite2\n"
    assert lanes.own_lines(EXPORTS) == "/home node001(rw,sync)\n/home molsite2(rw,sync)\n"


def test_a_session_of_every_test_compares_every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(lanes.LANE_ENV, raising=False)
    assert lanes.other_lane_names() == ""
    assert lanes.own_lines(HOSTS) == HOSTS


def test_a_lane_that_is_not_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lanes.LANE_ENV, "pbs")
    with pytest.raises(ValueError, match="ELB_TEST_LANE"):
        lanes.lane()
