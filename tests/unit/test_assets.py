"""elb.assets in a checkout, the playbook checks of validate/run/once, the Ansible paths of a
run, and the rule that the shipped Ansible content needs no collection besides ansible-core's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elb import assets, extras
from elb.cli import main
from elb.exitcodes import Exit
from elb.provision.ansible import DEFAULT_COLLECTIONS_PATHS, ansible_paths

REPO = Path(__file__).resolve().parents[2]


def config(tmp_path: Path, provision: str = "") -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ncloud:\n  provider: local\n{provision}")
    return path


def test_a_checkout_uses_its_own_top_level_directories() -> None:
    found = assets.locate()
    assert not found.installed
    assert found.collection == REPO
    assert found.playbook_dir == REPO / "playbooks" == assets.default_playbook_dir()
    assert found.roles_dir == REPO / "roles"
    assert (found.inventory_plugins_dir / "elb_ec2.py").is_file()
    assert found.unit.is_file() and found.unit.name == "elb.service"
    assert found.iam_policy.is_file() and found.iam_policy.name == "iam-policy.json"
    assert found.collections_path is None
    assert assets.playbook_dir_problem(None) is None


def test_a_missing_or_incomplete_playbook_dir_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert assets.playbook_dir_problem(missing) == f"provision.playbook_dir: {missing} is not a directory"
    (tmp_path / "add_node.yml").write_text("---\n")
    assert assets.playbook_dir_problem(tmp_path) == f"provision.playbook_dir: {tmp_path} has no remove_node.yml"


def test_validate_fails_on_a_missing_playbook_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--offline", "-c", str(config(tmp_path))]) == 0
    assert f"ok   playbooks: {REPO / 'playbooks'}" in capsys.readouterr().out
    missing = tmp_path / "gone"
    bad = config(tmp_path, f"provision:\n  playbook_dir: {missing}\n")
    assert main(["validate", "--offline", "-c", str(bad)]) == Exit.CONFIG
    assert f"FAIL playbooks: provision.playbook_dir: {missing} is not a directory" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["run"], ["once"]])
def test_run_and_live_once_refuse_to_start_without_playbooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    missing = tmp_path / "gone"
    bad = config(tmp_path, f"provision:\n  playbook_dir: {missing}\n")
    assert main([*command, "-c", str(bad)]) == Exit.CONFIG
    assert f"provision.playbook_dir: {missing} is not a directory" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()  # refused before anything was opened


def fake_install(root: Path) -> assets.Assets:
    collection = root / "site" / "ansible_collections" / "elb" / "cluster"
    (collection / "roles").mkdir(parents=True)
    (collection / "playbooks").mkdir()
    return assets.Assets(collection=collection, unit=root / "u", iam_policy=root / "p", installed=True)


def test_runs_of_an_installed_elb_see_its_collection_and_roles(tmp_path: Path) -> None:
    shipped = fake_install(tmp_path)
    env = ansible_paths(shipped.playbook_dir, shipped, {})
    assert env["ANSIBLE_ROLES_PATH"] == str(shipped.roles_dir)
    assert env["ANSIBLE_COLLECTIONS_PATH"].split(":") == [str(tmp_path / "site"), *DEFAULT_COLLECTIONS_PATHS]
    own = ansible_paths(shipped.playbook_dir, shipped, {"ANSIBLE_COLLECTIONS_PATH": "/srv/collections"})
    assert own["ANSIBLE_COLLECTIONS_PATH"] == f"{tmp_path / 'site'}:/srv/collections"


def test_own_playbooks_come_first_then_the_shipped_roles(tmp_path: Path) -> None:
    shipped = fake_install(tmp_path / "install")
    mine = tmp_path / "site" / "playbooks"
    (mine / "roles").mkdir(parents=True)
    (mine.parent / "roles").mkdir()
    env = ansible_paths(mine, shipped, {})
    assert env["ANSIBLE_ROLES_PATH"].split(":") == [
        str(mine / "roles"),
        str(mine.parent / "roles"),
        str(shipped.roles_dir),
    ]


def test_a_checkouts_runs_use_its_roles_and_the_usual_collections() -> None:
    env = ansible_paths(REPO / "playbooks", assets.locate(), {})
    assert env == {"ANSIBLE_ROLES_PATH": str(REPO / "roles")}


# Module, callback and plugin names (namespace.collection.name) in YAML and ansible.cfg, and
# collection imports (ansible_collections.namespace.collection) in Python.
FQCN = re.compile(r"\b((?:ansible|community|amazon|containers|kubernetes)\.[a-z0-9_]+)\.[a-z0-9_]+")
COLLECTION_IMPORT = re.compile(r"ansible_collections\.([a-z0-9_]+\.[a-z0-9_]+)")


@pytest.mark.parametrize("top", ["playbooks", "roles", "molecule", "inventory", "plugins", "ansible.cfg"])
def test_only_ansible_builtin_and_elb_cluster_are_used(top: str) -> None:
    files = [REPO / top] if (REPO / top).is_file() else [p for p in (REPO / top).rglob("*") if p.is_file()]
    used: set[str] = set()
    for path in files:
        if path.suffix == ".py":
            used |= set(COLLECTION_IMPORT.findall(path.read_text(encoding="utf-8")))
        elif path.suffix in {".yml", ".yaml", ".j2", ".cfg"}:
            used |= set(FQCN.findall(path.read_text(encoding="utf-8")))
    assert files
    assert used <= {"ansible.builtin", "elb.cluster"}, f"{top}: collections besides ansible-core's: {used}"


def test_plot_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None)
    assert main(["plot", "-c", str(config(tmp_path))]) == 1
    assert "pip install 'elb[plot]'" in capsys.readouterr().err
    assert main(["simulate", "no-such.swf", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'elb[plot]'" in capsys.readouterr().err
