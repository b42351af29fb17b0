"""SGE answers hollow reads for longer than ``unreachable_timeout`` while a job runs on a managed node.

A hollow read: ``qstat`` and ``qhost`` exit 0 with well-formed XML that lists no job and no exec
host (what an empty cluster prints). Taken as the truth, the node would be "absent from SGE, no job
on it", drained and terminated after ``unreachable_timeout``, and replaced (``min_nodes``); its job
would be lost. ``sge.bin_dir`` points at wrappers that print the hollow documents while a flag file
exists and otherwise run the real commands; ``qconf`` and ``qmod`` are the real ones, so ``qconf
-sel`` still lists the node. Real SGE 8.1.9, podman nodes, real Ansible (see test_faults.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from elb.core.model import NodeState
from elb.schedulers.sge.commands import SgeCommands
from elb.schedulers.sge.config import sge_settings
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, job_state, wait_for
from tests.faults.support import (
    accounting,
    balancer,
    clean_up,
    converged,
    fault_config,
    job_hosts,
    jobs_in_qstat,
    passes_until,
    release,
    submit_held_jobs,
)

pytestmark = [pytest.mark.cluster, pytest.mark.faults]

UNREACHABLE = 9.0
POLL = 3.0
HOLLOW_FOR = UNREACHABLE + 2 * POLL  # past the time-out by two polls
FLAG = "hollow"

# Both print the hollow document while the flag file exists, else they are the real command.
WRAPPER = """#!/bin/sh
here=$(dirname "$0")
if [ -e "$here/{flag}" ]; then
  cat "$here/{name}.hollow.xml"
  exit 0
fi
exec /usr/bin/{name} "$@"
"""
HOLLOW_QSTAT = (
    "<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n"
)
HOLLOW_QHOST = (
    "<?xml version='1.0'?>\n<qhost>\n <host name='global'>\n"
    + "".join(
        f"   <hostvalue name='{v}'>-</hostvalue>\n"
        for v in ("arch_string", "num_proc", "load_avg", "mem_total", "mem_used", "swap_total", "swap_used")
    )
    + " </host>\n</qhost>\n"
)


def hollow_sge_dir(tmp: Path) -> Path:
    bin_dir = tmp / "sgebin"
    bin_dir.mkdir()
    for name, doc in (("qstat", HOLLOW_QSTAT), ("qhost", HOLLOW_QHOST)):
        (bin_dir / f"{name}.hollow.xml").write_text(doc)
        script = bin_dir / name
        script.write_text(WRAPPER.format(flag=FLAG, name=name))
        script.chmod(0o755)
    for name in ("qmod", "qconf", "qacct"):
        (bin_dir / name).symlink_to(f"/usr/bin/{name}")
    return bin_dir


def test_hollow_reads_past_unreachable_timeout_remove_nothing_and_lose_no_job(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    bin_dir = hollow_sge_dir(tmp_path)
    flag = bin_dir / FLAG
    base = fault_config(tmp_path, idle_time=600, min_nodes=1)
    cfg = base.model_copy(
        update={
            "poll_interval": POLL,
            "policy": base.policy.model_copy(update={"poll_interval": POLL}),
            "unreachable_timeout": UNREACHABLE,
        }
    ).with_section(sge_settings(base).model_copy(update={"bin_dir": bin_dir}))
    t0 = time.monotonic()
    bal = balancer(cfg)
    try:
        # No exec host yet: what SGE 8.1.9's qconf -sel answers then is the empty set, and the
        # honest empty cluster is read as such (min_nodes adds the first node).
        assert baseline["exechosts"] == []
        assert SgeCommands(sge_settings(cfg)).configured_exec_hosts() == frozenset()  # qconf -sel exits 1 here
        passes_until(
            bal, "the first node", lambda _: len(bal.journal.nodes()) == 1 and not converged(tc, bal, baseline), 150
        )
        (node,) = [n.name for n in bal.journal.nodes()]
        jobs = submit_held_jobs(tc, 1, name="hollow")  # runs until released, after the hollow period
        wait_for("the job to start", lambda: job_state(tc, jobs[0]) == "r", 60)
        seen = bal.run_pass()  # as every poll does: elb sees the job running on its node
        assert seen.ok and seen.snapshot is not None and seen.snapshot.jobs_on(node), seen.summary()

        flag.touch()  # from now on qstat and qhost answer hollow documents
        since = time.monotonic()
        hollow = passes_until(
            bal,
            "the hollow period",
            lambda _: time.monotonic() - since > HOLLOW_FOR,
            HOLLOW_FOR + 60,
            allow_failed=True,
        )
        flag.unlink()
        seconds_hollow = time.monotonic() - since
        refused = [r for r in hollow if not r.ok]
        assert refused == hollow, [r.summary() for r in hollow]
        why = (
            f"reading SGE: partial read: {node} vanished from qhost but SGE still has it configured (qconf -sel); "
            f"job {jobs[0]} ran there; no action"
        )
        assert hollow[-1].error == why, hollow[-1].error
        n = bal.journal.node(node)
        assert n is not None and n.state is NodeState.READY
        assert [w.name for w in tc.workers()] == [node]
        assert node in cluster_state(tc)["exechosts"]  # type: ignore[operator]
        assert job_state(tc, jobs[0]) == "r"

        # The real commands answer again: the cluster goes on, the job ends well on its node.
        back = bal.run_pass()
        assert back.ok, back.summary()
        assert (back.outcomes.added, back.outcomes.removed, back.outcomes.repaired) == ([], [], [])
        release(node, jobs)
        after = passes_until(bal, "the job to end", lambda _: not jobs_in_qstat(tc, jobs), HOLLOW_FOR + 60)
        acted = [*hollow, back, *after]
        assert job_hosts(jobs) == {jobs[0]: node}
        acct = accounting(tc, jobs[0])
        assert acct["failed"].split()[0] == "0" and acct["exit_status"].split()[0] == "0", acct
        assert converged(tc, bal, baseline) == []
        assert [x for r in acted for x in (*r.outcomes.added, *r.outcomes.removed, *r.outcomes.repaired)] == []
        events = [e.state for e in bal.journal.events(node)]
        assert NodeState.DRAINING not in events and NodeState.TERMINATED not in events
        figures = {
            "test": "hollow_read",
            "unreachable_timeout": UNREACHABLE,
            "poll": POLL,
            "seconds_hollow": round(seconds_hollow, 1),
            "hollow_passes_refused": len(refused),
            "removed": sum(len(r.outcomes.removed) + len(r.outcomes.repaired) for r in acted),
            "launched": sum(len(r.outcomes.added) for r in acted),
            "jobs_lost": len(jobs) - len(job_hosts(jobs)),
            "job_exit_status": int(acct["exit_status"].split()[0]),
            "seconds": round(time.monotonic() - t0, 1),
        }
        print(f"\nFIGURES {json.dumps(figures)}")
    finally:
        flag.unlink(missing_ok=True)
        bal.journal.close()
        clean_up(tc, cfg, baseline)
