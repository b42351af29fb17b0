"""What the wheel holds: the Ansible collection elb.cluster (with the README its galaxy.yml
names), the unit, the IAM policy, the monitoring files, LICENSE."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

pytestmark = pytest.mark.package

COLLECTION = "ansible_collections/elb/cluster"
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_the_repository_has_roles() -> None:
    assert {
        "cluster_user",
        "etc_hosts",
        "munge",
        "nfs_client",
        "nfs_server",
        "sge_decommission",
        "sge_exec",
        "slurm_node",
    } <= set(ROLES)


def test_the_collection_has_the_playbooks_the_inventory_plugin_and_its_metadata(names: set[str]) -> None:
    for path in (
        "playbooks/add_node.yml",
        "playbooks/remove_node.yml",
        "playbooks/site.yml",
        "playbooks/slurm_add_node.yml",
        "playbooks/slurm_remove_node.yml",
        "plugins/inventory/elb_ec2.py",
        "inventory/elb.elb_ec2.yml",
        "galaxy.yml",
        "README.md",
        "meta/runtime.yml",
        "requirements.yml",
        "ansible.cfg",
        "LICENSE",
    ):
        assert f"{COLLECTION}/{path}" in names, path


@pytest.mark.parametrize("role", ROLES)
def test_every_role_is_in_the_collection_whole(names: set[str], role: str) -> None:
    assert f"{COLLECTION}/roles/{role}/tasks/main.yml" in names
    assert f"{COLLECTION}/roles/{role}/meta/argument_specs.yml" in names
    shipped = {n.removeprefix(f"{COLLECTION}/") for n in names if n.startswith(f"{COLLECTION}/roles/{role}/")}
    in_repo = {str(p.relative_to(REPO)) for p in (REPO / "roles" / role).rglob("*") if p.is_file()}
    assert shipped == in_repo


def test_every_module_is_in_the_collection(names: set[str]) -> None:
    modules = sorted(p.name for p in (REPO / "plugins" / "modules").glob("*.py"))
    assert "elb_command_until.py" in modules
    for module in modules:
        assert f"{COLLECTION}/plugins/modules/{module}" in names, module


def test_the_unit_the_iam_policy_and_the_license_are_shipped(names: set[str]) -> None:
    assert "elb/_data/elb.service" in names
    assert "elb/_data/iam-policy.json" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "elb/core/assets.py" in names


def test_the_collection_carries_the_readme_its_galaxy_yml_names(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        galaxy = yaml.safe_load(zf.read(f"{COLLECTION}/galaxy.yml"))
        readme = zf.read(f"{COLLECTION}/{galaxy['readme']}")
    assert readme == (REPO / galaxy["readme"]).read_bytes()


def test_the_monitoring_files_are_shipped_whole(wheel: Path, names: set[str]) -> None:
    in_repo = sorted(p.name for p in (REPO / "monitoring").iterdir() if p.is_file())
    assert in_repo == ["elb-alerts.yml", "elb-dashboard.json"]
    with zipfile.ZipFile(wheel) as zf:
        for name in in_repo:
            assert zf.read(f"elb/_data/monitoring/{name}") == (REPO / "monitoring" / name).read_bytes()
    assert {n for n in names if n.startswith("elb/_data/monitoring/")} == {f"elb/_data/monitoring/{n}" for n in in_repo}


def test_nothing_but_elb_and_the_collection_is_installed(names: set[str]) -> None:
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"elb", "ansible_collections"}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_metadata_license_version_and_python_versions(wheel: Path, names: set[str]) -> None:
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = zf.read(meta_name).decode()
        galaxy = yaml.safe_load(zf.read(f"{COLLECTION}/galaxy.yml"))
    assert "License-Expression: Apache-2.0" in meta
    assert "License-File: LICENSE" in meta
    for py in ("3.11", "3.12", "3.13"):
        assert f"Classifier: Programming Language :: Python :: {py}" in meta
    assert "Requires-Dist: ansible-core" in meta
    assert "Requires-Dist: ansible " not in meta and "Requires-Dist: ansible>" not in meta
    assert "Requires-Dist: jinja2" not in meta.lower()
    assert 'Requires-Dist: matplotlib>=3.8; extra == "plot"' in meta
    assert (galaxy["namespace"], galaxy["name"], galaxy["version"]) == ("elb", "cluster", version)
