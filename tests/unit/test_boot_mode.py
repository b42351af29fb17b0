"""Nodes that configure themselves at boot (``provision.mode: boot``): the boot document, the
config's rules, and the actuator's order of steps with in-memory stand-ins (the same flow runs
for real on the test cluster, tests/cluster/test_boot_mode.py)."""

from __future__ import annotations

import email
import threading
from pathlib import Path

import pytest
import yaml

from elb.core.config import Config, ConfigError, parse_config
from elb.core.interfaces import NodeBoot
from elb.core.model import Host, NodeState, QueueInstance
from elb.provision.boot import BOOT_INVENTORY, batch_of, boot_inventory, node_boot, node_vars
from elb.provision.inventory import InventoryError
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.states import queue_flags
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.ec2_scenarios import BOOT, TEMPLATE_ID, TEMPLATE_USER_DATA, record
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


def boot_config(state_dir: Path, **provision: object) -> Config:
    return parse_config(
        {
            "state_dir": str(state_dir),
            "policy": {"max_nodes": 4, "slots_per_node": 8, "add_nodes_per_iteration": 2, "shrink": "timer"},
            "provision": {"mode": "boot", "boot": {"timeout": 5}, **provision},
        }
    )


# -- the boot document ---------------------------------------------------------------------


def test_the_boot_inventory_has_the_node_alone_reached_locally_and_the_master_by_address() -> None:
    inv = boot_inventory("node002", "node001", master="master", master_address="10.0.0.5", market="spot")
    children = inv["all"]["children"]  # type: ignore[index]
    assert children["master"] == {"hosts": {"master": {"ansible_host": "10.0.0.5"}}}
    node = children["new_nodes"]["hosts"]["node002"]
    assert node["ansible_connection"] == "local" and node["elb_market"] == "spot"
    assert inv["all"]["vars"] == {"node_boot_batch": "node001"}  # type: ignore[index]


def test_only_the_node_roles_variables_go_into_the_boot_document() -> None:
    extra = {
        "nfs_client_mounts": ["/home"],
        "cluster_user_name": "hpc",
        "munge_key": "SECRET",  # another role's, and a secret: never in user data
        "slurm_node_conf": "x",
        "ansible_become_password": "SECRET",
    }
    assert node_vars(extra) == {"nfs_client_mounts": ["/home"], "cluster_user_name": "hpc"}
    inv = boot_inventory("node001", "node001", master="master", master_address="10.0.0.5", variables=extra)
    assert "SECRET" not in yaml.safe_dump(inv)


@pytest.mark.parametrize(
    ("name", "address", "market"),
    [
        ("node{{ x }}", "10.0.0.5", None),  # Ansible would template it
        ("node001", "master; rm -rf /", None),  # not an address
        ("node001", "10.0.0.5", "cheap"),  # not a market
    ],
)
def test_bad_names_addresses_and_markets_are_refused(name: str, address: str, market: str | None) -> None:
    with pytest.raises(InventoryError):
        boot_inventory(name, "node001", master="master", master_address=address, market=market)


def test_the_boot_runs_ansible_playbook_as_an_argument_list_with_the_roles_beside_the_playbooks() -> None:
    inv = boot_inventory("node001", "node001", master="master", master_address="10.0.0.5")
    boot = node_boot(
        inv, ansible_playbook=Path("/opt/elb/bin/ansible-playbook"), playbook=Path("/opt/c/playbooks/node_boot.yml")
    )
    assert boot.argv == (
        "/usr/bin/env",
        "ANSIBLE_ROLES_PATH=/opt/c/roles",
        "ANSIBLE_NOCOLOR=1",
        "/opt/elb/bin/ansible-playbook",
        "-i",
        BOOT_INVENTORY,
        "/opt/c/playbooks/node_boot.yml",
    )
    assert yaml.safe_load(boot.files[BOOT_INVENTORY]) == inv


def test_a_batch_is_named_after_its_first_node() -> None:
    assert batch_of(["node010", "node002", "node003"]) == "node002"
    with pytest.raises(InventoryError):
        batch_of([])


# -- the config ----------------------------------------------------------------------------------


def test_boot_mode_takes_launch_templates_and_refuses_a_relative_playbook(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "state_dir": str(tmp_path),
            "provision": {"mode": "boot"},
            "cloud": {"ec2": {"launch_template": {"name": "workers"}}},
        }
    )
    assert cfg.provision.mode == "boot"  # the node's boot goes in the request's user data
    with pytest.raises(ConfigError, match="absolute"):
        parse_config({"state_dir": str(tmp_path), "provision": {"mode": "boot", "boot": {"playbook": "node_boot.yml"}}})


def test_a_launch_template_node_gets_its_boot_after_the_templates_user_data_by_run_instances() -> None:
    """CreateFleet's overrides take no user data: a template's node given a boot goes by
    RunInstances (several types and spot notwithstanding), its UserData the template version's
    own first, then elb's cloud-config with the boot (the golden request passes botocore's
    validation: tests/unit/test_ec2_contract.py)."""
    requests = record("run-instances-template-boot")
    runs = [r["params"] for r in requests if r["operation"] == "RunInstances"]
    assert [r["operation"] for r in requests if r["operation"] == "CreateFleet"] == []
    (run,) = runs
    assert run["LaunchTemplate"] == {"LaunchTemplateId": TEMPLATE_ID, "Version": "3"}
    parts = [p for p in email.message_from_string(run["UserData"]).walk() if not p.is_multipart()]
    assert parts[0].get_payload() == TEMPLATE_USER_DATA
    body = yaml.safe_load(str(parts[1].get_payload()))
    assert body["runcmd"] == [list(BOOT.command)] and "ssh_keys" not in body


# -- the actuator ----------------------------------------------------------------------------------


class Rig:
    def __init__(self, cfg: Config) -> None:
        self.sge = FakeSge(T0)
        self.cloud = FakeCloud(T0)
        self.prov = FakeProvisioner(self.sge)
        self.journal = Journal(cfg.journal_path)
        self.bal = Balancer(
            cfg, scheduler=GridEngine(cfg, self.sge), journal=self.journal, cloud=self.cloud, provisioner=self.prov,
            clock=Clock(T0),
        )  # fmt: skip


def test_boot_mode_launches_with_each_nodes_boot_and_runs_only_the_admit_play(tmp_path: Path) -> None:
    r = Rig(boot_config(tmp_path))
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    result = r.bal.run_pass()
    assert result.outcomes.added == ["node001", "node002"]
    assert set(r.cloud.boots) == {"node001", "node002"}  # each launched with its boot
    assert r.prov.playbooks == ["admit_nodes.yml"]  # one play for the batch, on the master
    assert r.prov.log[0] == "boot plans node001,node002"
    assert [e.state for e in r.journal.events("node001")] == [
        NodeState.REQUESTED,
        NodeState.LAUNCHING,
        NodeState.RUNNING,
        NodeState.PROVISIONING,
        NodeState.READY,
    ]


def test_push_mode_gives_no_boot_and_runs_the_add_play(tmp_path: Path) -> None:
    cfg = parse_config({"state_dir": str(tmp_path), "policy": {"max_nodes": 4, "slots_per_node": 8}})
    r = Rig(cfg)
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=8)]
    r.bal.run_pass()
    assert r.cloud.boots == {} and r.prov.playbooks == ["add_node.yml"]


def test_boot_plans_that_cannot_be_made_launch_nothing(tmp_path: Path) -> None:
    r = Rig(boot_config(tmp_path))

    def refuse(names: object, groups: object = None) -> dict[str, NodeBoot]:
        raise InventoryError("cannot resolve the master's name 'master'")

    r.prov.boot_plans = refuse  # type: ignore[method-assign]
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=8)]
    result = r.bal.run_pass()
    assert r.cloud.instances == {} and r.prov.playbooks == []
    assert "cannot resolve the master's name" in result.outcomes.failed["node001"]
    assert r.journal.node("node001").state is NodeState.FAILED  # type: ignore[union-attr]


def _unreachable(sge: FakeSge, name: str) -> None:
    sge.hosts[name] = Host(name, (QueueInstance("all.q", name, 8, 0, 0, queue_flags("au")),), 8)


def test_a_node_that_never_configures_itself_is_failed_taken_out_and_terminated(tmp_path: Path) -> None:
    """Admitted (registered) but its execd never reports: after provision.boot.timeout the node
    is cleaned out of SGE and terminated, not kept."""
    r = Rig(boot_config(tmp_path, boot={"timeout": 0.5}))
    real_add = r.prov.add_nodes

    def admit_but_silent(playbook, nodes, existing, on_reached=None):  # type: ignore[no-untyped-def]
        out = real_add(playbook, nodes, existing, on_reached)
        for n in nodes:
            _unreachable(r.sge, n.name)
        return out

    r.prov.add_nodes = admit_but_silent  # type: ignore[method-assign]
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=8)]
    result = r.bal.run_pass()
    assert "did not configure itself within 0.5 s" in result.outcomes.failed["node001"]
    assert "node001" not in r.sge.hosts and r.cloud.list_workers() == []
    assert r.prov.playbooks == ["admit_nodes.yml", "remove_node.yml"]


def test_the_wait_for_nodes_configuring_themselves_ends_on_stop_and_outlasts_a_failed_read(tmp_path: Path) -> None:
    cfg = boot_config(tmp_path, boot={"timeout": 30})
    sge = FakeSge(T0)
    _unreachable(sge, "node001")
    driver = GridEngine(cfg, sge)
    stop = threading.Event()
    stop.set()
    assert driver.await_registered(["node001"], stop) is None  # elb stops: the next start goes on
    sge.add_host("node001")
    sge.fail_reads = 1
    assert driver.await_registered(["node001"], threading.Event()) == {}  # read again after a failure


def test_validate_says_what_a_node_runs_at_boot_or_why_it_cannot_be_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from elb.cli.main import main

    path = tmp_path / "elb.yml"
    path.write_text(
        f"state_dir: {tmp_path / 'state'}\ncluster:\n  master: localhost\ncloud:\n  provider: local\n"
        f"provision:\n  private_data_dir: {tmp_path / 'ansible'}\n  mode: boot\n"
        "  boot:\n    ansible_playbook: /opt/elb/bin/ansible-playbook\n"
        "    playbook: /opt/elb/playbooks/node_boot.yml\n"
    )
    main(["validate", "--offline", "-c", str(path)])
    out = capsys.readouterr().out
    assert "ok   nodes' boot: each new node runs /opt/elb/bin/ansible-playbook -i /etc/elb/boot-inventory.yml " in out
    path.write_text(path.read_text().replace("master: localhost", "master: no-such-master.invalid"))
    main(["validate", "--offline", "-c", str(path)])
    assert "FAIL nodes' boot: the nodes' boot: cannot resolve the master's name 'no-such-master.invalid'" in (
        capsys.readouterr().out
    )
