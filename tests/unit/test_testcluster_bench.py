"""The burst benchmark's count of where an add play's module runs ran (no cluster: the Ansible
callback is driven with stand-ins for Ansible's host, task and result objects)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from elbdev.testcluster.bench import (
    CALLBACKS,
    Measured,
    Split,
    cpu_floor,
    on_paper,
    read_split,
    report_slurm_master_part,
)


@dataclass
class Host:
    name: str
    vars: dict[str, str] = field(default_factory=dict)

    def get_name(self) -> str:
        return self.name


@dataclass
class Task:
    _uuid: str
    action: str
    delegate_to: str | None = None

    def get_name(self) -> str:
        return f"task {self._uuid}"


@dataclass
class Result:
    _host: Host
    _task: Task


def callback() -> ModuleType:
    spec = importlib.util.spec_from_file_location("elbdev_task_split", CALLBACKS / "elbdev_task_split.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_module_runs_are_counted_where_they_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "split.jsonl"
    monkeypatch.setenv("ELBDEV_TASK_SPLIT", str(out))
    cb = callback().CallbackModule()
    master = Host("master", {"ansible_connection": "local"})
    node = Host("node001")
    runs = [
        (node, Task("1", "ansible.builtin.lineinfile"), "ok"),  # on the node
        (node, Task("2", "ansible.builtin.command", delegate_to="master"), "ok"),  # delegated
        (master, Task("3", "ansible.builtin.command"), "failed"),  # the master itself
        (node, Task("4", "ansible.builtin.set_fact"), "ok"),  # bookkeeping: no module
        (node, Task("5", "ansible.builtin.mount"), "skipped"),  # no module ran
        (node, Task("6", "ansible.builtin.copy"), "unreachable"),
    ]
    for host, task, outcome in runs:
        cb.v2_runner_on_start(host, task)
        getattr(cb, f"v2_runner_on_{outcome}")(Result(host, task))
    cb.v2_playbook_on_stats(None)
    split = read_split(out)
    assert (split.master_runs, split.node_runs) == (2, 2)
    assert split.master_share == 0.5
    assert split.node_seconds >= 0


def test_the_last_play_run_is_read(tmp_path: Path) -> None:
    out = tmp_path / "split.jsonl"
    out.write_text(
        '[{"where": "node", "seconds": 9}]\n'
        '[{"where": "master", "seconds": 1}, {"where": "node", "seconds": 2}, {"where": "node", "seconds": 3}]\n'
    )
    split = read_split(out)
    assert (split.master_runs, split.node_runs, split.node_seconds) == (1, 2, 5.0)
    assert split.master_share == pytest.approx(1 / 3)


def test_the_cpu_floor_puts_the_bursts_whole_cpu_over_the_cores(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    # 16 nodes: the master 16 s and the nodes 96 s of CPU, over 2 cores at least 56 s: 5.6x the
    # one-node burst's 10 s, against a measured 6x.
    cpu_floor("push", {1: 5.0, 16: 16.0}, {1: 4.0, 16: 96.0}, {1: 10.0, 16: 60.0})
    out = capsys.readouterr().out
    assert "16 node(s): master 1.0 s + nodes 6.0 s a node; at best 56.0 s on 2 cores = 5.60x" in out
    assert "(measured 6.00x)" in out
    assert "<= 2.0x: out of reach on this machine" in out
    # Little CPU a node: the target is within reach; an unreadable size is said as such.
    cpu_floor("at boot", {1: 1.0, 16: 4.0}, {1: 1.0, 16: None}, {1: 10.0, 16: 15.0})
    out = capsys.readouterr().out
    assert "16 node(s): the node containers' CPU could not be read" in out
    assert "target" not in out
    cpu_floor("at boot", {1: 1.0, 16: 4.0}, {1: 1.0, 16: 16.0}, {1: 10.0, 16: 15.0})
    assert "<= 2.0x: within reach" in capsys.readouterr().out


def test_the_rough_estimate_at_boot_from_the_push_gives_way_to_the_measured_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    figures = {"add_node.yml for 1 node(s) in one run": 14.0, "add_node.yml for 16 node(s) in one run": 59.0}
    splits = {1: Split(8, 17, 9.0), 16: Split(8, 256, 680.0)}
    m = Measured(figures, {1: 7.0, 16: 32.0}, splits)
    on_paper(m, 1, 16)
    out = capsys.readouterr().out
    # the push: 11 s + 3 s a node; 100 nodes 311 s (5.2 min), the CPU floor 2 s a node over 2 cores
    assert "line through the points: 11 s + 3.0 s a node" in out
    assert "100 nodes:    5.2 min (line 5.2, CPU floor 1.7)" in out
    assert "roughly, on paper (node-side roles at boot" in out
    m.boot_total = {1: 14.0, 16: 117.0}
    on_paper(m, 1, 16)
    out = capsys.readouterr().out
    assert "line through the points" in out
    assert "roughly" not in out


def test_slurms_master_part_is_reported_with_the_16_node_ratio_beside_its_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parts = ("addresses", "admit play", "drains", "remove play", "power down")
    rows = {n: dict.fromkeys(parts, (4.0 + 0.1 * n, 0.2 * n)) for n in (1, 16, 100)}
    report_slurm_master_part(rows)
    out = capsys.readouterr().out
    assert "16 nodes / 1: 1.37x (target <= 2.0: met)" in out  # (2 x 5.6) / (2 x 4.1)
    assert "munge key's write" in out
