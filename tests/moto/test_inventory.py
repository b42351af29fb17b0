"""The dynamic EC2 inventory (inventory/elb.elb_ec2.yml + plugins/inventory/elb_ec2.py) through
real ``ansible-inventory`` and ``ansible-playbook --list-hosts`` subprocesses against moto.

No stand-ins: the subprocesses reach moto through ``cloud.ec2.endpoint_url`` in the elb config
they read, with the fake credentials of the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elb.clouds.ec2.cloud import Ec2Cloud
from elb.clouds.ec2.inventory import ec2_inventory
from elb.core.config import parse_config
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError

from .conftest import CLUSTER, REGION, make_instance

pytestmark = pytest.mark.moto

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "{{ lookup('pipe', 'touch /tmp/elb-pwned') }}"


def worker(name: str, cluster: str = CLUSTER, **extra: str) -> dict[str, str]:
    return {TAG_CLUSTER: cluster, TAG_ROLE: "worker", TAG_NAME: name, **extra}


@pytest.fixture
def cluster(ec2: Any, ami: str) -> dict[str, str]:
    ids = {
        "master": make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"}),
        "node001": make_instance(ec2, ami, worker("node001", **{TAG_MANAGED_BY: "elb"}), InstanceType="c5.xlarge"),
        "node002": make_instance(ec2, ami, worker("node002"), InstanceType="t3.micro"),  # made by the admin
        "foreign": make_instance(ec2, ami, worker("node003", cluster="other")),
        "gone": make_instance(ec2, ami, worker("node004")),
        "hostile": make_instance(ec2, ami, worker(HOSTILE)),
        "twin_a": make_instance(ec2, ami, worker("node005")),
        "twin_b": make_instance(ec2, ami, worker("node005")),
    }
    ec2.terminate_instances(InstanceIds=[ids["gone"]])
    return ids


@pytest.fixture
def elb_config(tmp_path: Path, aws_env: str) -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(
        f"cluster:\n  name: {CLUSTER}\n  user: hpcuser\nsge:\n  queue: big.q\n"
        "provision:\n  ssh_user: admin\n  extra_vars:\n    site_connect_timeout: 7\n"
        f"cloud:\n  provider: ec2\n  ec2:\n    region: {REGION}\n    endpoint_url: {aws_env}\n"
    )
    return path


def tool(name: str) -> str:
    """Ansible's commands from this Python's environment (the venv), even if it is not on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def run(args: list[str], elb_config: Path) -> subprocess.CompletedProcess[str]:
    args = [tool(args[0]), *args[1:]]
    env = dict(
        os.environ,
        ELB_CONFIG=str(elb_config),
        ANSIBLE_INVENTORY_PLUGINS=str(REPO / "plugins" / "inventory"),
        ANSIBLE_INVENTORY_UNPARSED_FAILED="true",  # a broken source is an error, not an empty inventory
        ANSIBLE_NOCOLOR="1",
    )
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)


def plain(value: Any) -> Any:
    """ansible-inventory --list marks plugin strings as unsafe: {"__ansible_unsafe": "..."}."""
    if isinstance(value, dict) and set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def private_ip(ec2: Any, instance_id: str) -> str:
    res = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(res[0]["Instances"][0]["PrivateIpAddress"])


def test_graph_shows_the_cluster(cluster: dict[str, str], elb_config: Path) -> None:
    proc = run(["ansible-inventory", "-i", "inventory/", "--graph"], elb_config)
    assert proc.returncode == 0, proc.stderr
    lines = [ln.strip("|- ") for ln in proc.stdout.splitlines()]
    at = lines.index("@master:")
    assert lines[at + 1] == "master"
    at = lines.index("@workers:")
    assert lines[at + 1 : at + 3] == ["node001", "node002"]
    for absent in ("node003", "node004", "node005", "lookup"):
        assert absent not in proc.stdout
    # the instances left out are named in warnings, and the hostile tag was never templated
    assert "node005" in proc.stderr and "left out" in proc.stderr
    assert not Path("/tmp/elb-pwned").exists()


def test_list_has_the_host_variables_the_roles_need(ec2: Any, cluster: dict[str, str], elb_config: Path) -> None:
    proc = run(["ansible-inventory", "-i", "inventory/", "--list"], elb_config)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    hv = {h: {k: plain(v) for k, v in vs.items()} for h, vs in data["_meta"]["hostvars"].items()}
    assert set(hv) == {"master", "node001", "node002"}
    assert hv["node001"]["ansible_host"] == private_ip(ec2, cluster["node001"])
    assert hv["node002"]["ansible_host"] == private_ip(ec2, cluster["node002"])
    assert (hv["node001"]["elb_slots"], hv["node002"]["elb_slots"]) == (4, 2)  # vCPUs of c5.xlarge, t3.micro
    assert hv["node001"]["ansible_user"] == "admin"  # provision.ssh_user of elb's config
    # the role variables elb's provisioner passes, from the same config, and its extra vars
    assert hv["node002"]["cluster_user_name"] == "hpcuser"
    assert hv["node002"]["sge_exec_queue"] == hv["node002"]["sge_decommission_queue"] == "big.q"
    assert hv["node002"]["site_connect_timeout"] == 7
    assert hv["master"]["ansible_connection"] == "local"
    assert Path(hv["master"]["ansible_python_interpreter"]).name.startswith("python")
    assert data["master"]["hosts"] == ["master"]
    assert sorted(data["workers"]["hosts"]) == ["node001", "node002"]


def test_each_worker_carries_its_market_for_the_spot_agent(ec2: Any, ami: str, aws_env: str, elb_config: Path) -> None:
    """EC2 says which instances are spot (InstanceLifecycle): those are elb_market spot, the
    others on-demand, so that the site playbooks start the spot agent on the spot ones only."""
    make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"})
    spot = {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
    make_instance(ec2, ami, worker("node001", **{TAG_MANAGED_BY: "elb"}), InstanceMarketOptions=spot)
    make_instance(ec2, ami, worker("node002", **{TAG_MANAGED_BY: "elb"}))
    proc = run(["ansible-inventory", "-i", "inventory/", "--list"], elb_config)
    assert proc.returncode == 0, proc.stderr
    hv = json.loads(proc.stdout)["_meta"]["hostvars"]
    assert {h: plain(hv[h].get("elb_market")) for h in ("node001", "node002")} == {
        "node001": "spot",
        "node002": "on-demand",
    }


def test_each_worker_is_placed_in_its_node_group_by_its_tag(ec2: Any, ami: str, tmp_path: Path, aws_env: str) -> None:
    """With node_groups, site.yml gets each worker's group's queues, host group and complex
    values (a group per node group, too); a worker whose group cannot be known is left out with
    a warning rather than put in another group's queues."""
    elb_config = tmp_path / "groups.yml"
    elb_config.write_text(
        f"cluster:\n  name: {CLUSTER}\n"
        f"cloud:\n  provider: ec2\n  ec2:\n    region: {REGION}\n    endpoint_url: {aws_env}\n"
        "node_groups:\n"
        "  - {name: cpu, slots: 2, max_nodes: 4}\n"
        "  - {name: gpu, slots: 4, max_nodes: 2, queues: [gpu.q], hostgroup: '@gpu', offers: {gpu: '1'}}\n"
    )
    make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"})
    managed = {TAG_MANAGED_BY: "elb"}
    make_instance(ec2, ami, worker("node001", **managed, **{TAG_GROUP: "gpu"}))
    make_instance(ec2, ami, worker("node002", **managed, **{TAG_GROUP: "cpu"}))
    make_instance(ec2, ami, worker("node003", **managed))  # launched by an elb that set no group tag
    proc = run(["ansible-inventory", "-i", "inventory/", "--list"], elb_config)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    hv = {h: {k: plain(v) for k, v in vs.items()} for h, vs in data["_meta"]["hostvars"].items()}
    assert set(hv) == {"master", "node001", "node002"}
    gpu = {k: hv["node001"][k] for k in ("elb_group", "elb_slots", "sge_exec_queues", "sge_exec_hostgroup")}
    assert gpu == {"elb_group": "gpu", "elb_slots": 4, "sge_exec_queues": ["gpu.q"], "sge_exec_hostgroup": "@gpu"}
    assert hv["node001"]["sge_exec_complex_values"] == {"gpu": "1"}
    assert (hv["node002"]["sge_exec_queues"], hv["node002"]["sge_exec_hostgroup"]) == (["all.q"], "@allhosts")
    assert (data["elb_group_gpu"]["hosts"], data["elb_group_cpu"]["hosts"]) == (["node001"], ["node002"])
    assert "node003" in proc.stderr and f"no {TAG_GROUP} tag" in proc.stderr
    # one node group's workers, as docs/provisioning.md runs site.yml for them
    limit = ["ansible-playbook", "-i", "inventory/", "playbooks/site.yml", "--list-hosts", "--limit", "elb_group_gpu"]
    proc = run(limit, elb_config)
    assert proc.returncode == 0, proc.stderr
    first_play = proc.stdout.split("play #2")[0]
    assert "hosts (1)" in first_play and "node001" in first_play


def test_site_playbook_targets_the_inventorys_workers(cluster: dict[str, str], elb_config: Path) -> None:
    proc = run(["ansible-playbook", "-i", "inventory/", "playbooks/site.yml", "--list-hosts"], elb_config)
    assert proc.returncode == 0, proc.stderr
    first_play = proc.stdout.split("play #2")[0]
    assert "hosts (2)" in first_play
    assert "node001" in first_play and "node002" in first_play


def test_unreadable_elb_config_is_an_inventory_error(tmp_path: Path, aws_env: str) -> None:
    proc = run(["ansible-inventory", "-i", "inventory/", "--graph"], tmp_path / "missing.yml")
    assert proc.returncode != 0
    assert "missing.yml" in proc.stderr
    # How to choose another file, as a plugin is told (no --config on ansible-inventory).
    assert "ELB_CONFIG" in proc.stderr and "--config" not in proc.stderr, proc.stderr


def test_master_over_ssh_needs_exactly_one_tagged_master(
    ec2: Any, ami: str, cluster: dict[str, str], aws_env: str
) -> None:
    cfg = parse_config({"cloud": {"ec2": {"region": REGION, "endpoint_url": aws_env}}})
    cloud = Ec2Cloud.from_config(cfg)
    inv = ec2_inventory(cfg, cloud, master_local=False).inventory
    master_vars = inv["all"]["children"]["master"]["hosts"]["master"]  # type: ignore[index]
    assert master_vars == {"ansible_host": private_ip(ec2, cluster["master"])}

    make_instance(ec2, ami, {TAG_CLUSTER: CLUSTER, TAG_ROLE: "master", TAG_NAME: "master"})
    with pytest.raises(CloudError, match="found 2"):
        ec2_inventory(cfg, cloud, master_local=False)
