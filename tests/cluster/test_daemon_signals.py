"""``elb run`` stopped by SIGTERM in the middle of adding and of removing a node.

The real daemon (``python -m elb run``) on the test cluster: real SGE, podman nodes through
LocalCloud, real Ansible. The signal goes to elb's process group, as Ctrl-C in a terminal does;
ansible-playbook runs in a session of its own (runner's pty), as under systemd with
``KillMode=mixed`` only elb gets it. What must hold:

- one SIGTERM: the node operation under way finishes (the node ends ready, or removed and
  terminated), no new pass or operation starts, elb exits 0, and journal, cloud and SGE agree;
- a second SIGTERM: the running playbook is cancelled, elb exits promptly, and the next start
  repairs what was left (the journal knows what was in flight).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from elb.core.config import Config
from elb.core.drivers import cloud_settings
from elb.core.model import NodeState
from elb.service.journal import Journal
from elbdev.testcluster.cluster import REPO_ROOT, TestCluster
from tests.cluster.helpers import cluster_state
from tests.faults.support import (
    balancer,
    clean_up,
    converged,
    disagreements,
    fault_config,
    job_hosts,
    passes_until,
    reset_job_outputs,
    submit_jobs,
    write_config,
)

pytestmark = pytest.mark.cluster


class ElbRun:
    """``python -m elb run --config CFG`` in a session of its own, output to a file."""

    def __init__(self, cfg_path: Path, log_path: Path) -> None:
        self.log_path = log_path
        with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "elb", "run", "--config", str(cfg_path)],
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def signal(self) -> float:
        os.killpg(self.proc.pid, signal.SIGTERM)
        return time.time()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"elb run did not stop within {timeout:g} s:\n{self.output()[-3000:]}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def output(self) -> str:
        return self.log_path.read_text()


def wait_for_state(journal_path: Path, run: ElbRun, state: NodeState, timeout: float, since: float = 0.0) -> str:
    """Wait until elb's journal records a node entering ``state`` (at ``since`` or later); that
    node's name."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.proc.poll() is None, f"elb run exited early:\n{run.output()[-3000:]}"
        if journal_path.exists():
            j = Journal(journal_path)
            try:
                hits = [e.node for e in j.events() if e.state is state and e.time >= since]
            finally:
                j.close()
            if hits:
                return hits[-1]
        time.sleep(0.2)
    raise AssertionError(f"no node reached {state.value} in {timeout:g} s:\n{run.output()[-3000:]}")


def journal_after(journal_path: Path, node: str, since: float) -> tuple[list[NodeState], list[float]]:
    """The node's steps recorded after ``since``, and the start times of every recorded pass."""
    j = Journal(journal_path)
    try:
        steps = [e.state for e in j.events(node) if e.time >= since]
        passes = [p.time for p in j.passes()]
    finally:
        j.close()
    return steps, passes


def history(journal_path: Path, node: str) -> list[str]:
    """The node's recorded steps with their times and details, for a failure's message."""
    j = Journal(journal_path)
    try:
        return [f"{e.time:.2f} {e.state.value}: {e.detail or ''}" for e in j.events(node)]
    finally:
        j.close()


def _started_before(passes: list[float], signalled: float) -> bool:
    """No pass started after the signal. A pass is recorded at the time of its SGE read, and
    passes are short (node operations run in the background), so the one under way when the
    signal came may be recorded just after it: at most that one."""
    return sum(1 for t in passes if t >= signalled) <= 1


@dataclass
class Setting:
    tc: TestCluster
    cfg: Config
    cfg_path: Path
    baseline: dict[str, object]
    tmp: Path


@pytest.fixture
def setting(testcluster: TestCluster, tmp_path: Path) -> Iterator[Setting]:
    """A short-timescale config; afterwards elb removes what is left and the cluster is as before."""
    reset_job_outputs()
    baseline = cluster_state(testcluster)
    cfg = fault_config(tmp_path, idle_time=600)
    try:
        yield Setting(testcluster, cfg, write_config(cfg, tmp_path / "elb.yml"), baseline, tmp_path)
    finally:
        clean_up(testcluster, cfg, baseline)


def run_until_provisioning(s: Setting, name: str) -> tuple[list[str], ElbRun, str]:
    """A job waits; ``elb run`` starts, adds a node and is a few seconds into its provisioning play."""
    jobs = submit_jobs(s.tc, 1, sleep=1, name=name)
    time.sleep(1.5)
    run = ElbRun(s.cfg_path, s.tmp / f"{name}.log")
    node = wait_for_state(s.cfg.journal_path, run, NodeState.PROVISIONING, 120)
    time.sleep(3)  # well into the play (it takes half a minute or more)
    return jobs, run, node


def test_sigterm_mid_add_and_mid_removal_finishes_the_node_then_stops(setting: Setting) -> None:
    s, tc, cfg = setting, setting.tc, setting.cfg
    baseline = s.baseline

    # 1. SIGTERM while the provisioning play runs.
    jobs, run, node = run_until_provisioning(s, "term")
    signalled = run.signal()
    assert run.wait(600) == 0, run.output()[-3000:]
    steps, passes = journal_after(cfg.journal_path, node, signalled)
    assert steps == [NodeState.READY], f"after SIGTERM {node} went through {steps}, not straight to ready"
    assert passes and _started_before(passes, signalled), "a pass started after the signal"
    out = run.output()
    assert "stopping after the current step" in out and "elb stopped" in out, out[-3000:]
    bal = balancer(cfg)  # the three views agree: a ready node, in SGE, hosts and exports
    assert converged(tc, bal, baseline) == []
    bal.journal.close()
    deadline = time.monotonic() + 90
    while set(job_hosts(jobs)) != set(jobs):
        assert time.monotonic() < deadline, "the job never ran on the node elb added"
        time.sleep(0.5)
    assert job_hosts(jobs) == {jobs[0]: node}

    # 2. SIGTERM as soon as the removal starts (drain, then the deregistration play). A removal
    # elb calls off itself for safety (the node kept, ready: the drain's re-read saw a job or a
    # reservation, or the node's own word was "busy" or nothing) is no removal left half done:
    # elb is started once more and signalled at its next drain. A drain command that failed is
    # no such keep (the signal must not be what broke it).
    cfg2 = cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"idle_time": 2.0})})
    for attempt in range(2):
        run = ElbRun(write_config(cfg2, s.tmp / "elb-shrink.yml"), s.tmp / f"shrink{attempt}.log")
        assert wait_for_state(cfg.journal_path, run, NodeState.DRAINING, 120, since=time.time()) == node
        signalled = run.signal()
        assert run.wait(600) == 0, run.output()[-3000:]
        steps, passes = journal_after(cfg.journal_path, node, signalled)
        said = history(cfg.journal_path, node)[-1]
        if attempt == 0 and steps[-1] is NodeState.READY and "kept: " in said and "drain failed" not in said:
            print(f"\nthe removal under SIGTERM was called off for safety ({said}); elb started again")
            continue
        break
    assert steps[-1] is NodeState.TERMINATED, (
        f"after SIGTERM {node} went through {steps}: {history(cfg.journal_path, node)}\n{run.output()[-4000:]}"
    )
    assert _started_before(passes, signalled), "a pass started after the signal"
    assert tc.cloud().list_workers() == []
    assert cluster_state(tc) == baseline
    bal = balancer(cfg2)
    assert bal.journal.nodes() == [] and disagreements(tc, bal.journal, baseline) == []
    bal.journal.close()


def test_second_sigterm_cancels_the_play_and_the_next_start_repairs(setting: Setting) -> None:
    s, tc, cfg = setting, setting.tc, setting.cfg
    jobs, run, node = run_until_provisioning(s, "term2")
    run.signal()
    time.sleep(1)
    cancelled = run.signal()
    assert run.wait(120) == 0, run.output()[-3000:]
    stopped_after = time.time() - cancelled
    out = run.output()
    assert "second signal: cancelling running provisioning" in out, out[-3000:]
    steps, _ = journal_after(cfg.journal_path, node, cancelled)
    assert NodeState.READY not in steps, f"the play was not cancelled: {node} went through {steps}"

    # elb starts again: the journal says what was in flight; reconcile cleans the node up and
    # the job, still waiting, gets a node that serves it.
    bal = balancer(cfg)
    passes = passes_until(
        bal,
        "the restarted elb to converge and run the job",
        lambda _: set(job_hosts(jobs)) == set(jobs) and not converged(tc, bal, s.baseline),
        cloud_settings(cfg).boot_timeout + 240,
    )
    repairs = [x for p in passes for x in p.outcomes.repaired]
    assert any(r.startswith(f"{node}:") for r in repairs), [p.summary() for p in passes]
    print(f"\nsecond SIGTERM: elb exited {stopped_after:.1f} s after it; repairs on restart: {repairs}")
    bal.journal.close()
