"""A node's exports lines live inside its hosts lines' life, in every playbook.

On a master served by nfs-ganesha, ``elb_export_lines`` makes ganesha's include file from the
whole exports file, each client by the address the master's ``/etc/hosts`` gives it, on every
run, whichever nodes the run is for. A hosts line removed while the node's exports line stays
changes what the next run makes, so the next play that runs the task for other nodes (another
node's bring-up, elb's next pass, a second run checking idempotence) finds it changed and
reloads ganesha with a bare name it cannot resolve. Added, the hosts line comes first; taken
out, the exports go first: then no step of one play changes another's run.

Each playbook's steps are read from its YAML (its roles, tasks, blocks and rescues, with the
state each step's vars give), and played on a model of the master's two files with the
module's own edit and ganesha functions: after every step, what a run for another node would
make must be what the last run made."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit import role_modules

M = role_modules.load("nfs_server", "elb_export_lines")
PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
ROLES = {"etc_hosts": "etc_hosts_state", "nfs_server": "nfs_server_state"}
DIRS = ["/home"]
NODE, OTHER = "node007", "node001"


def _step(task: Mapping[str, Any]) -> tuple[str, str] | None:
    """(role, state) of a task or roles entry that imports or includes etc_hosts or nfs_server."""
    role = task.get("role")
    for key in ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role"):
        if key in task:
            role = task[key].get("name")
    if role not in ROLES:
        return None
    state = (task.get("vars") or {}).get(ROLES[role], "present")
    return str(role), str(state)


def _runs(tasks: list[Mapping[str, Any]]) -> Iterator[list[tuple[str, str]]]:
    """Each sequence of steps that ``tasks`` can run: straight through, and for every block with
    a rescue, the block up to each of its steps (where it may fail) followed by the rescue."""
    straight: list[tuple[str, str]] = []
    for task in tasks:
        if "block" in task:
            inner = list(_runs(task["block"]))
            body = inner[0]
            for other in inner[1:]:
                yield straight + other
            if "rescue" in task:
                rescue = next(_runs(task["rescue"]))
                for cut in range(len(body) + 1):
                    yield straight + body[:cut] + rescue
            straight += body
            continue
        step = _step(task)
        if step is not None:
            straight.append(step)
    yield straight


def playbook_runs() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        for n, play in enumerate(yaml.safe_load(path.read_text()) or []):
            tasks = [{"role": r} if isinstance(r, str) else r for r in play.get("roles", [])]
            tasks += play.get("pre_tasks", []) + play.get("tasks", []) + play.get("post_tasks", [])
            for run in _runs(tasks):
                if run:
                    yield f"{path.name} play {n + 1}", run


RUNS = list(playbook_runs())


class Master:
    """The master's /etc/hosts (names to addresses) and /etc/exports, and ganesha's include file
    as the module's last run left it."""

    def __init__(self, node_in: bool) -> None:
        self.hosts = {OTHER: "10.0.0.1"} | ({NODE: "10.0.0.7"} if node_in else {})
        exports = b"".join(f"{d} {h}(rw)\n".encode() for h in self.hosts for d in DIRS)
        self.exports = exports
        self.ganesha = self.made()

    def made(self) -> str:
        """What a run of the module makes of the two files now."""
        return str(M.ganesha_exports(M.parse_exports(self.exports.decode()), lambda h: self.hosts.get(h, h)))

    def play(self, role: str, state: str) -> None:
        if role == "etc_hosts":
            if state == "present":
                self.hosts[NODE] = "10.0.0.7"
            else:
                self.hosts.pop(NODE, None)
            return
        self.exports, _ = M.edit(self.exports, [NODE], DIRS, "rw", state)
        self.ganesha = self.made()


def test_every_removal_and_addition_is_read() -> None:
    """The reader finds the steps the playbooks have (a reader that found none would pass)."""
    names = {name.split()[0] for name, _ in RUNS}
    assert {"add_node.yml", "remove_node.yml", "slurm_add_node.yml", "slurm_remove_node.yml"} <= names
    assert {"site.yml", "slurm_site.yml", "admit_nodes.yml", "slurm_admit_nodes.yml"} <= names
    states = {step for _, run in RUNS for step in run}
    assert states == {(r, s) for r in ROLES for s in ("present", "absent")}


@pytest.mark.parametrize(("name", "run"), RUNS, ids=[f"{n}:{i}" for i, (n, _) in enumerate(RUNS)])
def test_no_step_changes_what_another_run_makes(name: str, run: list[tuple[str, str]]) -> None:
    master = Master(node_in=run[0][1] == "absent")
    for i, (role, state) in enumerate(run):
        master.play(role, state)
        assert master.made() == master.ganesha, (
            f"{name}: after step {i + 1} ({role} {state}) of {run}, another node's export task would "
            f"find ganesha's file changed: the exports name a node the hosts file no longer maps"
        )


def test_the_model_sees_hosts_removed_first() -> None:
    """The hosts lines taken out before the exports: the next run for another node changes."""
    master = Master(node_in=True)
    master.play("etc_hosts", "absent")
    assert master.made() != master.ganesha
