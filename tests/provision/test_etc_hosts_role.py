"""The etc_hosts role in real ansible-playbook runs, every host with a local connection, on a
hosts file in a temporary directory (``etc_hosts_path``; the lock too, ``etc_hosts_lock_path``).

The master, the worker and the node are all this machine, so the master's line, the peer's
line and the node's own block are edits of the one file: present adds the node's line once
(the peer's edit finds it) and the block; absent removes every line mapping the node.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

HOSTS = "127.0.0.1\tlocalhost\n# a comment stays as it is\n::1     localhost ip6-localhost ip6-loopback\n"
BLOCK = (
    "# BEGIN elb cluster hosts\n10.77.0.1\tmaster\n10.77.0.11\tnode001\n10.77.0.14\tnode004\n# END elb cluster hosts\n"
)
PLAYBOOK = """\
- name: The etc_hosts role on the new node
  hosts: new_nodes
  gather_facts: false
  tasks:
    - name: Map or unmap the node
      ansible.builtin.include_role:
        name: etc_hosts
"""


# A worker that died: SSH, on a port of this machine where nothing listens (refused at once).
DEAD = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh"}


def _inventory(tmp_path: Path, dead: bool = False) -> Path:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    workers: dict[str, object] = {"node001": {"ansible_host": "10.77.0.11"}}
    if dead:
        workers["node002"] = DEAD
    inv = {
        "all": {
            "vars": local,
            "children": {
                "master": {"hosts": {"master": {"ansible_host": "10.77.0.1"}}},
                "workers": {"hosts": workers},
                "new_nodes": {"hosts": {"node004": {"ansible_host": "10.77.0.14"}}},
            },
        }
    }
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    return path


def _play(tmp_path: Path, state: str, *extra: str, dead: bool = False) -> dict[str, int]:
    """Run the role with ``etc_hosts_state``; the recap's changed count of each host (``dead``:
    with a worker that does not answer among the peers)."""
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    variables = {
        "etc_hosts_state": state,
        "etc_hosts_path": str(tmp_path / "hosts"),
        "etc_hosts_lock_path": str(tmp_path / "hosts.lock"),
        "etc_hosts_master_address": "10.77.0.1",
        "etc_hosts_peer_timeout": 2,
    }
    inventory = _inventory(tmp_path, dead)
    argv = [str(BIN / "ansible-playbook"), "-i", str(inventory), "-e", json.dumps(variables), *extra]
    env = {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    proc = subprocess.run(
        [*argv, str(tmp_path / "play.yml")], capture_output=True, text=True, timeout=300, env=env, cwd=REPO, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s", proc.stdout, re.MULTILINE))
    assert recap, proc.stdout
    return {host: int(n) for host, n in recap.items()}


def test_present_then_absent_each_twice_the_second_run_changes_nothing(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(HOSTS)

    # Check mode writes nothing: the worker's edit does not find the master's line either.
    assert _play(tmp_path, "present", "--check", "--diff") == {"node004": 3}
    assert hosts.read_text() == HOSTS

    assert _play(tmp_path, "present") == {"node004": 2}  # the master's line, the node's block
    assert hosts.read_text() == HOSTS + "10.77.0.14\tnode004\n" + BLOCK
    assert _play(tmp_path, "present") == {"node004": 0}
    assert hosts.read_text() == HOSTS + "10.77.0.14\tnode004\n" + BLOCK

    assert _play(tmp_path, "absent") == {"node004": 1}  # from the master (the worker's edit finds none)
    assert hosts.read_text() == HOSTS + BLOCK.replace("10.77.0.14\tnode004\n", "")
    assert _play(tmp_path, "absent") == {"node004": 0}
    assert hosts.read_text() == HOSTS + BLOCK.replace("10.77.0.14\tnode004\n", "")
    assert (tmp_path / "hosts.lock").is_file()  # the role's lock path reached the module


def test_a_dead_worker_among_the_peers_fails_no_healthy_node(tmp_path: Path) -> None:
    """A worker that does not answer (dead, its removal under way, or kept while the scheduler
    still lists its jobs) is left out of the edits; the new node's play goes through, with its
    lines on the master and the peers that answer."""
    hosts = tmp_path / "hosts"
    hosts.write_text(HOSTS)
    assert _play(tmp_path, "present", dead=True) == {"node004": 2}
    assert hosts.read_text() == HOSTS + "10.77.0.14\tnode004\n" + BLOCK.replace(
        "10.77.0.14\tnode004\n", "127.0.0.1\tnode002\n10.77.0.14\tnode004\n"
    )
    assert _play(tmp_path, "absent", dead=True) == {"node004": 1}
