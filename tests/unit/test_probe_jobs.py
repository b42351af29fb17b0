"""``AnsibleProvisioner.probe_jobs``: a node's own answer about job processes, without SSH here.

What the probe run's per-host results mean (``witness_of``), that a node whose host key elb does
not hold is never contacted (its key is never pinned by a probe), that the run is one for all the
nodes asked and bounded in time, and that the shipped playbook asks ``pgrep`` for the processes
of Grid Engine's and Slurm's jobs and reports them with ``elb_busy``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from elb.core import assets
from elb.core.config import ClusterConfig, ProvisionConfig
from elb.core.interfaces import HostResult, JobProcesses, NodeSpec, Outcome
from elb.provision import AnsibleProvisioner
from elb.provision.ansible import PROBE_PLAYBOOK, PROBE_TIMEOUT, RunReport, witness_of
from elb.provision.hostkeys import HostKeys


def provisioner(tmp_path: Path, timeout: float = 900.0) -> AnsibleProvisioner:
    # A playbook directory of one's own without the probe: the shipped one is run.
    cfg = ProvisionConfig(private_data_dir=tmp_path / "pdd", timeout=timeout, playbook_dir=tmp_path)
    return AnsibleProvisioner(cfg, ClusterConfig())


def test_what_each_result_of_the_probe_means() -> None:
    found = witness_of("node001", HostResult("node001", Outcome.BUSY))
    assert found.answer is JobProcesses.FOUND
    assert witness_of("node001", HostResult("node001", Outcome.OK)).answer is JobProcesses.NONE
    unreachable = witness_of("node001", HostResult("node001", Outcome.UNREACHABLE, "List", "No route to host"))
    assert unreachable.answer is JobProcesses.UNKNOWN
    assert unreachable.detail == "unreachable at task 'List': No route to host"
    failed = witness_of("node001", HostResult("node001", Outcome.FAILED, None, "refused: the SSH host key ..."))
    assert failed.answer is JobProcesses.UNKNOWN and failed.detail.startswith("failed: refused")
    assert witness_of("node001", None).answer is JobProcesses.UNKNOWN


def test_one_bounded_run_for_the_nodes_whose_key_elb_holds_and_none_for_the_others(tmp_path: Path) -> None:
    prov = provisioner(tmp_path)
    HostKeys(prov.config.host_keys_path).issue("node001")
    HostKeys(prov.config.host_keys_path).issue("node002")
    runs: list[dict[str, Any]] = []

    def run(playbook: str, **kw: Any) -> RunReport:
        runs.append({"playbook": playbook, **kw})
        results = {"node001": HostResult("node001", Outcome.BUSY), "node002": HostResult("node002", Outcome.OK)}
        return RunReport(playbook, "x", "successful", 0, None, 1.0, results)

    prov.run = run  # type: ignore[method-assign]
    nodes = [NodeSpec("node001", "10.0.0.1"), NodeSpec("node002", "10.0.0.2"), NodeSpec("node003", "10.0.0.3")]
    answers = prov.probe_jobs(nodes)
    assert {n: w.answer for n, w in answers.items()} == {
        "node001": JobProcesses.FOUND,
        "node002": JobProcesses.NONE,
        "node003": JobProcesses.UNKNOWN,
    }
    assert answers["node003"].detail.startswith("no SSH host key held for it in ")
    assert len(runs) == 1
    assert runs[0]["playbook"] == str(assets.default_playbook_dir() / PROBE_PLAYBOOK)
    assert [n.name for n in runs[0]["old_nodes"]] == ["node001", "node002"]
    assert runs[0]["pin"] is False and runs[0]["timeout"] == PROBE_TIMEOUT
    assert not HostKeys(prov.config.host_keys_path).known("node003")  # never pinned


def test_no_run_when_no_key_is_held_and_the_time_limit_never_exceeds_provision_timeout(tmp_path: Path) -> None:
    prov = provisioner(tmp_path, timeout=10.0)
    prov.run = lambda *a, **kw: (_ for _ in ()).throw(AssertionError("no run"))  # type: ignore[method-assign]
    answers = prov.probe_jobs([NodeSpec("node001", "10.0.0.1")])
    assert answers["node001"].answer is JobProcesses.UNKNOWN
    HostKeys(prov.config.host_keys_path).issue("node001")
    seen: list[float] = []

    def run(playbook: str, **kw: Any) -> RunReport:
        seen.append(kw["timeout"])
        return RunReport(playbook, "x", "timeout", None, None, 10.0, {})

    prov.run = run  # type: ignore[method-assign]
    assert prov.probe_jobs([NodeSpec("node001", "10.0.0.1")])["node001"].answer is JobProcesses.UNKNOWN
    assert seen == [10.0]


def test_the_shipped_probe_asks_pgrep_for_the_job_processes_and_reports_them_busy() -> None:
    play = yaml.safe_load((assets.locate().playbook_dir / PROBE_PLAYBOOK).read_text())
    assert [p["hosts"] for p in play] == ["old_nodes"]
    tasks = play[0]["tasks"]
    assert tasks[0]["ansible.builtin.command"]["argv"] == ["pgrep", "-a", "-x", "sge_shepherd|slurmstepd"]
    assert tasks[1]["ansible.builtin.set_stats"]["data"] == {"elb_busy": ["{{ inventory_hostname }}"]}


def test_the_shipped_probe_run_for_real_finds_a_job_process(tmp_path: Path) -> None:
    """One real ansible-playbook run of the probe, on this machine (a local connection in place
    of SSH): a process named sge_shepherd runs here, so the node answers "found"."""
    shepherd = tmp_path / "sge_shepherd"
    shutil.copy("/bin/sleep", shepherd)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    cfg = ProvisionConfig(private_data_dir=tmp_path / "pdd", timeout=120, extra_vars=local)
    prov = AnsibleProvisioner(cfg, ClusterConfig(master="localhost"))
    HostKeys(cfg.host_keys_path).issue("node001")
    proc = subprocess.Popen([str(shepherd), "60"])
    try:
        answer = prov.probe_jobs([NodeSpec("node001", "127.0.0.1")])["node001"]
    finally:
        proc.kill()
        proc.wait()
    assert answer.answer is JobProcesses.FOUND, answer
