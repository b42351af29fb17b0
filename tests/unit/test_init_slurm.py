"""``elb init`` on a Slurm controller: the config written from ``scontrol show config|partition|node``
(tests/fixtures/slurm/conf, printed by scripts standing in for scontrol) loads, has a node group
for each cloud partition, and the slurm.conf lines the cluster lacks are printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.cli import init
from elb.cli.main import main
from elb.core.config import load_config
from elb.core.exitcodes import Exit
from elb.schedulers.slurm import conf
from elb.schedulers.slurm import init as init_slurm
from elb.schedulers.slurm.config import SlurmConfig, slurm_settings
from elb.schedulers.slurm.driver import conf_missing
from tests.unit.scontrol_fake import FIXTURES, fake_slurm

CONFIG = (FIXTURES / "show-config.txt").read_text()


def facts() -> conf.SlurmFacts:
    return conf.SlurmFacts(
        conf.parse_show_config(CONFIG),
        conf.parse_partitions((FIXTURES / "show-partition.txt").read_text()),
        conf.parse_nodes((FIXTURES / "show-node.txt").read_text()),
    )


def write(tmp_path: Path, f: init_slurm.SlurmInitFacts) -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(init_slurm.render(f, init.cloud_lines(None, "not asked (--offline)"), init.TAIL))
    return path


def test_a_cloud_partition_becomes_a_node_group_and_the_config_loads(tmp_path: Path) -> None:
    f = init_slurm.SlurmInitFacts(master="master", conf="/etc/slurm/slurm.conf", bin_dir=None, slurm=facts())
    cfg = load_config(write(tmp_path, f))
    assert cfg.scheduler == "slurm" and cfg.cluster.master == "master"
    assert slurm_settings(cfg).conf == Path("/etc/slurm/slurm.conf") and slurm_settings(cfg).bin_dir is None
    assert slurm_settings(cfg).partition_groups == {"cloud": "cloud"}
    (g,) = cfg.node_groups or []
    assert (g.name, g.slots, g.memory, g.max_nodes) == ("cloud", 2, "1000M", 8)
    assert cfg.policy.max_nodes == 8  # the groups' sum
    # The static partition (no CLOUD node) is no group; the written config passes slurm.conf's checks.
    assert conf_missing(init_slurm.render(f), facts()) == []


def test_what_slurm_lacks_is_what_validate_would_fail() -> None:
    broken = CONFIG.replace("PrivateData             = cloud", "PrivateData             = none")
    broken = broken.replace("ResumeTimeout           = 1920 sec", "ResumeTimeout           = 600 sec")
    f = conf.SlurmFacts(conf.parse_show_config(broken), facts().partitions, facts().nodes)
    text = init_slurm.render(init_slurm.SlurmInitFacts(master="m", conf=None, bin_dir=None, slurm=f))
    assert [c.fix for c in conf_missing(text, f)] == ["ResumeTimeout=1920", "PrivateData=cloud"]


def test_slurm_not_read_is_said_in_a_comment_and_nothing_guessed(tmp_path: Path) -> None:
    f = init_slurm.SlurmInitFacts(
        master="m", conf=None, bin_dir="/opt/slurm/bin", slurm_problem="scontrol: exit status 1\nsecond line"
    )
    path = write(tmp_path, f)
    cfg = load_config(path)
    text = path.read_text()
    assert cfg.scheduler == "slurm" and cfg.node_groups is None and slurm_settings(cfg).partition_groups == {}
    assert slurm_settings(cfg).bin_dir == Path("/opt/slurm/bin")
    assert "# Slurm could not be read when this file was written: scontrol: exit status 1 second line" in text


def test_a_partition_whose_cpus_are_unknown_is_left_to_the_admin(tmp_path: Path) -> None:
    nodes = "NodeName=c1 State=IDLE+CLOUD RealMemory=100 Partitions=gpu\n"
    f = conf.SlurmFacts(
        conf.parse_show_config(CONFIG), conf.parse_partitions("PartitionName=gpu Nodes=c1\n"), conf.parse_nodes(nodes)
    )
    path = write(tmp_path, init_slurm.SlurmInitFacts(master="m", conf=None, bin_dir=None, slurm=f))
    cfg = load_config(path)
    assert cfg.node_groups is None and cfg.policy.max_nodes == 10
    assert "# partition gpu: the CPUs of c1 could not be read: set its group by hand" in path.read_text()


def test_init_on_a_slurm_controller_detects_it_writes_and_prints_the_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scontrol answers, Grid Engine does not (no SGE there): a Slurm config, which loads."""
    broken = CONFIG.replace("idle_on_node_suspend,enable_configless", "enable_configless")
    bin_dir = fake_slurm(tmp_path / "bin", config=broken)
    path = tmp_path / "etc" / "elb.yml"
    argv = ["init", "--offline", "-c", str(path), "--sge-root", str(tmp_path / "nosge")]
    assert main([*argv, "--slurm-bin-dir", str(bin_dir)]) == Exit.OK
    out = capsys.readouterr().out
    assert "Slurm's scontrol answers and Grid Engine does not: a Slurm config" in out
    assert "  SlurmctldParameters=enable_configless,idle_on_node_suspend    # idle_on_node_suspend not in" in out
    cfg = load_config(path)
    assert cfg.scheduler == "slurm" and slurm_settings(cfg).bin_dir == bin_dir
    assert slurm_settings(cfg).conf == Path("/etc/slurm/slurm.conf")
    # Without scontrol, the same machine is a Grid Engine master as before.
    assert main([*argv, "--force", "--slurm-bin-dir", str(tmp_path / "none")]) == Exit.OK
    assert load_config(path).scheduler == "sge"


def test_init_scheduler_slurm_with_a_garbled_scontrol_is_a_comment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = fake_slurm(tmp_path / "bin", node="garbage that is not a record\n")
    path = tmp_path / "elb.yml"
    code = main(["init", "--offline", "--scheduler", "slurm", "--slurm-bin-dir", str(bin_dir), "-c", str(path)])
    assert code == Exit.OK
    out = capsys.readouterr().out
    assert "  note: Slurm: scontrol show node: line 1 is not a NodeName=... record" in out
    assert "Traceback" not in out
    assert load_config(path).scheduler == "slurm"


def test_read_slurm_runs_scontrol(tmp_path: Path) -> None:
    bin_dir = fake_slurm(tmp_path / "bin")
    f, problem = init_slurm.read_slurm(SlurmConfig(bin_dir=bin_dir))
    assert problem is None and f is not None and len(f.cloud_nodes()) == 8
