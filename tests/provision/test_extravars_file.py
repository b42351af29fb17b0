"""``provision.extra_vars`` reach Ansible through a file only its owner can read, never through
the command line (which ``ps`` shows every local user), and no secret outlives the run: the file
is outside the artifacts (kept for weeks) and deleted when the run ends, and nothing under the
private data directory holds an extra var's value or the SSH key's material afterwards. A real
ansible-runner run of the fixture playbook (tests/fixtures/ansible/playbooks), as in
test_ansible_runs.py."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from elb.core.config import ClusterConfig, ProvisionConfig
from elb.core.interfaces import NodeSpec
from elb.provision import AnsibleProvisioner
from elb.schedulers.sge.driver import ADD_PLAYBOOK, REMOVE_PLAYBOOK

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ansible" / "playbooks"
SECRET = "FAKE-DB-PASSWORD-0c5e91d7"
NESTED_SECRET = "FAKE-API-TOKEN-5d2a77e1"
FAKE_KEY = "FAKE-PRIVATE-KEY-MATERIAL-1f0b9c"


def holding(root: Path, *values: str) -> list[str]:
    """Files under ``root`` that hold any of ``values``."""
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and any(v.encode() in p.read_bytes() for v in values)
    ]


def test_extra_vars_go_through_a_0600_file_not_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    extra = {"fixture_out": str(tmp_path / "out"), "cluster_user_name": "delivered-3e1f"}
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd", extra_vars={**extra, "pw": SECRET})
    prov = AnsibleProvisioner(cfg, ClusterConfig())
    modes: list[int] = []

    def reached(_host: str) -> None:  # during the run: the file is there, for its owner only
        (ev_file,) = (tmp_path / "pdd" / "vars").iterdir()
        modes.append(stat.S_IMODE(ev_file.stat().st_mode))
        assert json.loads(ev_file.read_text())["pw"] == SECRET

    assert prov.add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "10.77.0.11", 4)], [], on_reached=reached)["node001"].ok
    assert modes == [0o600]
    assert json.loads((tmp_path / "out" / "node001.json").read_text())["cluster_user"] == "delivered-3e1f"

    [artifacts] = list((tmp_path / "pdd" / "artifacts").iterdir())
    command = json.loads((artifacts / "command").read_text())  # runner's record of the argv it ran
    argv: list[str] = command["command"]
    assert not any(SECRET in arg or "fixture_out" in arg for arg in argv), argv
    ev_arg = argv[argv.index("-e") + 1]
    assert ev_arg.startswith(f"@{tmp_path / 'pdd' / 'vars'}/") and ev_arg.endswith(".json")
    assert not Path(ev_arg[1:]).exists()  # deleted when the run ended
    assert SECRET not in json.dumps(command["env"])


def test_no_secret_outlives_the_run(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    key = tmp_path / "id_fake"
    key.write_text(FAKE_KEY)
    key.chmod(0o600)
    extra = {"fixture_out": str(tmp_path / "out"), "db_password": SECRET, "api": {"tokens": [NESTED_SECRET]}}
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd", ssh_private_key=key, extra_vars=extra
    )
    prov = AnsibleProvisioner(cfg, ClusterConfig())
    assert prov.add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "10.77.0.11", 4)], [])["node001"].ok
    assert prov.remove_nodes(REMOVE_PLAYBOOK, [NodeSpec("node001", "10.77.0.11", 4)], [])["node001"].ok
    pdd = tmp_path / "pdd"
    assert len(list((pdd / "artifacts").iterdir())) == 2
    assert holding(pdd, SECRET, NESTED_SECRET, FAKE_KEY) == []
    assert list((pdd / "vars").iterdir()) == []
    assert not (pdd / "env").exists()


def test_no_extra_vars_no_file(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd")
    prov = AnsibleProvisioner(cfg, ClusterConfig())
    prov.add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "10.77.0.11", 4)], [])
    [artifacts] = list((tmp_path / "pdd" / "artifacts").iterdir())
    assert not (tmp_path / "pdd" / "vars").exists()
    assert "-e" not in json.loads((artifacts / "command").read_text())["command"]
