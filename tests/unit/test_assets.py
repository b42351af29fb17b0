"""elb.core.assets in a checkout, the playbook checks of validate/run/once, the Ansible paths of a
run, the rule that the shipped Ansible content needs no collection besides ansible-core's, and
``elb monitoring`` (where the alert rules and the dashboard are, or a copy of them)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from elb.cli import monitoring
from elb.cli.main import main
from elb.cli.validate import check_playbooks
from elb.core import assets
from elb.core.config import parse_config
from elb.core.exitcodes import Exit
from elb.provision.ansible import DEFAULT_COLLECTIONS_PATHS, ansible_paths

REPO = Path(__file__).resolve().parents[2]


def config(tmp_path: Path, provision: str = "") -> Path:
    path = tmp_path / "elb.yml"
    # Tmp paths only: validate writes a probe file into the default /var/lib/elb/ansible when it exists.
    ansible = f"provision:\n  private_data_dir: {tmp_path / 'ansible'}\n"
    rest = provision.removeprefix("provision:\n")
    path.write_text(f"state_dir: {tmp_path / 'state'}\ncloud:\n  provider: local\n{ansible}{rest}")
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
    assert found.monitoring == REPO / "monitoring"
    assert all((found.monitoring / name).is_file() for name in assets.MONITORING)
    assert found.collections_path is None
    assert assets.playbook_dir_problem(None, ("add_node.yml", "slurm_add_node.yml")) is None


def test_a_missing_or_incomplete_playbook_dir_is_named(tmp_path: Path) -> None:
    plays = ("add.yml", "remove.yml")
    missing = tmp_path / "nowhere"
    assert assets.playbook_dir_problem(missing, plays) == f"provision.playbook_dir: {missing} is not a directory"
    (tmp_path / "add.yml").write_text("---\n")
    assert assets.playbook_dir_problem(tmp_path, plays) == f"provision.playbook_dir: {tmp_path} has no remove.yml"
    (tmp_path / "remove.yml").write_text("---\n")
    assert assets.playbook_dir_problem(tmp_path, plays) is None
    missing_admit = f"provision.playbook_dir: {tmp_path} has no admit.yml"
    assert assets.playbook_dir_problem(tmp_path, (*plays, "admit.yml")) == missing_admit


@pytest.mark.parametrize(
    ("scheduler", "plays", "boot_plays"),
    [
        ("sge", ("add_node.yml", "remove_node.yml"), ("admit_nodes.yml",)),
        ("slurm", ("slurm_add_node.yml", "slurm_remove_node.yml"), ("slurm_admit_nodes.yml",)),
    ],
)
def test_a_playbook_dir_needs_the_configured_schedulers_plays_only(
    tmp_path: Path, scheduler: str, plays: tuple[str, ...], boot_plays: tuple[str, ...]
) -> None:
    books = tmp_path / "books"
    books.mkdir()
    for name in plays:
        (books / name).write_text("---\n")
    cfg = parse_config({"scheduler": scheduler, "state_dir": str(tmp_path / "state"), "cloud": {"provider": "local"},
                        "slurm": {"requests": str(tmp_path)}, "provision": {"playbook_dir": str(books)}})  # fmt: skip
    first = next(check_playbooks(cfg))
    assert (first.what, first.ok, first.detail) == ("playbooks", True, str(books))
    boot = cfg.model_copy(update={"provision": cfg.provision.model_copy(update={"mode": "boot"})})
    first = next(check_playbooks(boot))
    assert (first.what, first.ok) == ("playbooks", False)
    assert first.detail == f"provision.playbook_dir: {books} has no {boot_plays[0]}"


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
    return assets.Assets(
        collection=collection, unit=root / "u", iam_policy=root / "p", monitoring=root / "m", installed=True
    )


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


ROLES = sorted(p for p in (REPO / "roles").iterdir() if p.is_dir())


def ansible_core_floor() -> Version:
    """The lowest ansible-core pyproject.toml allows (the collection's real requirement)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (spec,) = [Requirement(d).specifier for d in deps if Requirement(d).name == "ansible-core"]
    (floor,) = [Version(s.version) for s in spec if s.operator == ">="]
    return floor


def test_every_role_and_the_collection_need_the_ansible_core_elb_requires() -> None:
    floor = ansible_core_floor()
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    (lowest,) = [Version(s.version) for s in SpecifierSet(runtime["requires_ansible"]) if s.operator == ">="]
    assert lowest == floor
    assert ROLES
    for role in ROLES:
        meta = yaml.safe_load((role / "meta" / "main.yml").read_text(encoding="utf-8"))
        assert Version(str(meta["galaxy_info"]["min_ansible_version"])) == floor, role.name


def tasks_of(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every task of a task list, those in blocks too."""
    for item in items or []:
        yield item
        for key in ("block", "rescue", "always"):
            yield from tasks_of(item.get(key, []))


def notified(task: dict[str, Any]) -> set[str]:
    names = task.get("notify", [])
    return {names} if isinstance(names, str) else set(names)


@pytest.mark.parametrize("role", [r for r in ROLES if (r / "handlers" / "main.yml").is_file()], ids=lambda r: r.name)
def test_every_handler_is_notified(role: Path) -> None:
    handlers = yaml.safe_load((role / "handlers" / "main.yml").read_text(encoding="utf-8"))
    tasks = [t for f in sorted((role / "tasks").glob("*.yml")) for t in tasks_of(yaml.safe_load(f.read_text()))]
    sent = set().union(*(notified(t) for t in tasks))
    for handler in handlers:
        names = {handler["name"], *([handler["listen"]] if isinstance(handler.get("listen"), str) else [])}
        assert names & sent, f"{role.name}: handler {handler['name']!r} is never notified"


def _flattened(tasks_dir: Path, name: str) -> list[dict[str, object]]:
    """A task file's tasks with each ``include_tasks`` of the role replaced by its tasks, in order."""
    out: list[dict[str, object]] = []
    for task in yaml.safe_load((tasks_dir / name).read_text(encoding="utf-8")):
        included = task.get("ansible.builtin.include_tasks")
        out.extend(_flattened(tasks_dir, included) if isinstance(included, str) else [task])
    return out


def test_sge_exec_restarts_the_execd_when_its_package_or_directories_change() -> None:
    """The restart is flushed before the role looks for a running execd, so that one started
    with what changed is restarted and a stopped one is not started twice."""
    tasks = _flattened(REPO / "roles" / "sge_exec" / "tasks", "main.yml")
    names = [t["name"] for t in tasks]
    restarting = [t["name"] for t in tasks if "Restart the execution daemon" in notified(t)]
    assert restarting == [
        "Install the SGE execution daemon",
        "Create the execd's pid file directory",
        "Create the execd spool directory",
    ]
    (flush,) = [i for i, t in enumerate(tasks) if t.get("ansible.builtin.meta") == "flush_handlers"]
    assert max(names.index(n) for n in restarting) < flush < names.index("Look for a running execution daemon")


def test_plot_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # what elb.core.extras asks
    assert main(["plot", "-c", str(config(tmp_path))]) == 1
    assert "pip install 'elb[plot]'" in capsys.readouterr().err
    assert main(["simulate", "no-such.swf", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'elb[plot]'" in capsys.readouterr().err


def test_elb_monitoring_prints_where_the_rules_and_the_dashboard_are(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitoring"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        str(REPO / "monitoring" / "elb-alerts.yml"),
        str(REPO / "monitoring" / "elb-dashboard.json"),
    ]
    assert main(["monitoring", "--path"]) == 0
    assert capsys.readouterr().out == f"{REPO / 'monitoring'}\n"


def test_elb_monitoring_copies_them_and_keeps_a_file_that_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "prometheus" / "elb"
    assert main(["monitoring", "--copy", str(target)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(target / n) for n in assets.MONITORING]
    for name in assets.MONITORING:
        assert (target / name).read_bytes() == (REPO / "monitoring" / name).read_bytes()
    assert main(["monitoring", "--copy", str(target)]) == 0  # the same files again: nothing to keep
    capsys.readouterr()
    edited = target / "elb-alerts.yml"
    edited.write_text("# the admin's own rules\n")
    (target / "elb-dashboard.json").unlink()
    assert main(["monitoring", "--copy", str(target)]) == Exit.FAILED
    err = capsys.readouterr().err
    assert f"{edited}: differs from the shipped file, kept (--force replaces it)" in err
    assert edited.read_text() == "# the admin's own rules\n"
    assert not (target / "elb-dashboard.json").exists()  # checked before anything was written
    assert main(["monitoring", "--copy", str(target), "--force"]) == 0
    assert edited.read_bytes() == (REPO / "monitoring" / "elb-alerts.yml").read_bytes()
    assert (target / "elb-dashboard.json").is_file()


def test_elb_monitoring_names_missing_files_and_an_unwritable_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["monitoring", "--copy", str(blocker / "sub")]) == Exit.FAILED
    assert f"elb: monitoring: cannot copy into {blocker / 'sub'}:" in capsys.readouterr().err
    shipped = fake_install(tmp_path)
    monkeypatch.setattr(monitoring, "locate", lambda: shipped)
    assert main(["monitoring"]) == Exit.FAILED
    err = capsys.readouterr().err
    assert err == f"elb: monitoring: {tmp_path / 'm'} has no elb-alerts.yml and no elb-dashboard.json (reinstall elb)\n"


def test_every_package_install_runs_only_when_dpkg_query_lacks_a_package() -> None:
    """The apt module loads the package cache (seconds a node on every bring-up): each role's apt
    task runs only when its dpkg-query, a light read in the same task file, does not show every
    package installed."""
    installs = 0
    for tasks_file in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        tasks = list(tasks_of(yaml.safe_load(tasks_file.read_text(encoding="utf-8")) or []))
        for k, task in enumerate(tasks):
            if "ansible.builtin.apt" not in task:
                continue
            installs += 1
            names = task["ansible.builtin.apt"]["name"]
            reads = [
                t["register"]
                for t in tasks[:k]
                if "dpkg-query" in str(t.get("ansible.builtin.command", "")) and names.strip("{} ") in str(t)
            ]
            assert reads, f"{tasks_file.relative_to(REPO)}: {task['name']!r} has no dpkg-query before it"
            assert reads[-1] in str(task.get("when", "")), f"{task['name']!r} runs whatever dpkg-query said"
    assert installs >= 5  # nfs_client, sge_exec, munge, slurm_node, spot_agent
