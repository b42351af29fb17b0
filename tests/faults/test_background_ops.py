"""Node operations off the polling loop, on the test cluster (real SGE, podman nodes, Ansible):

1. provisioning fails for every new node, pass after pass: launches stay bounded by the back-off
   (a batch, then one probe per doubling wait), and nothing is left running;
2. a provisioning that takes minutes does not delay the removal of another node that is due.

The balancer runs as ``elb run`` runs it: node operations on a background ``Executor``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from elb.core.assets import default_playbook_dir
from elb.core.config import Config
from elb.core.model import NodeState
from elb.provision.ansible import AnsibleProvisioner
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.executor import Executor
from elb.service.passrecord import PassResult
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state
from tests.faults.support import (
    BATCH_BOOT_TIMEOUT,
    balancer,
    clean_up,
    converged,
    fault_config,
    submit_jobs,
    with_backoff,
)

pytestmark = [pytest.mark.cluster, pytest.mark.faults]

FAILING_ADD = """---
- name: Injected provisioning failure (fault test)
  hosts: new_nodes
  gather_facts: false
  tasks:
    - name: Fail every new node
      ansible.builtin.fail:
        msg: injected provisioning failure
"""

SLOW_FIRST = """---
- name: Slow provisioning (fault test)
  hosts: new_nodes
  gather_facts: false
  tasks:
    - name: Pause before provisioning
      ansible.builtin.pause:
        seconds: {seconds}

"""


def figures(test: str, **values: object) -> None:
    print(f"\nFIGURES {json.dumps({'test': test, **values})}")


def playbooks_copy(tmp: Path, add_node: str) -> Path:
    """The shipped playbooks with ``add_node.yml`` replaced by ``add_node`` (its roles alongside)."""
    src = default_playbook_dir()
    dst = tmp / "project" / "playbooks"
    shutil.copytree(src, dst)
    for extra in ("roles", "plugins"):  # and the project's ansible.cfg: runner's cwd is the project
        if (src.parent / extra).is_dir():
            shutil.copytree(src.parent / extra, dst.parent / extra)
    if (src.parent / "ansible.cfg").is_file():
        shutil.copy(src.parent / "ansible.cfg", dst.parent / "ansible.cfg")
    (dst / "add_node.yml").write_text(add_node)
    return dst


def with_playbooks(cfg: Config, playbook_dir: Path) -> Config:
    return cfg.model_copy(update={"provision": cfg.provision.model_copy(update={"playbook_dir": playbook_dir})})


def in_background(bal: Balancer) -> Executor:
    bal.executor = Executor()
    return bal.executor


# The back-off test's passes run until the back-off reached BACKOFF_ROUNDS failed rounds in a row
# (each doubling the wait, from BACKOFF_INITIAL), at most BACKOFF_WINDOW seconds: without back-off
# every pass with a free slot launches a batch, one a play's length, far past the bound by then. The
# initial wait is short so that the rounds come within a few plays; their number, not their length,
# is what the test checks.
BACKOFF_INITIAL = 2.0
BACKOFF_ROUNDS = 3
BACKOFF_WINDOW = 90.0


def run_passes(bal: Balancer, seconds: float, until: Callable[[], bool]) -> list[PassResult]:
    """Passes every poll interval until ``until`` holds after one, or for ``seconds``."""
    results = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        results.append(bal.run_pass())
        if until():
            break
        time.sleep(bal.config.poll_interval)
    return results


def test_provisioning_failing_for_every_node_launches_a_bounded_number(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    cfg = fault_config(
        tmp_path,
        boot_timeout=BATCH_BOOT_TIMEOUT,
        max_nodes=3,
        add_nodes_per_iteration=3,
        slots_per_node=1,
        idle_time=600,
    )
    cfg = with_backoff(with_playbooks(cfg, playbooks_copy(tmp_path, FAILING_ADD)), BACKOFF_INITIAL)
    bal = balancer(cfg)
    ex = in_background(bal)
    t0 = time.monotonic()
    try:
        submit_jobs(tc, 6, sleep=1, name="backoff")
        time.sleep(1.5)
        results = run_passes(bal, BACKOFF_WINDOW, lambda: bal.last.backoff_rounds >= BACKOFF_ROUNDS)
        ex.shutdown()
        seconds = time.monotonic() - t0
        events = bal.journal.events()
        launches = sum(1 for e in events if e.state is NodeState.REQUESTED)
        failed = sum(1 for e in events if e.state is NodeState.FAILED)
        rounds = bal.last.backoff_rounds
        # Without back-off every pass with a free slot under max_nodes launches: with 1 s polls and
        # the background executor, a new batch of 3 as soon as the last one is cleaned up.
        assert launches <= 3 + rounds, (launches, rounds)
        assert rounds >= 2, rounds
        assert not [r for r in results if not r.ok], [r.summary() for r in results if not r.ok]
        tc.master_run(["qdel", "-f", "-u", "*"], check=False)  # nothing waits: no further probe
        bal.executor = Executor(inline=True)
        bal.run_pass()  # journal, cloud and SGE agree: every failed node terminated
        assert tc.cloud().list_workers() == [], "a failed node was left running"
        assert [n.name for n in bal.journal.nodes()] == []
        assert converged(tc, bal, baseline) == []
        figures(
            "provisioning_always_fails",
            passes=len(results),
            launches=launches,
            failed=failed,
            backoff_rounds=rounds,
            seconds=round(seconds, 1),
        )
    finally:
        bal.journal.close()
        tc.master_run(["qdel", "-f", "-u", "*"], check=False)
        clean_up(tc, cfg, baseline)


def test_slow_provisioning_does_not_delay_a_due_removal(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    cfg = fault_config(tmp_path, max_nodes=2, slots_per_node=1, idle_time=3)
    bal = balancer(cfg)
    try:
        # node A: added with the shipped playbooks, runs a job, then a long job keeps it busy
        jobs = submit_jobs(tc, 1, sleep=20, name="busy")
        time.sleep(1.5)
        first = None
        while first is None:
            r = bal.run_pass()
            assert r.ok, r.summary()
            first = r.outcomes.added[0] if r.outcomes.added else None
            time.sleep(1)
        # Node A has the one slot configured: SGE cannot start the waiting job beside the busy one.
        assert isinstance(bal.scheduler, GridEngine)
        host = next(h for h in bal.scheduler.sge.read_snapshot().hosts if h.name == first)
        assert host.slots_total == 1, host
        bal.journal.close()

        # elb restarts with a provisioning play that pauses for minutes; a job waits: node B
        slow = with_playbooks(cfg, playbooks_copy(tmp_path, SLOW_FIRST.format(seconds=150) + _shipped_add()))
        bal = balancer(slow)
        ex = in_background(bal)
        jobs += submit_jobs(tc, 1, sleep=1, name="waits")
        second = None
        t_launch = time.monotonic()
        removed_at = None
        while removed_at is None:
            assert time.monotonic() - t_launch < 150, "the removal of the idle node waited for the slow play"
            r = bal.run_pass()
            assert r.ok, r.summary()
            if second is None and r.plan is not None and r.plan.add_names:
                second, t_launch = r.plan.add_names[0], time.monotonic()
            a = bal.journal.node(first)
            if a is None or a.state is NodeState.TERMINATED:
                removed_at = time.monotonic()
            time.sleep(1)
        assert second is not None
        b = bal.journal.node(second)
        assert b is not None and b.state is NodeState.PROVISIONING, b  # still in its slow play
        figures(
            "slow_provisioning_and_a_removal",
            removed=first,
            provisioning=second,
            removed_after_launch=round(removed_at - t_launch, 1),
            slow_play_seconds=150,
        )
        # Proved. The slow play is not waited out: it is cancelled, as elb's second signal does
        # (its node is failed), and clean_up removes what is left.
        assert isinstance(bal.provisioner, AnsibleProvisioner)
        bal.provisioner.cancel()
        ex.shutdown()
    finally:
        bal.journal.close()
        clean_up(tc, cfg, baseline)


def _shipped_add() -> str:
    text = (default_playbook_dir() / "add_node.yml").read_text()
    return text.removeprefix("---\n")
