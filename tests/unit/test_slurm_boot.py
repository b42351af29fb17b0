"""Slurm's nodes that configure themselves at boot (``provision.mode: boot`` with
``scheduler: slurm``): the config, the boot document (what it holds and what it never holds: the
munge key, another role's variables), the actuator's order of steps with the Slurm driver (its
address set, then one admit play, then the wait for its slurmd), and slurm.conf's
``ResumeTimeout`` check in boot mode. The playbooks run for real in
tests/cluster/test_slurm_boot_mode.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from elb.core.config import Config, parse_config
from elb.core.interfaces import HostResult, Instance, LaunchResult, NodeBoot, NodeSpec, Outcome, Witness
from elb.core.model import NodeState
from elb.provision.ansible import AnsibleProvisioner
from elb.provision.boot import BOOT_INVENTORY
from elb.schedulers.slurm.config import slurm_settings
from elb.schedulers.slurm.driver import BOOT_VARS, Slurm, conf_checks
from elb.schedulers.slurm.requests import RequestKind, write
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.slurm_fakes import NOW, FakeSlurm
from tests.unit.test_slurm_conf import facts, failed, with_line


def slurm_boot_config(tmp: Path, **provision: object) -> Config:
    return parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp / "state"),
            "cluster": {"master": "localhost"},
            "policy": {"max_nodes": 4, "slots_per_node": 2, "billing": "second", "idle_time": 3600},
            "slurm": {"requests": str(tmp / "requests")},
            "cloud": {"provider": "local"},
            "provision": {"mode": "boot", "private_data_dir": str(tmp / "ansible"), **provision},
        }
    )


# -- the config -------------------------------------------------------------------------------


def test_boot_mode_is_taken_for_slurm_with_its_own_admit_and_boot_playbooks(tmp_path: Path) -> None:
    cfg = slurm_boot_config(tmp_path)
    assert cfg.provision.mode == "boot"
    assert (slurm_settings(cfg).admit_playbook, slurm_settings(cfg).boot_playbook) == (
        "slurm_admit_nodes.yml",
        "slurm_node_boot.yml",
    )


# -- the boot document ---------------------------------------------------------------------------


def test_a_slurm_nodes_boot_runs_slurm_node_boot_with_its_roles_variables_and_no_secret(tmp_path: Path) -> None:
    cfg = slurm_boot_config(
        tmp_path,
        extra_vars={
            "slurm_node_options": ["-b"],
            "munge_key_path": "/etc/munge/munge.key",
            "munge_key": "SECRET-KEY",  # a variable holding a key: never in the boot document
            "munge_master_key_path": "/srv/munge.key",  # the master's, not the node's
            "sge_exec_root": "/opt/sge",  # Grid Engine's role: not a Slurm node's
            "ansible_become_password": "SECRET-PASS",
        },
    )
    prov = factory.make_provisioner(cfg)
    plan = prov.boot_plans(["node002", "node001"])["node002"]
    assert plan.argv[-1].endswith("/playbooks/slurm_node_boot.yml")
    document = plan.files[BOOT_INVENTORY]
    assert "SECRET" not in document and "munge_master_key_path" not in document and "sge_exec_" not in document
    inventory = yaml.safe_load(document)
    assert inventory["all"]["vars"] == {
        "cluster_user_name": "sgeuser",
        "munge_key_path": "/etc/munge/munge.key",
        "node_boot_batch": "node001",
        "slurm_node_options": ["-b"],
    }
    assert list(inventory["all"]["children"]["new_nodes"]["hosts"]) == ["node002"]


def test_the_slurm_prefixes_name_no_munge_variable_but_the_nodes_key_path() -> None:
    munge = [p for p in BOOT_VARS if p.startswith("munge")]
    assert munge == ["munge_key_path"]


def test_grid_engines_boot_still_runs_node_boot_with_its_own_variables(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "state_dir": str(tmp_path / "state"),
            "cluster": {"master": "localhost"},
            "cloud": {"provider": "local"},
            "provision": {
                "mode": "boot",
                "private_data_dir": str(tmp_path / "ansible"),
                "extra_vars": {"slurm_node_options": ["-b"]},
            },
        }
    )
    prov = factory.make_provisioner(cfg)
    plan = prov.boot_plans(["node001"])["node001"]
    assert plan.argv[-1].endswith("/playbooks/node_boot.yml")
    assert "slurm_node_options" not in plan.files[BOOT_INVENTORY]
    assert isinstance(prov, AnsibleProvisioner)


# -- the pass ------------------------------------------------------------------------------------


class Cloud:
    def __init__(self) -> None:
        self.instances: dict[str, Instance] = {}
        self.boots: dict[str, NodeBoot] = {}
        self.terminated: list[str] = []

    def launch(
        self,
        names: Sequence[str],
        groups: object = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: object = None,
    ) -> LaunchResult:
        new = [Instance(f"i-{n}", n, "running", NOW, private_ip="10.77.0.50", slots=2) for n in names]
        self.boots.update(boot or {})
        self.instances.update({i.instance_id: i for i in new})
        return LaunchResult(tuple(new))

    def list_workers(self) -> list[Instance]:
        return list(self.instances.values())

    def terminate(self, ids: Sequence[str]) -> None:
        for i in ids:
            self.instances.pop(i, None)
        self.terminated += ids

    def stop(self, ids: Sequence[str]) -> None:
        raise AssertionError("no warm pool here")

    def start(self, ids: Sequence[str]) -> LaunchResult:
        raise AssertionError("no warm pool here")

    def new_node_slots(self) -> int:
        return 2


@dataclass
class Playbooks:
    slurm: FakeSlurm
    runs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the plays and the addresses Slurm was given, in order

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        self.order += [f"address {name}" for name in self.slurm.addresses if f"address {name}" not in self.order]
        self.order.append(playbook)
        self.runs.append((playbook, tuple(n.name for n in nodes)))
        return {n.name: HostResult(n.name, Outcome.OK) for n in nodes}

    def remove_nodes(
        self, playbook: str, nodes: Sequence[NodeSpec], existing: Sequence[NodeSpec]
    ) -> dict[str, HostResult]:
        self.runs.append((playbook, tuple(n.name for n in nodes)))
        return {n.name: HostResult(n.name, Outcome.OK) for n in nodes}

    def boot_plans(self, names: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, NodeBoot]:
        return {n: NodeBoot(files={BOOT_INVENTORY: f"{n}\n"}, argv=("/bin/true",)) for n in names}

    def probe_jobs(self, nodes: Sequence[NodeSpec]) -> dict[str, Witness]:
        raise AssertionError("no removal here")


def boot_rig(tmp: Path, **provision: object) -> tuple[Balancer, FakeSlurm, Cloud, Playbooks, Config]:
    cfg = slurm_boot_config(tmp, **provision)
    (tmp / "requests").mkdir()
    slurm = FakeSlurm()
    slurm.add(*(f"node00{i}" for i in range(1, 7)))
    journal = Journal(cfg.journal_path)
    cloud, books = Cloud(), Playbooks(slurm)
    bal = Balancer(
        cfg, scheduler=Slurm(cfg, journal, slurm), journal=journal, cloud=cloud, provisioner=books, clock=Clock(NOW)
    )
    return bal, slurm, cloud, books, cfg


def test_boot_mode_launches_each_node_with_its_boot_sets_its_address_then_runs_one_admit_play(
    tmp_path: Path,
) -> None:
    bal, slurm, cloud, books, cfg = boot_rig(tmp_path)
    slurm.ask("node001", "node002")
    write(slurm_settings(cfg).requests, RequestKind.RESUME, "node[001-002]", NOW)
    result = bal.run_pass()
    assert result.ok, result.summary()
    assert set(cloud.boots) == {"node001", "node002"}
    assert books.runs == [("slurm_admit_nodes.yml", ("node001", "node002"))]  # one play for the batch
    assert books.order == ["address node001", "address node002", "slurm_admit_nodes.yml"]
    assert [bal.journal.node(n).state for n in ("node001", "node002")] == [NodeState.READY] * 2  # type: ignore[union-attr]


def test_a_slurm_node_whose_slurmd_never_registers_after_its_admission_is_failed_and_terminated(
    tmp_path: Path,
) -> None:
    bal, slurm, cloud, books, cfg = boot_rig(tmp_path, boot={"timeout": 0.5})
    slurm.silent.add("node001")
    slurm.ask("node001")
    write(slurm_settings(cfg).requests, RequestKind.RESUME, "node001", NOW)
    result = bal.run_pass()
    why = result.outcomes.failed["node001"]
    assert "did not configure itself within 0.5 s of its admission" in why and "/var/log/elb-boot.log" in why
    assert cloud.terminated == ["i-node001"]
    assert books.runs[0] == ("slurm_admit_nodes.yml", ("node001",))
    assert books.runs[1] == ("slurm_remove_node.yml", ("node001",))


def test_the_registration_wait_in_boot_mode_is_provision_boot_timeout(tmp_path: Path) -> None:
    cfg = slurm_boot_config(tmp_path, boot={"timeout": 30})
    slurm = FakeSlurm()
    slurm.add("node001")
    driver = Slurm(cfg, Journal(cfg.journal_path), slurm)
    stop = threading.Event()
    stop.set()
    assert driver.await_registered(["node001"], stop) is None  # elb stops: the next start goes on
    assert driver.admit_playbook == "slurm_admit_nodes.yml"


# -- slurm.conf ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "need"), [("push", 1620), ("boot", 2100)])
def test_resume_timeout_counts_the_boot_wait_in_boot_mode(tmp_path: Path, mode: str, need: int) -> None:
    """push: boot_timeout 600 + provision.timeout 900 + slurm.register_timeout 120; boot: the
    admit play, then provision.boot.timeout (600) for the node to configure itself."""
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": str(tmp_path),
            "policy": {"max_nodes": 8, "slots_per_node": 2},
            "provision": {"mode": mode},
        }
    )
    checks = list(conf_checks(cfg, facts(with_line("ResumeTimeout", "600 sec")), script=lambda _p: None))
    (bad,) = failed(checks)
    assert f"not above {need} s" in bad.detail


# -- the playbooks -------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _tasks(path: Path) -> list[dict[str, Any]]:
    """The tasks of a task file or a playbook's plays, blocks and rescues flattened."""
    out: list[dict[str, Any]] = []

    def walk(items: object) -> None:
        for t in items if isinstance(items, list) else []:
            out.append(t)
            for key in ("tasks", "block", "rescue", "always"):
                walk(t.get(key))

    walk(yaml.safe_load(path.read_text()))
    return out


def test_every_munge_task_that_holds_the_key_is_not_logged() -> None:
    carrying = [
        t
        for f in sorted((REPO / "roles" / "munge" / "tasks").glob("*.yml"))
        for t in _tasks(f)
        if "block" not in t and ("ansible.builtin.slurp" in t or "munge_master_key.content" in str(t))
    ]
    assert len(carrying) == 2  # key.yml (main's and push's) reads it once and writes it once
    assert all(t.get("no_log") is True for t in carrying), [t["name"] for t in carrying]


# Actions that run on Ansible's controller alone: no module run on the node.
CONTROLLER_ONLY = {"ansible.builtin.assert", "ansible.builtin.fail", "ansible.builtin.set_fact", "ansible.builtin.meta"}


def _with_imports(tasks_dir: Path, name: str) -> list[dict[str, Any]]:
    """A task file's tasks with each ``import_tasks`` of the role replaced by its tasks, in order."""
    out: list[dict[str, Any]] = []
    for t in _tasks(tasks_dir / name):
        imported = t.get("ansible.builtin.import_tasks")
        out.extend(_with_imports(tasks_dir, imported) if isinstance(imported, str) else [t])
    return out


def test_the_push_costs_each_node_the_module_runs_the_paper_estimate_counts() -> None:
    tasks = _with_imports(REPO / "roles" / "munge" / "tasks", "push.yml")
    on_node = [
        t["name"] for t in tasks if not t.get("run_once") and "delegate_to" not in t and not CONTROLLER_ONLY & t.keys()
    ]
    assert on_node == ["Wait until the node answers SSH", "Write the munge key on the node"]
    assert not any("notify" in t for t in tasks)  # no handler runs more on the node: the writer restarts munged
    paper = (REPO / "benchmarks" / "slurm_on_paper.py").read_text()
    assert f"KEY_RUNS = {len(on_node)} " in paper


def test_the_key_goes_to_the_roles_writer_on_its_stdin_alone() -> None:
    (write_task,) = [
        t for t in _tasks(REPO / "roles" / "munge" / "tasks" / "key.yml") if "ansible.builtin.command" in t
    ]
    cmd = write_task["ansible.builtin.command"]
    assert cmd["argv"][:2] == ["python3", "-c"] and "munge_key_writer.py" in cmd["argv"][2]
    assert (REPO / "roles" / "munge" / "files" / "munge_key_writer.py").is_file()
    assert "munge_master_key" not in str(cmd["argv"]) and cmd["stdin"] == "{{ munge_master_key.content }}"
    assert write_task["no_log"] is True and write_task["failed_when"] is False  # its failure is said by the next task
    main = _with_imports(REPO / "roles" / "munge" / "tasks", "main.yml")
    assert write_task in main  # the pushed mode's path writes the key with the same writer


def test_the_admit_play_pushes_the_key_before_it_publishes_the_file_the_node_waits_for() -> None:
    steps = [
        t["ansible.builtin.import_role"]
        for t in _tasks(REPO / "playbooks" / "slurm_admit_nodes.yml")
        if "ansible.builtin.import_role" in t
    ]
    assert steps == [
        {"name": "etc_hosts", "tasks_from": "batch"},
        {"name": "nfs_server", "tasks_from": "batch"},
        {"name": "munge", "tasks_from": "push"},
        {"name": "node_boot", "tasks_from": "publish"},
    ]


def test_the_nodes_boot_never_reaches_the_master_nor_reads_its_key() -> None:
    files = [REPO / "playbooks" / "slurm_node_boot.yml", REPO / "roles" / "munge" / "tasks" / "node.yml"]
    for f in files:
        text = f.read_text()
        assert "delegate_to" not in text and "munge_master_key_path" not in text and "slurp" not in text
    roles = [
        (t["ansible.builtin.include_role"]["name"], t["ansible.builtin.include_role"].get("tasks_from"))
        for t in _tasks(files[0])
        if "ansible.builtin.include_role" in t
    ]
    assert roles.index(("node_boot", None)) < roles.index(("munge", "node")) < roles.index(("slurm_node", None))
