"""The test cluster's slurm.conf defines as many cloud nodes as asked: the Slurm demo asks for its
``--max-nodes``, as docs/slurm.md asks a site to (no more cloud nodes than elb may launch, so
Slurm never asks for a node elb must give back)."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.clouds.local import local_settings
from elb.core.config import parse_config
from elb.core.drivers import cloud_settings
from elb.schedulers.slurm.config import slurm_settings
from elb.schedulers.waiting import WAIT_CAP
from elbdev.cli import build_parser
from elbdev.demo_slurm import demo_config
from elbdev.demo_steps import at_boot
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


def test_the_slurm_demo_in_boot_mode_brings_a_node_up_within_the_controllers_resume_timeout(tmp_path: Path) -> None:
    """``python -m elbdev demo --scheduler slurm --provision boot``: the nodes configure themselves
    at boot (the checkout and this environment mounted into them), and elb's bound on a
    bring-up (launch, admit play, the wait for slurmd) stays below the test cluster's
    ResumeTimeout, so that Slurm never gives up on a node elb still brings up."""

    config = at_boot(demo_config(tmp_path, tmp_path / "key", "elbtest", 3), [Path("/opt/venv"), Path("/srv/elb")])
    cfg = parse_config(config)
    assert cfg.provision.mode == "boot" and local_settings(cfg).mounts == [Path("/opt/venv"), Path("/srv/elb")]
    assert cfg.provision.extra_vars == {"slurm_node_options": ["-b"]}  # goes into each node's boot document
    bound = cloud_settings(cfg).boot_timeout + cfg.provision.timeout + WAIT_CAP * cfg.provision.boot.timeout
    assert bound < slurm.RESUME_TIMEOUT


def test_the_slurm_demo_brings_a_node_up_within_the_resume_timeout_even_while_slurmctld_is_slow(
    tmp_path: Path,
) -> None:
    """The wait for a registration counts only the time slurmctld answered, up to ``WAIT_CAP``
    times ``slurm.register_timeout`` on the clock: the test cluster's ResumeTimeout is above
    that too, as ``elb validate`` asks (no warning on the demo's own controller)."""
    cfg = parse_config(demo_config(tmp_path, tmp_path / "key", "elbtest", 3))
    bound = cloud_settings(cfg).boot_timeout + cfg.provision.timeout + WAIT_CAP * slurm_settings(cfg).register_timeout
    assert bound < slurm.RESUME_TIMEOUT


def test_the_cluster_tests_bring_a_node_up_within_the_resume_timeout_even_while_slurmctld_is_slow(
    tmp_path: Path,
) -> None:
    """The same for the config of the Slurm cluster tests and the soak (a longer play time-out,
    600 s, for a loaded machine): a launch left open under the back-off is then launched only
    while a whole bring-up fits before Slurm gives up (docs/slurm.md)."""
    from tests.cluster.slurm_support import slurm_config

    cfg = slurm_config(tmp_path)
    bound = cloud_settings(cfg).boot_timeout + cfg.provision.timeout + WAIT_CAP * slurm_settings(cfg).register_timeout
    assert bound < slurm.RESUME_TIMEOUT


def test_the_demo_parser_takes_the_provision_mode() -> None:
    args = build_parser().parse_args(["demo", "--scheduler", "slurm", "--provision", "boot"])
    assert (args.scheduler, args.provision) == ("slurm", "boot")
    assert build_parser().parse_args(["demo"]).provision == "push"


def test_a_controller_restart_keeps_the_cloud_nodes_its_slurm_conf_defines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The soak's controller defines max_nodes cloud nodes; its restart fault must not put back 8.
    conf = tmp_path / "slurm.conf"
    monkeypatch.setattr(slurm, "CONF", conf)
    assert slurm.cloud_nodes_now() == slurm.CLOUD_NODES  # no slurm.conf yet
    conf.write_text(slurm.render_conf("master", PROGS, "10.77.0.1", cloud_nodes=3))
    assert slurm.cloud_nodes_now() == 3
