"""Playbooks a killed elb left running are stopped by the next elb, before it touches a node."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from elb.core.config import parse_config
from elb.provision.proctree import RunRecords, descendants, start_time
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import T0
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge


def _playbook_like(marker: str) -> subprocess.Popen[bytes]:
    """A process in a session of its own (as ansible-playbook under pexpect) with a child, whose
    command line holds ``marker``."""
    child = "import time; time.sleep(300)"
    code = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(300)"
    proc = subprocess.Popen([sys.executable, "-c", code, marker], start_new_session=True)
    while not descendants(proc.pid):  # its child has started
        time.sleep(0.05)
    return proc


def _state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2]


def _dead_owner() -> tuple[int, int]:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid, 12345  # gone (and a start time no live process of that pid has)


def test_a_run_whose_owner_is_gone_is_stopped_with_its_children(tmp_path: Path) -> None:
    marker = str(tmp_path / "artifacts" / "20260101T000000-add_node-abc")
    proc = _playbook_like(marker)
    try:
        records = RunRecords(tmp_path / "running")
        path = records.start("run1", marker)
        owner, start = _dead_owner()
        rec = json.loads(path.read_text())
        path.write_text(json.dumps({**rec, "owner": owner, "owner_start": start}))
        (child,) = descendants(proc.pid)
        assert records.reap() == [(marker, 2)]  # the run and its child
        assert proc.wait() != 0  # killed
        while _state(child) not in ("Z", "X", None):  # SIGKILL lands a moment later: dead, or gone
            time.sleep(0.05)
        assert not path.exists()
    finally:
        proc.kill()


def test_a_run_of_a_live_owner_is_left_alone(tmp_path: Path) -> None:
    marker = str(tmp_path / "artifacts" / "20260101T000000-add_node-def")
    proc = _playbook_like(marker)
    try:
        records = RunRecords(tmp_path / "running")
        path = records.start("run2", marker)  # owned by this (live) test process
        assert records.reap() == []
        assert proc.poll() is None and path.exists()
        assert start_time(proc.pid) is not None
    finally:
        proc.kill()
        proc.wait()


def test_a_balancer_stops_leftover_playbooks_before_its_first_pass(tmp_path: Path) -> None:
    class Reaping(FakeProvisioner):
        reaped = 0

        def reap_leftovers(self) -> int:
            self.reaped += 1
            return 0

    cfg = parse_config({"state_dir": str(tmp_path)})
    sge = FakeSge(T0)
    prov = Reaping(sge)
    Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=Journal(cfg.journal_path), cloud=FakeCloud(T0), provisioner=prov
    )
    assert prov.reaped == 1 and prov.log == []
