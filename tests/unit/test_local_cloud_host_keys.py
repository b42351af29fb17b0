"""The local cloud gives each node the host key elb made for it before it starts, and forgets it
when the node goes. Podman is stood in for by a script that records each call and answers as
podman would for one node (the cluster tests run the real one: tests/cluster/test_host_keys.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from elb.clouds import local
from elb.clouds.local import NODE_HOST_KEY, LocalCloud, LocalConfig
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE
from elb.provision.hostkeys import HostKeys

CLUSTER = "unit"


def fake_podman(tmp: Path, *, run_fails: bool = False) -> Path:
    """A ``podman`` whose ``run`` starts node001 (its argv kept in ``calls``), or fails as podman
    does for a name in use; ``ps`` and ``inspect`` show node001 once it was run."""
    container = {
        "Id": "c0ffee",
        "Name": "node001",
        "Created": "2026-11-26T10:00:00.000000000Z",
        "State": {"Status": "running"},
        "Config": {"Labels": {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: "node001"}},
        "NetworkSettings": {"Networks": {"elb-test": {"IPAddress": "10.77.0.11"}}},
    }
    calls, ran = tmp / "calls", tmp / "ran"
    script = tmp / "podman"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"calls, ran = {str(calls)!r}, {str(ran)!r}\n"
        "with open(calls, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if sys.argv[1] == 'run':\n"
        f"    if {run_fails!r}:\n"
        "        sys.exit('Error: the container name \"node001\" is already in use')\n"
        "    open(ran, 'w').close()\n"
        "    print('c0ffee')\n"
        "elif sys.argv[1] == 'ps':\n"
        "    print('c0ffee' if os.path.exists(ran) else '')\n"
        "elif sys.argv[1:3] == ['container', 'inspect']:\n"
        f"    print({json.dumps(json.dumps([container]))} if os.path.exists(ran) else '[]')\n"
        "elif sys.argv[1] == 'rm':\n"
        "    os.unlink(ran)\n"
        "else:\n"
        "    sys.exit(125)\n"
    )
    script.chmod(0o755)
    return script


def calls(tmp: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp / "calls").read_text().splitlines()]


@pytest.fixture
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalCloud:
    monkeypatch.setattr(local, "_ssh_banner", lambda ip: True)  # the node's sshd answers
    monkeypatch.setattr(local, "ADDRESS_BOOK", tmp_path / "node-addresses")
    keys = HostKeys(tmp_path / "keys")
    podman = str(fake_podman(tmp_path))
    return LocalCloud(
        LocalConfig(network="elb-test"), CLUSTER, podman=podman, host_keys=keys, node_logs=tmp_path / "node-logs"
    )


def test_a_node_starts_with_the_key_elb_made_and_loses_it_when_it_goes(cloud: LocalCloud, tmp_path: Path) -> None:
    result = cloud.launch(["node001"])
    assert result.failed == {} and [i.name for i in result.launched] == ["node001"]
    keys = cloud.host_keys
    assert keys is not None and keys.known("node001")
    private = keys.private_key_file("node001")
    assert private is not None  # kept: podman mounts it again at every start
    [run] = [c for c in calls(tmp_path) if c[0] == "run"]
    assert f"{private}:{NODE_HOST_KEY}:ro" in run
    assert run[run.index(f"{private}:{NODE_HOST_KEY}:ro") - 1] == "--volume"

    cloud.terminate(["c0ffee"])
    assert not keys.known("node001") and keys.private_key_file("node001") is None


def test_a_nodes_nfs_client_log_is_a_directory_of_this_machine(cloud: LocalCloud, tmp_path: Path) -> None:
    cloud.launch(["node001"])
    [run] = [c for c in calls(tmp_path) if c[0] == "run"]
    kept = tmp_path / "node-logs" / "node001"
    assert kept.is_dir() and run[run.index(f"{kept}:{local.NODE_NFS_LOG}") - 1] == "--volume"


def test_a_node_whose_log_directory_cannot_be_made_starts_and_keeps_its_log(cloud: LocalCloud, tmp_path: Path) -> None:
    (tmp_path / "node-logs").write_text("not a directory")
    assert [i.name for i in cloud.launch(["node001"]).launched] == ["node001"]
    [run] = [c for c in calls(tmp_path) if c[0] == "run"]
    assert not any(a.endswith(f":{local.NODE_NFS_LOG}") for a in run)


def test_a_failed_run_keeps_the_key_of_the_container_that_has_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "ADDRESS_BOOK", tmp_path / "node-addresses")
    keys = HostKeys(tmp_path / "keys")
    held = keys.issue("node001")  # node001's container exists (elb was restarted meanwhile)
    podman = str(fake_podman(tmp_path, run_fails=True))
    cloud = LocalCloud(
        LocalConfig(network="elb-test"), CLUSTER, podman=podman, host_keys=keys, node_logs=tmp_path / "node-logs"
    )
    result = cloud.launch(["node001"])
    assert "already in use" in result.failed["node001"]
    assert keys.public_key("node001") == held.public


def test_a_failed_run_of_a_new_name_leaves_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "ADDRESS_BOOK", tmp_path / "node-addresses")
    keys = HostKeys(tmp_path / "keys")
    podman = str(fake_podman(tmp_path, run_fails=True))
    cloud = LocalCloud(
        LocalConfig(network="elb-test"), CLUSTER, podman=podman, host_keys=keys, node_logs=tmp_path / "node-logs"
    )
    assert "node001" in cloud.launch(["node001"]).failed
    assert keys.names() == set()


def test_a_node_of_a_group_is_labelled_with_it_as_ec2_tags_it(cloud: LocalCloud, tmp_path: Path) -> None:
    """Labels are the local cloud's tags: a node launched for a group carries ``elb:group``."""
    cloud.launch(["node001"], {"node001": "gpu"})
    [run] = [c for c in calls(tmp_path) if c[0] == "run"]
    assert run[run.index(f"{TAG_GROUP}=gpu") - 1] == "--label"
