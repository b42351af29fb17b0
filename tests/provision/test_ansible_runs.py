"""AnsibleProvisioner against real ansible-runner / ansible-playbook runs (no mocks).

The playbooks are the fixtures in tests/fixtures/ansible/playbooks (see the README there):
stand-ins for add_node.yml / remove_node.yml whose behaviour extra vars choose. Hosts run
with a local connection, except the ones a test makes unreachable: those really go over SSH
to 127.0.0.1 on a port where nothing listens. Each run takes one to three seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from elb.core.config import ClusterConfig, ProvisionConfig, RetentionConfig
from elb.core.drivers import NodePlays
from elb.core.interfaces import NodeSpec, Outcome
from elb.provision import AnsibleProvisioner, ProvisionError
from elb.provision.ansible import REACH_TASK
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.driver import ADD_PLAYBOOK, REMOVE_PLAYBOOK
from tests.ports import closed_port

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ansible" / "playbooks"
FAKE_SECRET = "FAKE-AWS-SECRET-6b1f0e2d"
FAKE_KEY = "FAKE-PRIVATE-KEY-MATERIAL-93c4a7"


def make(
    tmp_path: Path,
    *,
    timeout: float = 60,
    retention: RetentionConfig | None = None,
    playbooks: Path = FIXTURES,
    **extra: object,
) -> AnsibleProvisioner:
    cfg = ProvisionConfig(
        playbook_dir=playbooks,
        private_data_dir=tmp_path / "pdd",
        timeout=timeout,
        forks=5,
        extra_vars=extra,
    )
    return AnsibleProvisioner(cfg, ClusterConfig(), NodePlays(SgeConfig().role_vars()), retention=retention)


def artifact_dirs(tmp_path: Path) -> list[Path]:
    root = tmp_path / "pdd" / "artifacts"
    return sorted(p for p in root.iterdir()) if root.exists() else []


N1 = NodeSpec("node001", "10.77.0.11", 4)
N2 = NodeSpec("node002", "10.77.0.12")
W9 = NodeSpec("node009", "10.77.0.19", 8)


def test_add_nodes_ok_and_inventory(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    prov = make(tmp_path, fixture_out=str(tmp_path / "out"), fixture_extra={"nested": [1, "two"]})
    results = prov.add_nodes(ADD_PLAYBOOK, [N1, N2], [W9])
    assert set(results) == {"node001", "node002"}  # only the nodes asked for
    assert all(r.outcome is Outcome.OK and r.ok for r in results.values()), results

    seen = json.loads((tmp_path / "out" / "node001.json").read_text())
    assert seen["ansible_host"] == "10.77.0.11"
    assert seen["elb_slots"] == 4
    assert seen["ansible_user"] == "root"
    assert seen["groups"]["master"] == ["master"]
    assert seen["groups"]["workers"] == ["node009"]
    assert sorted(seen["groups"]["new_nodes"]) == ["node001", "node002"]
    assert seen["groups"]["old_nodes"] == []
    assert "ConnectTimeout=10" in seen["ssh_args"]
    # One SSH connection per host for the run, its socket in a directory of the run's own,
    # gone when the run has ended.
    assert "ControlMaster=auto" in seen["ssh_args"] and "ControlPersist=" in seen["ssh_args"]
    assert Path(seen["control_path_dir"]).name.startswith("elb-ssh-")
    assert not Path(seen["control_path_dir"]).exists()
    assert seen["extra"] == {"nested": [1, "two"]}  # extra vars arrive typed
    assert seen["sge_queue"] == "all.q"  # elb's sge config reaches the roles' variables
    assert seen["cluster_user"] == "sgeuser"
    assert json.loads((tmp_path / "out" / "node002.json").read_text())["elb_slots"] is None


def test_config_reaches_the_roles_and_extra_vars_win(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        extra_vars={"fixture_out": str(tmp_path / "out"), "cluster_user_name": "override"},
    )
    prov = AnsibleProvisioner(cfg, ClusterConfig(user="hpc"), NodePlays(SgeConfig(queue="big.q").role_vars()))
    assert prov.add_nodes(ADD_PLAYBOOK, [N1], [])["node001"].ok
    seen = json.loads((tmp_path / "out" / "node001.json").read_text())
    assert seen["sge_queue"] == "big.q"
    assert seen["cluster_user"] == "override"


def test_failing_task_is_named_with_its_message(tmp_path: Path) -> None:
    prov = make(tmp_path, fixture_fail_hosts=["node002"])
    results = prov.add_nodes(ADD_PLAYBOOK, [N1, N2], [])
    assert results["node001"].outcome is Outcome.OK
    bad = results["node002"]
    assert bad.outcome is Outcome.FAILED
    assert bad.task == "Configure the node"
    assert bad.message == "fixture failure on node002"


def test_host_that_never_answers_fails_at_the_first_task(tmp_path: Path) -> None:
    """The first task waits ``elb_reach_timeout`` for the node's sshd, then fails the node with
    what the last try met."""
    prov = make(tmp_path, fixture_ssh_hosts=["node003"], fixture_ssh_port=closed_port(), elb_reach_timeout=2)
    t0 = time.monotonic()
    reached: list[str] = []
    results = prov.add_nodes(ADD_PLAYBOOK, [N1, NodeSpec("node003", "127.0.0.1")], [], on_reached=reached.append)
    took = time.monotonic() - t0
    print(f"run with one host that never answers (elb_reach_timeout 2 s): {took:.1f} s")
    assert results["node001"].outcome is Outcome.OK
    dead = results["node003"]
    assert dead.outcome is Outcome.FAILED
    assert dead.task == REACH_TASK
    assert dead.message is not None and "Connection refused" in dead.message
    assert reached == ["node001"]  # the one the run reached, once; never the one that did not answer


def test_busy_from_set_stats(tmp_path: Path) -> None:
    prov = make(tmp_path, fixture_busy_hosts=["node001"])
    results = prov.remove_nodes(REMOVE_PLAYBOOK, [N1, N2], [W9])
    assert results["node001"].outcome is Outcome.BUSY
    assert results["node002"].outcome is Outcome.OK


def test_failure_wins_over_busy_and_unreachable_on_remove(tmp_path: Path) -> None:
    prov = make(
        tmp_path,
        fixture_busy_hosts=["node001"],
        fixture_fail_hosts=["node002"],
        fixture_ssh_hosts=["node003"],
        fixture_ssh_port=closed_port(),
    )
    nodes = [N1, N2, NodeSpec("node003", "127.0.0.1"), NodeSpec("node004", "10.77.0.14")]
    results = prov.remove_nodes(REMOVE_PLAYBOOK, nodes, [])
    assert {n: r.outcome for n, r in results.items()} == {
        "node001": Outcome.BUSY,
        "node002": Outcome.FAILED,
        "node003": Outcome.UNREACHABLE,
        "node004": Outcome.OK,
    }


def _sleeps_with(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, timeout=10, check=True)
    return [line for line in out.stdout.splitlines() if line.startswith("sleep") and marker in line]


ADD_TASKS = {
    "Ask the master (delegated, as the real roles do)",
    REACH_TASK,
    "Record what the inventory says about this host",
    "Show the environment the playbook runs with",
    "Wait a while",
}


def test_timeout_stops_the_run_and_kills_the_playbook(tmp_path: Path) -> None:
    marker = "0.000" + str(os.getpid() % 1000).zfill(3) + "71"
    prov = make(tmp_path, timeout=6, fixture_sleep=120, fixture_marker=marker)
    t0 = time.monotonic()
    results = prov.add_nodes(ADD_PLAYBOOK, [N1, N2], [])
    took = time.monotonic() - t0
    print(f"run with a 6 s time-out returned after {took:.2f} s")
    assert took < 40
    for r in results.values():
        assert r.outcome is Outcome.FAILED
        assert r.message is not None and "timed out" in r.message
        assert r.task in ADD_TASKS  # the last task it started
    time.sleep(0.5)
    assert _sleeps_with(marker) == []  # no process of the playbook is left


def _cancel_when_sleeping(
    prov: AnsibleProvisioner, marker: str, cancelled_at: list[float], limit: float = 60
) -> threading.Thread:
    """Cancel as elb's shutdown does, once the playbook's sleep runs (or after ``limit`` s)."""

    def watch() -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end and not _sleeps_with(marker):
            time.sleep(0.2)
        cancelled_at.append(time.monotonic())
        prov.cancel()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_cancel_event_stops_a_running_playbook(tmp_path: Path) -> None:
    marker = "0.000" + str(os.getpid() % 1000).zfill(3) + "93"
    prov = make(tmp_path, fixture_sleep=120, fixture_marker=marker)
    cancelled_at: list[float] = []
    watcher = _cancel_when_sleeping(prov, marker, cancelled_at)
    results = prov.add_nodes(ADD_PLAYBOOK, [N1], [])
    returned = time.monotonic()
    watcher.join(5)
    assert prov.cancel_event.is_set()
    print(f"cancelled run returned {returned - cancelled_at[0]:.2f} s after the cancel")
    r = results["node001"]
    assert r.outcome is Outcome.FAILED
    assert r.message is not None and "cancelled" in r.message
    assert r.task == "Wait a while"
    time.sleep(0.5)
    assert _sleeps_with(marker) == []
    # Once cancelled, nothing more runs.
    before = artifact_dirs(tmp_path)
    again = prov.add_nodes(ADD_PLAYBOOK, [N2], [])
    assert again["node002"].outcome is Outcome.FAILED
    assert again["node002"].message is not None and "cancelled" in again["node002"].message
    assert artifact_dirs(tmp_path) == before


def test_shared_cancel_event_set_before_start(tmp_path: Path) -> None:
    shutdown = threading.Event()
    shutdown.set()
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd")
    prov = AnsibleProvisioner(cfg, cancel_event=shutdown)
    results = prov.remove_nodes(REMOVE_PLAYBOOK, [N1], [])
    assert results["node001"].outcome is Outcome.FAILED
    assert artifact_dirs(tmp_path) == []


def test_no_secrets_in_artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = tmp_path / "id_fake"  # outside the private data dir
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{FAKE_KEY}\n-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_SECRET)
    monkeypatch.setenv("ELB_SOMETHING_PASSWORD", FAKE_SECRET)
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_private_key=key,
        extra_vars={"fixture_ssh_hosts": ["node003"], "fixture_ssh_port": closed_port(), "elb_reach_timeout": 2},
    )
    prov = AnsibleProvisioner(cfg)
    # node003 goes over SSH with the key file; node001 runs locally and prints the env.
    results = prov.add_nodes(ADD_PLAYBOOK, [N1, NodeSpec("node003", "127.0.0.1")], [])
    assert results["node001"].ok
    assert results["node003"].outcome is Outcome.FAILED
    assert results["node003"].task == REACH_TASK

    pdd = tmp_path / "pdd"
    files = [p for p in pdd.rglob("*") if p.is_file()]
    assert any(p.name == "command" for p in files) and any(p.parent.name == "job_events" for p in files)
    blob = b"".join(p.read_bytes() for p in files)
    assert FAKE_SECRET.encode() not in blob
    assert FAKE_KEY.encode() not in blob
    assert str(key).encode() in blob  # the key's path is there (so the grep does see the files)
    assert b'"unset"' in blob  # the playbook looked for AWS_SECRET_ACCESS_KEY and found none
    assert not (pdd / "env").exists()  # suppress_env_files


def test_artifacts_are_rotated(tmp_path: Path) -> None:
    pb = tmp_path / "pb"  # the quickest real playbook: no module runs on the hosts
    pb.mkdir()
    (pb / "add_node.yml").write_text(
        "- name: Quick\n  hosts: new_nodes\n  gather_facts: false\n  tasks:\n"
        "    - name: Nothing\n      ansible.builtin.debug:\n        msg: hi\n"
    )
    prov = make(tmp_path, retention=RetentionConfig(artifacts_mb=1), playbooks=pb)
    idents: list[str] = []
    for node in (N1, N2, W9):  # three runs, often within one second
        before = {p.name for p in artifact_dirs(tmp_path)}
        prov.add_nodes(ADD_PLAYBOOK, [node], [])
        (made,) = {p.name for p in artifact_dirs(tmp_path)} - before
        idents.append(made)
    assert idents == sorted(idents)  # an ident's name sorts in time order, even within a second
    assert [p.name for p in artifact_dirs(tmp_path)] == idents  # small runs: all kept
    old = artifact_dirs(tmp_path)[0]
    os.utime(old, (time.time() - 15 * 86400, time.time() - 15 * 86400))  # past artifacts_days (14)
    padded = artifact_dirs(tmp_path)[1]
    (padded / "padding").write_bytes(b"x" * 1_100_000)  # past artifacts_mb (1)
    os.utime(padded, (time.time() - 60, time.time() - 60))  # older than the third run
    prov.add_nodes(ADD_PLAYBOOK, [N1], [])
    kept = [p.name for p in artifact_dirs(tmp_path)]
    assert idents[0] not in kept and idents[1] not in kept  # too old; then too big
    assert idents[2] in kept and len(kept) == 2  # the newest two


def test_hostile_node_name_runs_nothing(tmp_path: Path) -> None:
    prov = make(tmp_path)
    results = prov.add_nodes(ADD_PLAYBOOK, [N1, NodeSpec("$(touch /tmp/pwned)", "10.77.0.13")], [])
    assert {r.outcome for r in results.values()} == {Outcome.FAILED}
    assert "invalid node name" in (results["node001"].message or "")
    assert artifact_dirs(tmp_path) == []


def test_bad_address_runs_nothing(tmp_path: Path) -> None:
    prov = make(tmp_path)
    results = prov.add_nodes(ADD_PLAYBOOK, [NodeSpec("node001", "10.77.0.11; reboot")], [])
    assert results["node001"].outcome is Outcome.FAILED
    assert "not an IP address" in (results["node001"].message or "")
    assert artifact_dirs(tmp_path) == []


def test_missing_playbook_is_a_clear_failure(tmp_path: Path) -> None:
    cfg = ProvisionConfig(playbook_dir=tmp_path / "nowhere", private_data_dir=tmp_path / "pdd")
    results = AnsibleProvisioner(cfg).add_nodes(ADD_PLAYBOOK, [N1], [])
    assert results["node001"].outcome is Outcome.FAILED
    assert "add_node.yml not found" in (results["node001"].message or "")


def test_broken_playbook_reports_ansibles_error(tmp_path: Path) -> None:
    pb = tmp_path / "pb"
    pb.mkdir()
    (pb / "add_node.yml").write_text("- hosts: new_nodes\n  tasks:\n    - no.such.module: {}\n")
    cfg = ProvisionConfig(playbook_dir=pb, private_data_dir=tmp_path / "pdd")
    r = AnsibleProvisioner(cfg).add_nodes(ADD_PLAYBOOK, [N1], [])["node001"]
    assert r.outcome is Outcome.FAILED
    assert r.message is not None
    assert "before any task ran" in r.message and "no.such.module" in r.message


def test_run_report_covers_the_master_and_the_run(tmp_path: Path) -> None:
    """The master (local connection, elb's Python) runs delegated tasks and a play of its own."""
    prov = make(tmp_path)
    report = prov.run("add_node.yml", workers=[W9], new_nodes=[N1])
    assert report.status == "successful" and report.rc == 0
    assert report.results["master"].outcome is Outcome.OK  # its own play ran a module
    assert report.results["node001"].outcome is Outcome.OK
    assert "node009" not in report.results  # an existing worker no play targeted
    assert report.artifact_dir is not None and (report.artifact_dir / "inventory.json").is_file()
    assert report.busy == frozenset()
    assert report.seconds > 0


def test_unusable_private_data_dir_is_a_clear_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=blocker / "pdd")
    r = AnsibleProvisioner(cfg).add_nodes(ADD_PLAYBOOK, [N1], [])["node001"]
    assert r.outcome is Outcome.FAILED
    # The first thing to read there is the host key store.
    assert "not provisioned: cannot read" in (r.message or "") and "a-file" in (r.message or "")


@pytest.mark.parametrize(
    "extra",
    [{"bad-name": 1}, {"x": object()}, {"x": {1, 2}}],
)
def test_bad_extra_vars_are_refused_at_start(tmp_path: Path, extra: dict[str, object]) -> None:
    cfg = ProvisionConfig(playbook_dir=FIXTURES, private_data_dir=tmp_path / "pdd", extra_vars=extra)
    with pytest.raises(ProvisionError, match="extra_vars"):
        AnsibleProvisioner(cfg)


def test_empty_calls_run_nothing(tmp_path: Path) -> None:
    prov = make(tmp_path)
    assert prov.add_nodes(ADD_PLAYBOOK, [], [W9]) == {}
    assert prov.remove_nodes(REMOVE_PLAYBOOK, [], [W9]) == {}
    assert artifact_dirs(tmp_path) == []


def test_a_host_the_play_stops_short_on_without_a_failure_is_failed(tmp_path: Path) -> None:
    # The recap counts node002 processed, no failure, not unreachable, not busy: only the
    # playbook's report at its end (elb_done) shows that its last steps never ran there.
    prov = make(tmp_path, fixture_stop_hosts=["node002"], fixture_busy_hosts=["node009"])
    results = prov.remove_nodes(REMOVE_PLAYBOOK, [N1, N2, W9], [])
    assert results["node001"].outcome is Outcome.OK
    assert results["node002"].outcome is Outcome.FAILED
    assert "before its last task" in (results["node002"].message or "")
    assert results["node009"].outcome is Outcome.BUSY
    # Every host the play finished is in the report (set_stats aggregates the lists).
    both = prov.remove_nodes(REMOVE_PLAYBOOK, [N1, W9], [])
    assert {n: r.outcome for n, r in both.items()} == {"node001": Outcome.OK, "node009": Outcome.BUSY}
    prov = make(tmp_path)
    assert {r.outcome for r in prov.remove_nodes(REMOVE_PLAYBOOK, [N1, N2, W9], []).values()} == {Outcome.OK}
