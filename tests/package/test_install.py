"""The wheel installed into a fresh virtualenv outside the repository, used from outside it.

A plain ``pip install`` of the wheel (no extras): ``elb validate`` must find the playbooks in
that venv's site-packages and fail, naming the path, when the config points elsewhere; Ansible
must resolve the collection's roles, playbooks and inventory plugin by their FQCNs; ``elb plot``
must say how to get matplotlib; ``elb once`` must refuse to run without playbooks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

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
    done = venv.run("elb", "validate", "-c", str(write_config(venv, "ok.yml")))
    assert done.returncode == 0, done.stderr
    shipped = venv.site_packages / "ansible_collections" / "elb" / "cluster" / "playbooks"
    assert f"playbooks: {shipped}" in done.stdout
    assert (shipped / "add_node.yml").is_file()
    assert str(REPO) not in done.stdout


def test_validate_fails_on_a_missing_playbook_dir_and_names_it(venv: Venv) -> None:
    missing = venv.work / "no-such-playbooks"
    cfg = write_config(venv, "missing.yml", f"provision:\n  playbook_dir: {missing}\n")
    done = venv.run("elb", "validate", "-c", str(cfg))
    assert done.returncode == 3  # a config error
    assert f"provision.playbook_dir: {missing} is not a directory" in done.stderr
    assert "Traceback" not in done.stderr


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


def test_plot_without_the_extra_says_how_to_install_it(venv: Venv) -> None:
    done = venv.run("elb", "plot", "-c", str(write_config(venv, "plot.yml")))
    assert done.returncode == 1
    assert "pip install 'elb[plot]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_and_once_refuse_to_start_without_the_shipped_playbooks(venv: Venv) -> None:
    # Last in this module: it damages the install.
    cfg = write_config(venv, "gone.yml")
    shipped = venv.site_packages / "ansible_collections" / "elb" / "cluster" / "playbooks"
    shutil.rmtree(shipped)
    for command in (("once",), ("run",), ("validate",)):
        done = venv.run("elb", *command, "-c", str(cfg), timeout=60)
        assert done.returncode == 3, (command, done.stdout, done.stderr)  # a config error
        assert f"the playbooks shipped with elb: {shipped} is not a directory" in done.stderr
        assert "Traceback" not in done.stderr
