"""The wheel installed into a fresh virtualenv outside the repository, used from outside it.

A plain ``pip install`` of the wheel (no extras): ``elb init`` writes a config that ``elb
validate`` passes; ``elb validate`` finds the playbooks in that venv's site-packages and fails
(exit 3, a FAIL line naming the problem) on a missing playbook directory, an unreadable SSH key,
a qstat that does not answer within sge.timeout and an unwritable state directory; Ansible must
resolve the collection's roles, playbooks and inventory plugin by their FQCNs; ``elb plot`` must
say how to get matplotlib; ``elb monitoring`` must name the alert rules and the dashboard in
site-packages and copy them; the collection carries its README; ``elb once`` must refuse to run
without playbooks. On the test cluster
(marker ``cluster``) the installed elb adds and removes a node with the packaged playbooks and the
admin commands work on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from elbdev.testcluster import constants as C
from tests.cluster.helpers import cluster_state, job_state, wait_for
from tests.cluster.names import start_after_used

from .conftest import REPO

if TYPE_CHECKING:
    from elbdev.testcluster.cluster import TestCluster

pytestmark = pytest.mark.package


class Venv:
    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work  # the working directory of every command: not the repository
        self.env = {
            "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "HOME": str(work),
            "LANG": "C.UTF-8",
            "ANSIBLE_NOCOLOR": "1",
        }  # no PYTHONPATH: the installed elb, not the checkout's

    def run(self, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.root / "bin" / args[0]), *args[1:]],
            cwd=self.work,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    @property
    def site_packages(self) -> Path:
        (found,) = self.root.glob("lib/python3*/site-packages")
        return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("venv")
    work = tmp_path_factory.mktemp("work")
    assert not root.is_relative_to(REPO) and not work.is_relative_to(REPO)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
    v = Venv(root, work)
    done = v.run("pip", "install", "--quiet", "--disable-pip-version-check", str(wheel), timeout=900)
    assert done.returncode == 0, done.stderr
    size = subprocess.run(["du", "-sh", str(root)], capture_output=True, text=True, check=True).stdout.split()[0]
    print(f"\nFIGURES fresh venv of a plain install of {wheel.name}: {size}")
    return v


def write_config(venv: Venv, name: str, extra: str = "") -> Path:
    path = venv.work / name
    path.write_text(
        f"state_dir: {venv.work / 'state'}\ncluster:\n  name: pkgtest\ncloud:\n  provider: local\n{extra}",
        encoding="utf-8",
    )
    return path


def test_validate_finds_the_playbooks_in_site_packages(venv: Venv) -> None:
    done = venv.run("elb", "validate", "--offline", "-c", str(write_config(venv, "ok.yml")))
    assert done.returncode == 0, done.stdout + done.stderr
    shipped = venv.site_packages / "ansible_collections" / "elb" / "cluster" / "playbooks"
    assert f"ok   playbooks: {shipped}" in done.stdout
    assert (shipped / "add_node.yml").is_file()
    assert str(REPO) not in done.stdout


def test_validate_fails_on_a_missing_playbook_dir_and_names_it(venv: Venv) -> None:
    missing = venv.work / "no-such-playbooks"
    cfg = write_config(venv, "missing.yml", f"provision:\n  playbook_dir: {missing}\n")
    done = venv.run("elb", "validate", "--offline", "-c", str(cfg))
    assert done.returncode == 3  # a config error
    assert f"FAIL playbooks: provision.playbook_dir: {missing} is not a directory" in done.stdout
    assert "Traceback" not in done.stderr


def _fails(venv: Venv, name: str, extra: str, line: str, *flags: str, **env: str) -> None:
    done = venv.run("elb", "validate", *flags, "-c", str(write_config(venv, name, extra)), timeout=120, **env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert any(x.startswith(line) for x in done.stdout.splitlines()), done.stdout
    assert "Traceback" not in done.stderr


def test_validate_fails_on_an_unreadable_ssh_key(venv: Venv) -> None:
    key = venv.work / "no-such-key"
    _fails(
        venv, "key.yml", f"provision:\n  ssh_private_key: {key}\n", f"FAIL SSH key: {key}: cannot be read", "--offline"
    )


def test_validate_fails_on_a_qstat_that_does_not_answer(venv: Venv) -> None:
    bin_dir = venv.work / "slow-sge"
    bin_dir.mkdir()
    qstat = bin_dir / "qstat"
    qstat.write_text("#!/bin/sh\nexec sleep 60\n")  # a qmaster that does not answer
    qstat.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{venv.env['PATH']}"
    _fails(venv, "slow.yml", "sge:\n  timeout: 2\n", "FAIL SGE: qstat did not answer within 2s", PATH=path)


def test_validate_fails_on_an_unwritable_state_directory(venv: Venv) -> None:
    # root may write anywhere a mode allows: sysfs stands in, where not even root creates a file.
    path = venv.work / "unwritable.yml"
    path.write_text("state_dir: /sys/kernel\ncloud: {provider: local}\n", encoding="utf-8")
    done = venv.run("elb", "validate", "--offline", "-c", str(path))
    assert done.returncode == 3, done.stdout
    assert "FAIL state directory: /sys/kernel is not writable" in done.stdout


def test_init_writes_a_config_that_validates(venv: Venv) -> None:
    path = venv.work / "etc" / "elb.yml"
    done = venv.run("elb", "init", "--offline", "-c", str(path), "--sge-root", str(venv.work / "no-sge"))
    assert done.returncode == 0, done.stderr
    text = path.read_text(encoding="utf-8").replace("state_dir: /var/lib/elb", f"state_dir: {venv.work / 'istate'}")
    # Never elb's own directories: validate's check of the default /var/lib/elb/ansible writes a probe file there.
    text = text.replace("  ssh_user: root", f"  ssh_user: root\n  private_data_dir: {venv.work / 'iansible'}")
    path.write_text(text, encoding="utf-8")
    done = venv.run("elb", "validate", "--offline", "-c", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    again = venv.run("elb", "init", "--offline", "-c", str(path))
    assert again.returncode == 3 and "not overwritten" in again.stderr


def test_ansible_finds_the_collection_by_name(venv: Venv) -> None:
    inventory = venv.work / "inventory.yml"
    inventory.write_text(
        "all:\n  children:\n    master: {hosts: {master: }}\n    workers: {hosts: {node001: }}\n"
        "    new_nodes: {hosts: {node002: }}\n    old_nodes: {hosts: {node003: }}\n"
        "    live_workers: {hosts: {node001: }}\n    dead_workers: {hosts: {node004: }}\n",  # site.yml's groups
        encoding="utf-8",
    )
    inv = str(inventory)
    for args in (
        ("ansible-doc", "-t", "role", "elb.cluster.sge_exec"),
        ("ansible-doc", "-t", "inventory", "elb.cluster.elb_ec2"),
        ("ansible-playbook", "-i", inv, "--syntax-check", "elb.cluster.remove_node"),
        ("ansible-playbook", "-i", inv, "--syntax-check", "elb.cluster.add_node"),
        ("ansible-playbook", "-i", inv, "--syntax-check", "elb.cluster.site"),
        ("ansible-doc", "-t", "role", "elb.cluster.slurm_node"),
        ("ansible-playbook", "-i", inv, "--syntax-check", "elb.cluster.slurm_add_node"),
        ("ansible-playbook", "-i", inv, "--syntax-check", "elb.cluster.slurm_remove_node"),
    ):
        done = venv.run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        warnings = [w for w in done.stderr.splitlines() if "WARNING" in w and "group and host with same name" not in w]
        assert not warnings, (args, done.stderr)  # the contract's group master holds the host master


def test_the_inventory_plugin_by_its_fqcn_reads_elbs_config(venv: Venv) -> None:
    absent = venv.work / "absent.yml"
    source = venv.work / "cluster.elb_ec2.yml"
    source.write_text(f"plugin: elb.cluster.elb_ec2\nelb_config: {absent}\n", encoding="utf-8")
    done = venv.run("ansible-inventory", "-i", str(source), "--list", ANSIBLE_INVENTORY_UNPARSED_FAILED="true")
    assert done.returncode != 0
    assert "elb_ec2: " in done.stderr and str(absent) in done.stderr, done.stderr  # the plugin ran: elb's error


def test_elb_monitoring_names_and_copies_the_shipped_files(venv: Venv) -> None:
    shipped = venv.site_packages / "elb" / "_data" / "monitoring"
    done = venv.run("elb", "monitoring")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(shipped / "elb-alerts.yml"), str(shipped / "elb-dashboard.json")]
    assert venv.run("elb", "monitoring", "--path").stdout == f"{shipped}\n"
    target = venv.work / "prometheus"
    done = venv.run("elb", "monitoring", "--copy", str(target))
    assert done.returncode == 0, done.stderr
    for name in ("elb-alerts.yml", "elb-dashboard.json"):
        assert (target / name).read_bytes() == (REPO / "monitoring" / name).read_bytes()


def test_the_installed_collection_has_its_readme(venv: Venv) -> None:
    collection = venv.site_packages / "ansible_collections" / "elb" / "cluster"
    galaxy = yaml.safe_load((collection / "galaxy.yml").read_text(encoding="utf-8"))
    assert (collection / galaxy["readme"]).is_file()


def test_plot_without_the_extra_says_how_to_install_it(venv: Venv) -> None:
    done = venv.run("elb", "plot", "-c", str(write_config(venv, "plot.yml")))
    assert done.returncode == 1
    assert "pip install 'elb[plot]'" in done.stderr
    assert "Traceback" not in done.stderr


JOB = "#!/bin/sh\n#$ -S /bin/sh\n#$ -j y\nsleep 2\n"


@pytest.mark.cluster
def test_the_installed_elb_on_the_test_cluster(venv: Venv, testcluster: TestCluster) -> None:
    """One node, added and removed with the packaged playbooks by ``elb once`` from the venv; the
    admin's commands on it: validate, nodes, history, pause, drain (the order carried out while
    paused), resume."""
    tc = testcluster
    before = cluster_state(tc)
    cfg = venv.work / "cluster.yml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "poll_interval": 2,
                "state_dir": str(venv.work / "cstate"),
                "cluster": {"name": C.CLUSTER_NAME, "master": C.MASTER_NAME},
                "policy": {"max_nodes": 1, "slots_per_node": 2, "billing": "second", "boot_time": 12},
                "cloud": {"provider": "local"},
                "provision": {"private_data_dir": str(venv.work / "cansible"), "ssh_private_key": str(C.SSH_KEY)},
            }
        ),
        encoding="utf-8",
    )
    start_after_used(venv.work / "cstate" / "journal.sqlite")  # the session's names go on
    sge = {**C.SGE_ENV, "PATH": f"{venv.env['PATH']}{os.pathsep}/usr/bin:/bin:/usr/sbin:/sbin"}

    def elb(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = venv.run("elb", *args, "-c", str(cfg), timeout=600, **sge)
        assert not ok or done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    checked = elb("validate")
    assert "ok   SGE: qstat answers" in checked.stdout and "ok   cloud local (podman)" in checked.stdout
    jid = tc.submit(JOB, "-N", "pkg", "-o", "/dev/null")
    try:
        node = ""
        for _ in range(10):  # a pass launches and provisions; bounded
            elb("once")
            nodes = json.loads(elb("nodes", "--json").stdout)["nodes"]
            if nodes and nodes[0]["state"] == "ready":
                node = nodes[0]["name"]
                break
            time.sleep(2)
        assert node, "no node added"
        assert node in cluster_state(tc)["exechosts"]  # type: ignore[operator]
        assert "paused" in elb("pause", "--reason", "package test").stdout
        wait_for("the job to end", lambda: job_state(tc, jid) == "", timeout=180)
        drained = elb("drain", node)
        assert f"{node}: disabled and idle" in drained.stdout
        for _ in range(5):
            elb("once")
            if json.loads(elb("nodes", "--json").stdout)["nodes"] == []:
                break
        assert "scaling PAUSED" in elb("status").stdout
        steps = [e["state"] for e in json.loads(elb("history", node, "--json").stdout)]
        assert steps[0] == "requested" and "ready" in steps
        assert steps[-3:] == ["draining", "deregistered", "terminated"]
        assert "scaling resumed" in elb("resume").stdout
        assert tc.workers() == []
        assert cluster_state(tc) == before
    finally:
        tc.master_run(["qdel", jid], check=False)


def test_run_and_once_refuse_to_start_without_the_shipped_playbooks(venv: Venv) -> None:
    # Last in this module: it damages the install.
    cfg = write_config(venv, "gone.yml")
    shipped = venv.site_packages / "ansible_collections" / "elb" / "cluster" / "playbooks"
    shutil.rmtree(shipped)
    for command in (("once",), ("run",), ("validate", "--offline")):
        done = venv.run("elb", *command, "-c", str(cfg), timeout=60)
        assert done.returncode == 3, (command, done.stdout, done.stderr)  # a config error
        assert f"the playbooks shipped with elb: {shipped} is not a directory" in done.stderr + done.stdout
        assert "Traceback" not in done.stderr


def test_the_wheel_ships_elb_without_the_development_package(venv: Venv) -> None:
    site = venv.site_packages
    assert (site / "elb" / "core" / "planner.py").is_file()
    assert not (site / "elbdev").exists() and not list(site.glob("elbdev*"))
    assert (site / "elb" / "_data" / "monitoring" / "elb-alerts.yml").is_file()
    assert (site / "elb" / "_data" / "monitoring" / "elb-dashboard.json").is_file()
    shown = venv.run("elb", "--help").stdout
    assert "validate" in shown and "testcluster" not in shown and "demo" not in shown
