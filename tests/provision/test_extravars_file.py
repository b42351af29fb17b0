"""``provision.extra_vars`` reach Ansible through a file only its owner can read, never through
the command line (which ``ps`` shows every local user). A real ansible-runner run of the fixture
playbook (tests/fixtures/ansible/playbooks), as in test_ansible_runs.py."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from elb.config import ClusterConfig, ProvisionConfig
from elb.interfaces import NodeSpec
from elb.provision import AnsibleProvisioner
from elb.sge.driver import ADD_PLAYBOOK

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ansible" / "playbooks"
SECRET = "FAKE-DB-PASSWORD-0c5e91d7"


def test_extra_vars_go_through_a_0600_file_not_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    extra = {"fixture_out": str(tmp_path / "out"), "cluster_user_name": SECRET}
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd", extra_vars=extra)
    prov = AnsibleProvisioner(cfg, ClusterConfig())
    assert prov.add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "10.77.0.11", 4)], [])["node001"].ok

    seen = json.loads((tmp_path / "out" / "node001.json").read_text())
    assert seen["cluster_user"] == SECRET  # the value reached the play

    [artifacts] = list((tmp_path / "pdd" / "artifacts").iterdir())
    command = json.loads((artifacts / "command").read_text())  # runner's record of the argv it ran
    argv: list[str] = command["command"]
    assert not any(SECRET in arg or "fixture_out" in arg for arg in argv), argv
    ev_file = artifacts / "extravars.json"
    assert argv[argv.index(f"@{ev_file}") - 1] == "-e"
    assert stat.S_IMODE(ev_file.stat().st_mode) == 0o600
    assert json.loads(ev_file.read_text()) == extra
    assert SECRET not in json.dumps(command["env"])


def test_no_extra_vars_no_file(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd")
    prov = AnsibleProvisioner(cfg, ClusterConfig())
    prov.add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "10.77.0.11", 4)], [])
    [artifacts] = list((tmp_path / "pdd" / "artifacts").iterdir())
    assert not (artifacts / "extravars.json").exists()
    assert "-e" not in json.loads((artifacts / "command").read_text())["command"]
