"""The inventory elb builds fits the project's real playbooks (playbooks/*.yml).

No cluster here: ``ansible-playbook --list-hosts`` parses the real playbooks and roles with
elb's inventory and says which hosts each play would run on, and ``ansible-inventory``
shows the variables the roles read (``groups['master'][0]``, ``ansible_host``,
``elb_slots``). Running the plays for real is the cluster tests' job (tests/cluster/).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from elb.core.assets import default_playbook_dir
from elb.core.config import ClusterConfig
from elb.core.interfaces import NodeSpec
from elb.provision.ansible import REACH_TASK, role_vars
from elb.provision.boot import NODE_VAR_PREFIXES, boot_inventory
from elb.provision.inventory import Connection, build_inventory
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.driver import ADD_PLAYBOOK, REMOVE_PLAYBOOK
from elb.schedulers.slurm.driver import BOOT_VARS as SLURM_BOOT_VARS

PLAYBOOKS = default_playbook_dir()
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(not (PLAYBOOKS / ADD_PLAYBOOK).is_file(), reason="playbooks/ not in this tree yet")

# The playbooks of a Slurm worker node (roles munge and slurm_node).
SLURM_ADD_PLAYBOOK = "slurm_add_node.yml"
SLURM_REMOVE_PLAYBOOK = "slurm_remove_node.yml"

NEW = [NodeSpec("node004", "10.77.0.14", 4), NodeSpec("node005", "10.77.0.15", 4)]
WORKERS = [NodeSpec("node001", "10.77.0.11", 4)]


def _inventory(
    tmp_path: Path,
    *,
    workers: Sequence[NodeSpec] = (),
    new_nodes: Sequence[NodeSpec] = (),
    old_nodes: Sequence[NodeSpec] = (),
) -> Path:
    inv = build_inventory(Connection(), workers=workers, new_nodes=new_nodes, old_nodes=old_nodes)
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    return path


def _run(argv: list[str]) -> str:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    roles = PLAYBOOKS.parent / "roles"
    if roles.is_dir():
        env["ANSIBLE_ROLES_PATH"] = str(roles)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=PLAYBOOKS.parent, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _play_hosts(listing: str) -> dict[str, set[str]]:
    """``--list-hosts`` output: play name -> hosts (indented lines under 'pattern: ...')."""
    plays: dict[str, set[str]] = {}
    current: str | None = None
    for line in listing.splitlines():
        text = line.strip()
        if text.startswith("play #"):
            current = text.split(": ", 1)[1].split(": ", 1)[0] if ": " in text else text
            plays[current] = set()
        elif current is not None and text and not text.startswith(("pattern:", "hosts (", "playbook:")):
            plays[current].add(text)
    return plays


def test_add_node_plays_run_on_the_new_nodes(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, workers=WORKERS, new_nodes=NEW)
    out = _run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", str(PLAYBOOKS / ADD_PLAYBOOK)])
    plays = _play_hosts(out)
    assert plays, out
    assert set().union(*plays.values()) == {"node004", "node005"}, out


def test_remove_node_plays_run_on_the_old_nodes(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, workers=WORKERS, old_nodes=[NEW[0]])
    out = _run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", str(PLAYBOOKS / REMOVE_PLAYBOOK)])
    plays = _play_hosts(out)
    assert plays, out
    assert set().union(*plays.values()) == {"node004"}, out


@pytest.mark.parametrize("playbook", [ADD_PLAYBOOK, SLURM_ADD_PLAYBOOK])
def test_add_playbooks_run_on_the_new_nodes_and_first_check_that_they_answer(tmp_path: Path, playbook: str) -> None:
    inv = _inventory(tmp_path, workers=WORKERS, new_nodes=NEW)
    plays = _play_hosts(
        _run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", str(PLAYBOOKS / playbook)])
    )
    assert plays and set().union(*plays.values()) == {"node004", "node005"}, plays
    # elb's boot timeline takes the node's "reachable" time from this task (elb.provision.ansible)
    first_play = yaml.safe_load((PLAYBOOKS / playbook).read_text())[0]
    assert first_play["tasks"][0]["name"] == REACH_TASK


def test_slurm_remove_node_plays_run_on_the_old_nodes(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, workers=WORKERS, old_nodes=[NEW[0]])
    out = _run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", str(PLAYBOOKS / SLURM_REMOVE_PLAYBOOK)])
    plays = _play_hosts(out)
    assert plays, out
    assert set().union(*plays.values()) == {"node004"}, out


def test_inventory_gives_the_roles_their_variables(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, workers=WORKERS, new_nodes=NEW)
    data = json.loads(_run([str(BIN / "ansible-inventory"), "-i", str(inv), "--list"]))
    assert data["master"]["hosts"] == ["master"]
    assert data["workers"]["hosts"] == ["node001"]
    assert sorted(data["new_nodes"]["hosts"]) == ["node004", "node005"]
    assert "old_nodes" in data["all"]["children"]  # declared even when empty
    hv = data["_meta"]["hostvars"]
    assert hv["node004"]["ansible_host"] == "10.77.0.14"
    assert hv["node004"]["elb_slots"] == 4
    assert hv["master"]["ansible_connection"] == "local"


def test_role_vars_are_variables_the_roles_have() -> None:
    """elb passes its SGE/cluster settings under the roles' own names: a rename must show here."""
    defaults: dict[str, object] = {}
    for f in (PLAYBOOKS.parent / "roles").glob("*/defaults/main.yml"):
        defaults.update(yaml.safe_load(f.read_text()) or {})
    ours = role_vars(ClusterConfig(), SgeConfig().role_vars())
    missing = sorted(k for k in ours if k not in defaults)
    assert not missing, f"no role has these variables: {missing}"
    # With the default config, elb's values are the roles' defaults.
    assert {k: defaults[k] for k in ours} == ours


def _tasks(listing: str) -> list[str]:
    """``--list-tasks`` output: the task names (``ROLE : NAME`` for a role's), in order."""
    return [line.strip().split("\tTAGS:")[0].strip() for line in listing.splitlines() if "\tTAGS:" in line]


def test_slurms_admit_play_runs_on_the_new_nodes_and_only_its_key_step_is_tagged(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, workers=WORKERS, new_nodes=NEW)
    book = str(PLAYBOOKS / "slurm_admit_nodes.yml")
    plays = _play_hosts(_run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", book]))
    assert set().union(*plays.values()) == {"node004", "node005"}, plays
    every = _tasks(_run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-tasks", book]))
    skipped = _tasks(
        _run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-tasks", "--skip-tags", "munge_push", book])
    )
    key_steps = [t for t in every if t not in skipped]
    assert key_steps and all(t.startswith("munge : ") for t in key_steps), key_steps
    assert "munge : Write the munge key on the node" in key_steps
    assert [t for t in skipped if t.startswith("munge : ")] == []  # the benchmark's run reaches no node


def test_a_slurm_nodes_boot_document_runs_slurm_node_boot_on_the_node_alone(tmp_path: Path) -> None:
    doc = boot_inventory(
        "node004", "node004", master="master", master_address="10.77.0.1", prefixes=NODE_VAR_PREFIXES + SLURM_BOOT_VARS
    )
    inv = tmp_path / "boot-inventory.yml"
    inv.write_text(yaml.safe_dump(doc))
    book = str(PLAYBOOKS / "slurm_node_boot.yml")
    plays = _play_hosts(_run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", book]))
    assert set().union(*plays.values()) == {"node004"}, plays


def test_slurm_site_sorts_every_worker(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, workers=[*WORKERS, NEW[0]])
    out = _run([str(BIN / "ansible-playbook"), "-i", str(inv), "--list-hosts", str(PLAYBOOKS / "slurm_site.yml")])
    plays = _play_hosts(out)
    first = next(iter(plays.values()))  # the first play sorts every worker into live and dead
    assert first == {"node001", "node004"}, out
