"""slurm.conf's facts as ``elb validate`` checks them (``elb.schedulers.slurm.driver.conf_checks``),
on ``scontrol show config|partition|node`` output in 22.05's shape (tests/fixtures/slurm/conf):
the good output passes every check, and each broken one fails its own check with the slurm.conf
line that fixes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.checks import Check
from elb.core.config import Config, parse_config
from elb.core.exitcodes import Exit
from elb.schedulers.slurm import conf
from elb.schedulers.slurm.driver import conf_checks
from tests.unit.scontrol_fake import fake_slurm

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm" / "conf"
CONFIG = (FIXTURES / "show-config.txt").read_text()
PARTITIONS = (FIXTURES / "show-partition.txt").read_text()
NODES = (FIXTURES / "show-node.txt").read_text()


def config(**over: object) -> Config:
    data: dict[str, object] = {"scheduler": "slurm", "policy": {"max_nodes": 8, "slots_per_node": 2}}
    data.update(over)
    return parse_config(data)


def facts(config_text: str = CONFIG, nodes: str = NODES, partitions: str = PARTITIONS) -> conf.SlurmFacts:
    return conf.SlurmFacts(
        conf.parse_show_config(config_text), conf.parse_partitions(partitions), conf.parse_nodes(nodes)
    )


def run(cfg: Config, f: conf.SlurmFacts, scripts: dict[str, str] | None = None) -> list[Check]:
    return list(conf_checks(cfg, f, script=(scripts or {}).get))


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def with_line(key: str, value: str) -> str:
    """The recorded config with ``key``'s line replaced (or dropped, ``value`` None)."""
    lines = [ln for ln in CONFIG.splitlines() if ln.split(" ", 1)[0] != key]
    return "\n".join([*lines, f"{key:<23} = {value}"]) + "\n"


def test_the_good_output_passes_every_check() -> None:
    checks = run(config(), facts())
    assert not failed(checks), [c.line() for c in checks]
    assert not [c for c in checks if c.warning], [c.line() for c in checks]
    whats = {c.what for c in checks}
    assert whats >= {
        "Slurm programs",
        "Slurm ResumeTimeout",
        "Slurm SuspendTime",
        "Slurm PrivateData",
        "Slurm SlurmctldParameters",
        "Slurm cloud nodes",
        "Slurm node sizes",
    }


def test_the_records_are_read() -> None:
    f = facts()
    assert [p.name for p in f.cloud_partitions()] == ["cloud"]
    assert [n.name for n in f.cloud_nodes()] == [f"node{i:03d}" for i in range(1, 9)]
    static = next(n for n in f.nodes if n.name == "static1")
    assert (static.cpus, static.memory_mb, static.partitions, static.cloud) == (2, 1000, ("static",), False)
    assert f.config["SlurmctldHost[0]"] == "master(10.77.0.1)"
    assert conf.master_name(f.config) == "master"
    assert f.config["CgroupPlugin"] == "autodetect"  # a later section's keys are read, slurm.conf's kept


def test_a_value_with_spaces_keeps_its_words() -> None:
    (r,) = conf.parse_records("NodeName=a OS=Linux 6.1 #1 SMP State=IDLE Reason=elb: idle [root@x]", "NodeName", "t")
    assert r["OS"] == "Linux 6.1 #1 SMP" and r["Reason"] == "elb: idle [root@x]" and r["State"] == "IDLE"


def test_records_without_o_are_read_too() -> None:
    text = "NodeName=a CPUTot=4\n   RealMemory=100 State=IDLE+CLOUD\n\nNodeName=b CPUTot=2\n   State=IDLE\n"
    nodes = conf.parse_nodes(text)
    assert [(n.name, n.cpus, n.memory_mb, n.cloud) for n in nodes] == [("a", 4, 100, True), ("b", 2, None, False)]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("garbage\nmore garbage\n", "no 'Key = value' line"),
        ("Configuration data as of 2026-12-02T05:30:00\nAccountingStorageHost   = localhost\n", "partial"),
    ],
)
def test_a_garbled_or_partial_config_is_one_line(text: str, words: str) -> None:
    with pytest.raises(conf.SlurmConfError) as err:
        conf.parse_show_config(text)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text",
    ["Nodes=node[001-002]\n", "NodeName=a CPUTot=x\n", "NodeName=a CPUTot=2\nstray words\n", "NodeName=\n"],
)
def test_garbled_records_are_one_line(text: str) -> None:
    with pytest.raises(conf.SlurmConfError) as err:
        conf.parse_nodes(text)
    assert "\n" not in str(err.value)


def test_a_bad_hostlist_is_one_line() -> None:
    with pytest.raises(conf.SlurmConfError, match="partition cloud: Nodes"):
        conf.parse_partitions("PartitionName=cloud Nodes=node[001-\n")


def test_a_program_that_is_not_elbs_fails() -> None:
    broken = with_line("ResumeProgram", "/usr/local/sbin/power_up.sh")
    (bad,) = failed(run(config(), facts(broken)))
    assert bad.what == "Slurm programs" and "ResumeProgram" in bad.detail and "cannot be read" in bad.detail
    assert bad.fix.startswith("ResumeProgram=") and bad.fix.endswith("/elb-slurm-resume")
    # The suspend program named where the resume-fail program goes: resume-fail is not resume.
    swapped = with_line("ResumeFailProgram", "/usr/local/bin/elb-slurm-resume")
    (bad,) = failed(run(config(), facts(swapped)))
    assert bad.fix.startswith("ResumeFailProgram=") and bad.fix.endswith("/elb-slurm-resume-fail")
    unset = with_line("SuspendProgram", "(null)")
    (bad,) = failed(run(config(), facts(unset)))
    assert "SuspendProgram: not set" in bad.detail


def test_a_wrapper_that_runs_elbs_program_passes() -> None:
    wrapper = "/srv/slurm/bin/resume"
    broken = with_line("ResumeProgram", wrapper)
    text = (
        '#!/bin/sh\nELB_SLURM_REQUESTS=/srv/req\nexport ELB_SLURM_REQUESTS\nexec /opt/elb/bin/elb-slurm-resume "$@"\n'
    )
    assert not failed(run(config(), facts(broken), {wrapper: text}))
    fail_only = text.replace("elb-slurm-resume", "elb-slurm-resume-fail")
    (bad,) = failed(run(config(), facts(broken), {wrapper: fail_only}))
    assert "runs no elb-slurm-resume" in bad.detail


def resume_timeout(cfg: Config, value: str) -> Check:
    (check,) = [c for c in run(cfg, facts(with_line("ResumeTimeout", value))) if c.what == "Slurm ResumeTimeout"]
    return check


def test_a_resume_timeout_below_boot_play_and_registration_fails() -> None:
    """ec2 boot_timeout 600 + provision.timeout 900 + slurm.register_timeout 120 = 1620 s; the fix
    is above the longest registration wait (3 x 120 s while Slurm answers slowly): 1860 s."""
    bad = resume_timeout(config(), "600 sec")
    assert not bad.ok and "not above 1620 s" in bad.detail
    assert bad.fix == "ResumeTimeout=1920"
    shorter = config(cloud={"ec2": {"boot_timeout": 300}}, provision={"timeout": 120})
    assert resume_timeout(shorter, "900 sec").ok


@pytest.mark.parametrize("mode", ["push", "boot"])
def test_a_resume_timeout_below_the_longest_registration_wait_warns(mode: str) -> None:
    """elb's wait for a registration counts only the time Slurm answered, up to ``WAIT_CAP``
    times its timeout on the clock: while slurmctld is slow, Slurm's ResumeTimeout (the wall
    clock) may run out on a node elb still waits for. Above the plain sum, below boot + play + 3 x
    the wait: a warning with the fix; above that: ok."""
    waited, wait = ("slurm.register_timeout", 120) if mode == "push" else ("provision.boot.timeout", 600)
    cfg = config(provision={"mode": mode})
    plain, capped = 600 + 900 + wait, 600 + 900 + 3 * wait
    warn = resume_timeout(cfg, f"{plain + 60} sec")
    assert warn.ok and warn.warning
    assert f"not above {capped} s" in warn.detail and f"3 x {waited} {wait} s" in warn.detail
    assert "ResumeFailProgram" in warn.detail
    assert warn.fix == f"ResumeTimeout={-(-(capped + 60) // 60) * 60}"
    assert warn.line().startswith(f"warn Slurm ResumeTimeout: {plain + 60} s is above {plain} s")
    ok = resume_timeout(cfg, f"{capped + 1} sec")
    assert ok.ok and not ok.warning and f"above {capped} s" in ok.detail
    assert not resume_timeout(cfg, f"{plain} sec").ok


def test_a_suspend_time_shorter_than_elbs_idle_rule_fails() -> None:
    (bad,) = failed(run(config(), facts(with_line("SuspendTime", "1800 sec"))))
    assert bad.what == "Slurm SuspendTime" and bad.fix == "SuspendTime=86400"
    (bad,) = failed(run(config(), facts(with_line("SuspendTime", "NONE"))))
    assert "power saving is off" in bad.detail


def test_a_suspend_time_within_the_keep_while_launches_are_held_fails() -> None:
    """Per second, elb keeps an idle node ``backoff.max`` past its rule while the node's group
    cannot launch: Slurm must not power it down first."""
    per_second = config(policy={"max_nodes": 8, "slots_per_node": 2, "billing": "second"}, backoff={"max": 1800})
    # idle_factor 0.5 x boot_time 300 s + backoff.max 1800 s + a poll of 60 s = 2010 s
    (bad,) = failed(run(per_second, facts(with_line("SuspendTime", "2000 sec"))))
    assert bad.what == "Slurm SuspendTime" and "2010 s" in bad.detail
    assert not failed(run(per_second, facts(with_line("SuspendTime", "2100 sec"))))


def test_private_data_without_cloud_fails() -> None:
    bad = failed(run(config(), facts(with_line("PrivateData", "none"))))
    assert [c.what for c in bad] == ["Slurm PrivateData"]
    assert bad[0].fix == "PrivateData=cloud"
    bad = failed(run(config(), facts(with_line("PrivateData", "jobs,usage"))))
    assert bad[0].fix == "PrivateData=jobs,usage,cloud"


def test_slurmctld_parameters_without_idle_on_node_suspend_fail() -> None:
    (bad,) = failed(run(config(), facts(with_line("SlurmctldParameters", "enable_configless"))))
    assert bad.what == "Slurm SlurmctldParameters"
    assert bad.fix == "SlurmctldParameters=enable_configless,idle_on_node_suspend"


def test_fewer_cloud_nodes_than_max_nodes_fail_and_more_are_held() -> None:
    (bad,) = failed(run(config(policy={"max_nodes": 10, "slots_per_node": 2}), facts()))
    assert bad.what == "Slurm cloud nodes" and "8 State=CLOUD node(s) for policy.max_nodes 10" in bad.detail
    assert bad.fix.startswith("NodeName=node[001-010] State=CLOUD")
    checks = run(config(policy={"max_nodes": 4, "slots_per_node": 2}), facts())
    assert not failed(checks) and not [c for c in checks if c.warning]
    (cloud,) = [c for c in checks if c.what == "Slurm cloud nodes"]
    assert "8 State=CLOUD nodes for policy.max_nodes 4: elb drains the powered-down ones past its room" in cloud.detail


def test_a_group_short_of_its_partitions_nodes_fails() -> None:
    groups = [{"name": "small", "slots": 2, "max_nodes": 8}, {"name": "big", "slots": 2, "max_nodes": 2}]
    cfg = config(policy={"max_nodes": 8}, node_groups=groups, slurm={"partition_groups": {"cloud": "small"}})
    (bad,) = failed(run(cfg, facts()))
    assert "group big: 0 cloud node(s)" in bad.detail


def test_nodes_slurm_believes_larger_than_they_are_fail() -> None:
    (bad,) = failed(run(config(policy={"max_nodes": 8, "slots_per_node": 1}), facts()))
    assert bad.what == "Slurm node sizes" and bad.fix == "NodeName=node[001-008] CPUs=1"
    groups = [{"name": "cloud", "slots": 2, "max_nodes": 8, "memory": "512M"}]
    (bad,) = failed(run(config(policy={"max_nodes": 8}, node_groups=groups), facts()))
    assert bad.fix == "NodeName=node[001-008] RealMemory=512"
    groups[0]["memory"] = "1G"  # 1024 MiB: RealMemory=1000 fits
    assert not failed(run(config(policy={"max_nodes": 8}, node_groups=groups), facts()))


def test_node_sizes_unchecked_without_slots_warn() -> None:
    checks = run(config(policy={"max_nodes": 8}), facts())
    assert not failed(checks)
    (warn,) = [c for c in checks if c.warning]
    assert warn.what == "Slurm node sizes" and "policy.slots_per_node" in warn.detail


def test_validate_prints_the_checks_and_a_garbled_config_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``elb validate`` runs the checks on what scontrol prints; a garbled ``scontrol show
    config`` is one FAIL line, not a traceback."""
    bin_dir = fake_slurm(tmp_path / "bin")
    requests = tmp_path / "requests"
    requests.mkdir()
    path = tmp_path / "elb.yml"
    path.write_text(
        f"state_dir: {tmp_path / 'state'}\ncloud: {{provider: local}}\nscheduler: slurm\n"
        f"slurm: {{bin_dir: {bin_dir}, requests: {requests}}}\npolicy: {{max_nodes: 8, slots_per_node: 2}}\n"
    )
    assert main(["validate", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("ok   Slurm ResumeTimeout: 1920 s, above 1380 s") for ln in out), out
    assert any(ln.startswith("ok   Slurm programs: ResumeProgram=") for ln in out), out
    fake_slurm(bin_dir, config="Configuration data as of 2026-12-02T05:30:00\n\x00garbled\n")
    assert main(["validate", "-c", str(path)]) == Exit.CONFIG
    out = capsys.readouterr().out.splitlines()
    (line,) = [ln for ln in out if "slurm.conf" in ln]
    assert line.startswith("FAIL slurm.conf: cannot be read: scontrol show config: no 'Key = value' line"), line


def test_a_wrapper_is_read_from_its_file(tmp_path: Path) -> None:
    """The program slurm.conf names is read from disk when its name is not elb's (the test
    cluster's scripts set the request directory, then run ``python -m elb.schedulers.slurm.programs``)."""
    wrapper = tmp_path / "resume"
    wrapper.write_text('#!/bin/sh\nexec /usr/bin/python3 -m elb.schedulers.slurm.programs resume "$@"\n')
    checks = list(conf_checks(config(), facts(with_line("ResumeProgram", str(wrapper)))))
    assert not failed(checks), [c.line() for c in checks]
    wrapper.write_text('#!/bin/sh\nexec /usr/bin/python3 -m elb.schedulers.slurm.programs suspend "$@"\n')
    (bad,) = failed(list(conf_checks(config(), facts(with_line("ResumeProgram", str(wrapper))))))
    assert "runs no elb-slurm-resume" in bad.detail
