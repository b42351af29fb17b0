"""elb itself on the real test cluster: real SGE, podman nodes through LocalCloud, real Ansible.

The balancer runs in this process exactly as ``elb run`` would on the master (the session
fixture put the process in the master's UTS namespace): jobs wait, elb adds a node through
the local provider and the provisioning playbooks, the jobs run on it and write into the
master's /home over NFS, and once the queue is empty elb drains, deregisters and
terminates the node, leaving SGE, /etc/hosts and the exports as they were.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from elb.core.config import Config, parse_config
from elb.core.model import NodeState
from elb.core.timeline import Step
from elb.schedulers.sge.commands import SgeCommands
from elb.schedulers.sge.config import sge_settings
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.passrecord import PassResult
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, written
from tests.cluster.names import start_after_used

pytestmark = pytest.mark.cluster

JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
sleep 3
hostname > "$HOME/e2e/$JOB_ID.host"
"""


def e2e_config(tmp: Path, **policy: object) -> Config:
    """elb's config for the test cluster, its journal starting after the session's names."""
    cfg = parse_config(
        {
            "poll_interval": 2,
            "state_dir": str(tmp / "state"),
            "cluster": {"name": C.CLUSTER_NAME, "master": C.MASTER_NAME},
            # elb's default policy (grow: forecast, shrink: cost) on a short timescale: waiting jobs that
            # no slot will take within a boot time launch a node at once; a node idle for
            # idle_factor x boot_time (0.5 x 12 s) goes.
            # slots_per_node as an admin sets it (the test nodes have 2 slots): without it, the first
            # launch, with no host to learn from, counts one slot per node.
            "policy": {"max_nodes": 2, "slots_per_node": 2, "billing": "second", "boot_time": 12, **policy},
            "cloud": {"provider": "local"},
            "provision": {"private_data_dir": str(tmp / "ansible"), "ssh_private_key": str(C.SSH_KEY), "timeout": 600},
        }
    )
    start_after_used(cfg.journal_path)
    return cfg


def balancer(cfg: Config) -> Balancer:
    return Balancer(
        cfg,
        scheduler=GridEngine(cfg, SgeCommands(sge_settings(cfg))),
        journal=Journal(cfg.journal_path),
        cloud=factory.make_cloud(cfg),
        provisioner=factory.make_provisioner(cfg),
    )


def passes_until(
    bal: Balancer, what: str, done: Callable[[list[PassResult]], bool], timeout: float
) -> list[PassResult]:
    """Run passes every poll interval (as ``elb run`` does) until ``done`` holds."""
    results: list[PassResult] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results.append(bal.run_pass())
        assert results[-1].ok, results[-1].summary()
        if done(results):
            return results
        time.sleep(bal.config.poll_interval)
    # What SGE showed at the end, to tell a node elb kept for a reason from one SGE lost (state u).
    shown = [r.snapshot for r in results if r.snapshot is not None][-1:]
    hosts = [
        (h.name, [(q.name, q.slots_used, q.slots_reserved, q.flags) for q in h.queues]) for s in shown for h in s.hosts
    ]
    jobs = [(j.job_id, j.state, j.queue) for s in shown for j in s.jobs]
    summaries = [r.summary() for r in results]
    said = [s for k, s in enumerate(summaries) if k == 0 or s != summaries[k - 1]]
    raise AssertionError(
        f"timed out waiting for {what}; passes ({len(results)}, repeats left out): {said}; "
        f"last SGE hosts {hosts}, jobs {jobs}\n{sge_messages(bal)}"
    )


def sge_messages(bal: Balancer, lines: int = 40) -> str:
    """The last lines of the qmaster's messages and of each worker's execd messages: why SGE
    lost a node (state u) is told there, and the test cluster is gone once the test ends."""
    qmaster = C.SGE_SPOOL / "qmaster" / "messages"
    try:
        told = [f"qmaster messages:\n{''.join(qmaster.read_text(errors='replace').splitlines(True)[-lines:])}"]
    except OSError as err:
        told = [f"qmaster messages: {err}"]
    for inst in bal.cloud.list_workers():  # type: ignore[union-attr]
        messages = str(C.SGE_SPOOL / "execd" / inst.name / "messages")  # the sge_exec role's spool
        for what, argv in (
            ("execd messages", ["tail", "-n", str(lines), messages]),
            ("processes", ["ps", "-eo", "pid,stat,etime,args"]),
        ):
            try:
                done = subprocess.run(
                    ["podman", "exec", inst.instance_id, *argv], capture_output=True, text=True, timeout=30, check=False
                )
                told.append(f"{inst.name} ({inst.state}) {what}:\n{done.stdout}{done.stderr}")
            except subprocess.TimeoutExpired:
                told.append(f"{inst.name} ({inst.state}) {what}: no answer in 30 s")
    return "\n".join(told)


def test_dry_run_on_the_real_master_prints_snapshot_and_plan(testcluster: TestCluster, tmp_path: Path) -> None:
    cfg_file = tmp_path / "elb.yml"
    data = e2e_config(tmp_path).model_dump(mode="json")
    data["state_dir"] = str(tmp_path / "dry")  # e2e_config wrote its own journal; a dry run writes none
    cfg_file.write_text(yaml.safe_dump(data))
    home = Path("/home") / C.CLUSTER_USER / "e2e"
    testcluster.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    jid = testcluster.submit(JOB, "-N", "dryrun")
    try:
        time.sleep(2)
        proc = subprocess.run(
            [sys.executable, "-m", "elb", "once", "--dry-run", "--config", str(cfg_file)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "snapshot:" in proc.stdout
        assert "1 waiting" in proc.stdout
        assert "plan (dry run, nothing changed):" in proc.stdout
        assert "add 1 (node" in proc.stdout
        assert "  the cloud's workers: 0 listed (read only)\n" in proc.stdout  # podman's containers, read
        assert testcluster.workers() == []  # nothing launched
        assert not (tmp_path / "dry" / "journal.sqlite").exists()  # nothing written
    finally:
        testcluster.master_run(["qdel", jid], check=False)


def test_elb_grows_runs_jobs_over_nfs_and_shrinks(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    before = cluster_state(tc)
    home = Path("/home") / C.CLUSTER_USER / "e2e"
    tc.master_run(["rm", "-rf", str(home)], check=False)
    tc.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    cfg = e2e_config(tmp_path)
    bal = balancer(cfg)
    jobs = [tc.submit(JOB, "-N", f"e2e{i}", "-o", "/dev/null") for i in range(4)]

    # 4 one-slot jobs on 2-slot nodes: exactly 2 nodes, launched and provisioned in one pass.
    grown = passes_until(bal, "nodes to be added", lambda rs: bool(rs[-1].outcomes.added), timeout=120)
    added = sorted(grown[-1].outcomes.added)
    assert len(added) == 2, grown[-1].summary()
    for node in added:
        assert bal.journal.node(node).state is NodeState.READY  # type: ignore[union-attr]
        assert node in cluster_state(tc)["exechosts"]  # type: ignore[operator]
        # add_node.yml's first task succeeded on it: its reachable boot step.
        timeline = bal.journal.timeline(node)
        assert timeline is not None and timeline.reached(Step.REACHABLE), timeline

    # The jobs run on the new nodes and write into the master's /home over NFS.
    def all_written(_: list[PassResult]) -> bool:
        return sum(written(f) is not None for f in home.glob("*.host")) == len(jobs)

    ran = passes_until(bal, "the jobs to finish", all_written, timeout=180)
    assert {written(f) for f in home.glob("*.host")} <= set(added)

    # Queue empty: once idle half a boot time, each node is drained, deregistered and terminated
    # (the pass after which the last job's file was seen may have begun it).
    def all_removed(rs: list[PassResult]) -> bool:
        return sorted(n for r in [*ran, *rs] for n in r.outcomes.removed) == added

    shrunk = passes_until(bal, "the nodes to be removed", all_removed, timeout=180)
    for node in added:
        assert bal.journal.node(node).state is NodeState.TERMINATED  # type: ignore[union-attr]
        steps = [e.state for e in bal.journal.events(node)]
        assert steps[-3:] == [NodeState.DRAINING, NodeState.DEREGISTERED, NodeState.TERMINATED]
    assert tc.workers() == []
    assert cluster_state(tc) == before
    rows = (tmp_path / "state" / "stats.csv").read_text().splitlines()
    assert len(rows) == 1 + len(grown) + len(ran) + len(shrunk)  # header + one row per pass
    bal.journal.close()
