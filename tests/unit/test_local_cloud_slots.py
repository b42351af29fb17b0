"""The local cloud's nodes have the slots the admin configured, as EC2's do.

``policy.slots_per_node`` is what elb plans with; the provisioning play gives a node the slots its
journal entry carries (``elb_slots``) and, without any, the node's processor count. A local node
listed without slots would join SGE with more slots than elb planned for, so SGE could start a
job elb is launching a node for on a node elb counts as full.

Podman is stood in for by a script that prints what ``podman ps`` and ``podman container
inspect`` print for one worker container: these tests are about what the cloud makes of it,
not about podman (the cluster tests run the real one).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from elb.clouds.local import LocalCloud
from elb.core.config import Config, parse_config
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE
from elb.service import factory

CLUSTER = "unit"


def fake_podman(tmp: Path) -> Path:
    """A ``podman`` that lists one worker container, node003, on the cluster's network."""
    container = {
        "Id": "c0ffee",
        "Name": "node003",
        "Created": "2026-11-26T10:00:00.000000000Z",
        "ImageName": "localhost/elb-node:latest",
        "State": {"Status": "running"},
        "Config": {"Labels": {TAG_CLUSTER: CLUSTER, TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: "node003"}},
        "NetworkSettings": {"Networks": {"elb-test": {"IPAddress": "10.77.0.13"}}},
    }
    return podman_listing(tmp, container)


def podman_listing(tmp: Path, container: Mapping[str, object]) -> Path:
    """A ``podman`` in ``tmp`` whose ``ps`` lists one container and whose ``container inspect``
    shows ``container``; anything else fails as podman does (125)."""
    script = tmp / "podman"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "if sys.argv[1] == 'ps':\n"
        "    print('c0ffee')\n"
        "elif sys.argv[1:3] == ['container', 'inspect']:\n"
        f"    print({json.dumps(json.dumps([container]))})\n"
        "else:\n"
        "    sys.exit(125)\n"
    )
    script.chmod(0o755)
    return script


def config(tmp: Path, **policy: object) -> Config:
    return parse_config(
        {
            "state_dir": str(tmp / "state"),
            "cluster": {"name": CLUSTER, "master": "master"},
            "policy": {"max_nodes": 2, **policy},
            "cloud": {"provider": "local", "local": {"network": "elb-test"}},
        }
    )


def test_a_configured_slot_count_is_what_a_local_node_has(tmp_path: Path) -> None:
    cfg = config(tmp_path, slots_per_node=1)
    cloud = factory.make_cloud(cfg)
    assert isinstance(cloud, LocalCloud)
    cloud.podman = str(fake_podman(tmp_path))
    [node] = cloud.list_workers()
    assert (node.name, node.private_ip, node.slots) == ("node003", "10.77.0.13", 1)
    assert cloud.new_node_slots() == 1


def test_without_a_configured_slot_count_a_local_node_has_its_processors(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    cloud = factory.make_cloud(cfg)
    assert isinstance(cloud, LocalCloud)
    cloud.podman = str(fake_podman(tmp_path))
    [node] = cloud.list_workers()
    assert node.slots is None  # the play counts them on the node
    assert cloud.new_node_slots() == len(os.sched_getaffinity(0))
