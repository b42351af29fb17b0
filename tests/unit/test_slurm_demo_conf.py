"""The test cluster's slurm.conf defines as many cloud nodes as asked: the Slurm demo asks for its
``--max-nodes``, as docs/slurm.md asks a site to (no more cloud nodes than elb may launch, so
Slurm never asks for a node elb must give back)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elbdev.testcluster import slurm

PROGS = {kind: Path(f"/usr/bin/elb-slurm-{kind}") for kind in ("resume", "suspend", "resume-fail")}


def test_the_conf_defines_the_cloud_nodes_asked_for() -> None:
    conf = slurm.render_conf("master", PROGS, cloud_nodes=4)
    assert "NodeName=node[001-004] State=CLOUD" in conf
    assert f"PartitionName={slurm.PARTITION} Nodes=node[001-004] " in conf


def test_the_tests_keep_their_eight_cloud_nodes() -> None:
    assert f"NodeName=node[001-{slurm.CLOUD_NODES:03d}]" in slurm.render_conf("master", PROGS)


@pytest.mark.parametrize("count", [0, 1000])
def test_a_count_out_of_range_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match="cloud_nodes"):
        slurm.render_conf("master", PROGS, cloud_nodes=count)
