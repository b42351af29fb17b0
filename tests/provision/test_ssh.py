"""AnsibleProvisioner over real SSH: a private sshd on 127.0.0.1 that this test starts.

This is the path elb takes to real nodes: the SSH user and key from ProvisionConfig, elb's SSH
options (one connection per host shared by the run's tasks and closed when it ends, connect
timeout, each node's host key checked against the one elb holds for it: the sshd's here),
pipelining, and Python discovery on the far side; and the real add playbooks' first task against
a node whose sshd starts only after the play began. Needs root and openssh-server
(scripts/install-system-deps.sh installs it); skipped otherwise.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from elb.core.assets import default_playbook_dir
from elb.core.config import ProvisionConfig
from elb.core.interfaces import NodeSpec, Outcome
from elb.provision import AnsibleProvisioner
from elb.provision.ansible import REACH_TASK
from elb.schedulers.sge.driver import ADD_PLAYBOOK, REMOVE_PLAYBOOK
from tests.provision.sshd_support import FIXTURES, Sshd, SshdFailed, hold_host_key, needs_sshd, start_sshd, stop_sshd

pytestmark = needs_sshd


def test_add_and_remove_over_ssh(tmp_path: Path, sshd: Sshd) -> None:
    out = tmp_path / "out"
    out.mkdir()
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_user="root",
        ssh_private_key=sshd.client_key,
        timeout=120,
        extra_vars={
            "fixture_out": str(out),
            "fixture_ssh_hosts": ["node001", "node002"],
            "fixture_ssh_port": sshd.port,
            "fixture_busy_hosts": ["node002"],
        },
    )
    hold_host_key(cfg, sshd.client_key.with_name("host_key.pub"), "node001", "node002")
    prov = AnsibleProvisioner(cfg)
    nodes = [NodeSpec("node001", "127.0.0.1", 2), NodeSpec("node002", "127.0.0.1", 2)]
    t0 = time.monotonic()
    added = prov.add_nodes(ADD_PLAYBOOK, nodes, [])
    print(f"add over SSH, 2 hosts: {time.monotonic() - t0:.1f} s")
    assert {n: r.outcome for n, r in added.items()} == {"node001": Outcome.OK, "node002": Outcome.OK}, added
    # The copy module really ran on the far side of the SSH connection.
    seen = json.loads((out / "node001.json").read_text())
    assert seen["ansible_host"] == "127.0.0.1" and seen["elb_slots"] == 2
    # Two module runs came through one TCP connection (the same client port), the run's shared
    # one, and the run left no master connection behind it.
    conns = seen["ssh_connections"]
    assert len(conns) == 2 and conns[0].startswith("127.0.0.1 ") and conns[0] == conns[1], conns
    shared = seen["control_path_dir"]
    assert seen["shared_sockets"] >= 1  # the master connection's socket, in the run's directory
    assert shared is not None and not Path(shared).exists()
    # Told to exit, the master connection answers at once and then goes: with the machine busy
    # its process may still be there a moment after the run.
    assert _gone(shared, within=30.0), _processes_naming(shared)

    removed = prov.remove_nodes(REMOVE_PLAYBOOK, nodes, [])
    assert removed["node001"].outcome is Outcome.OK
    assert removed["node002"].outcome is Outcome.BUSY


def _gone(text: str, within: float) -> bool:
    """Whether no process of this machine names ``text`` (checked again until ``within`` seconds
    have passed)."""
    deadline = time.monotonic() + within
    while _processes_naming(text):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _processes_naming(text: str) -> list[str]:
    """The command lines of this machine's processes that contain ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if text in argv:
            found.append(argv)
    return found


def test_wrong_key_fails_at_the_first_task(tmp_path: Path, sshd: Sshd) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True, timeout=30)
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_private_key=other,
        timeout=120,
        extra_vars={"fixture_ssh_hosts": ["node001"], "fixture_ssh_port": sshd.port, "elb_reach_timeout": 2},
    )
    hold_host_key(cfg, sshd.client_key.with_name("host_key.pub"), "node001")
    r = AnsibleProvisioner(cfg).add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "127.0.0.1")], [])["node001"]
    assert r.outcome is Outcome.FAILED
    assert r.task == REACH_TASK
    assert r.message is not None and "Permission denied" in r.message


def _first_task_playbook(real: Path, port: int) -> list[dict[str, object]]:
    """A playbook of one task: the first task of the real playbook ``real``, on ``new_nodes``
    reached at 127.0.0.1:``port``. The rest of a real add play needs the test cluster's master."""
    plays = yaml.safe_load(real.read_text())
    first = plays[0]["tasks"][0]
    assert first["name"] == REACH_TASK  # how elb sees the node's "reachable" step
    play = {
        "name": f"The first task of {real.name}",
        "hosts": "new_nodes",
        "gather_facts": False,
        "vars": {"ansible_port": port, "ansible_python_interpreter": "/usr/bin/python3"},
        "tasks": [first],
    }
    return [play]


@pytest.mark.parametrize("playbook", [ADD_PLAYBOOK, "slurm_add_node.yml"])
def test_first_task_of_an_add_playbook_waits_for_a_late_sshd(tmp_path: Path, keys: Path, playbook: str) -> None:
    """A node elb takes up after a restart may not have started its sshd when the add play
    begins. The node here is 127.0.0.1 on a port where, until the play's first connection, only
    a stand-in for a booting node listens: it closes that connection without an SSH banner and
    stops listening (connections are then refused); sshd starts there two seconds later. The
    real playbook's first task must wait for it, and its success is still the node's reachable
    step (``on_reached``)."""
    gate = socket.create_server(("127.0.0.1", 0))
    gate.settimeout(60)
    port = int(gate.getsockname()[1])
    knocked = threading.Event()
    started: list[subprocess.Popen[bytes]] = []
    errors: list[BaseException] = []

    def boot_late() -> None:
        try:
            with gate:
                conn, _ = gate.accept()  # the play's first try
                conn.close()
            knocked.set()
            time.sleep(2)
            started.append(start_sshd(keys, port))
        except (OSError, SshdFailed) as err:
            errors.append(err)

    pb_dir = tmp_path / "playbooks"
    pb_dir.mkdir()
    (pb_dir / ADD_PLAYBOOK).write_text(yaml.safe_dump(_first_task_playbook(default_playbook_dir() / playbook, port)))
    cfg = ProvisionConfig(
        playbook_dir=pb_dir,
        private_data_dir=tmp_path / "pdd",
        ssh_user="root",
        ssh_private_key=keys / "client_key",
        timeout=120,
    )
    hold_host_key(cfg, keys / "host_key.pub", "node001")
    node = NodeSpec("node001", "127.0.0.1")
    booting = threading.Thread(target=boot_late, daemon=True)
    booting.start()
    reached: list[str] = []
    t0 = time.monotonic()
    try:
        result = AnsibleProvisioner(cfg).add_nodes(ADD_PLAYBOOK, [node], [], on_reached=reached.append)["node001"]
        print(f"{playbook}'s first task with sshd starting late: {time.monotonic() - t0:.1f} s")
    finally:
        booting.join(timeout=30)
        for proc in started:
            stop_sshd(proc)
    assert errors == []
    assert knocked.is_set()  # the play did try before sshd was up
    assert result.outcome is Outcome.OK, result
    assert reached == ["node001"]
