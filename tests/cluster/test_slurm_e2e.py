"""elb behind Slurm's power saving on the real test cluster: Debian's slurmctld 22.05 as the
master (configless), slurmd in podman nodes that elb launches through the local provider and
provisions with playbooks/slurm_add_node.yml, elb's resume and suspend programs in slurm.conf.

A job submitted to the cloud partition makes Slurm ask elb (its ResumeProgram) for a node; the
balancer (run here pass by pass, as ``elb run`` does on the master) launches it, sets its
address in Slurm and provisions it; the job runs there and writes into the master's /home over
NFS; once idle, elb's cost rule drains the node and powers it down, Slurm calls its
SuspendProgram, and elb deregisters and terminates it. Nothing is left running. The metrics
endpoint (``metrics_port``, started as ``elb run`` starts it) is scraped on the way.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from elb.core.model import NodeState
from elb.service import factory
from elbdev.testcluster import constants as C
from elbdev.testcluster import slurm
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.slurm_support import (
    HOME,
    controller,
    job_done,
    job_host,
    master_hosts,
    passes_until,
    remove_left_workers,
    sbatch,
    sinfo_reasons,
    sinfo_states,
    slurm_balancer,
    slurm_config,
)
from tests.ports import free_port

pytestmark = pytest.mark.cluster
__all__ = ["controller"]  # the fixture, used by name


def scrape(port: int) -> dict[str, float]:
    """``name{labels}`` -> value of each sample the metrics endpoint serves."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = (line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
    return {name: float(value) for name, value in samples}


def test_slurm_resumes_through_elb_jobs_run_over_nfs_and_idle_nodes_go(controller: TestCluster, tmp_path: Path) -> None:
    tc = controller
    tc.master_run(["mkdir", "-p", str(HOME)], user=C.CLUSTER_USER)
    hosts_before = master_hosts()
    port = free_port()
    cfg = slurm_config(tmp_path).model_copy(update={"metrics_port": port})
    bal = slurm_balancer(cfg)
    factory.start_metrics(cfg, bal)
    started = time.monotonic()
    job = sbatch("-N", "1", "-n", "2", "--wrap", 'sleep 2; hostname > "$SLURM_JOB_ID.host"')
    try:
        passes_until(bal, f"job {job} to run and write its output file", lambda: job_done(job), timeout=300)
        ran_on = job_host(job)
        print(f"\njob {job} ran on {ran_on} {time.monotonic() - started:.0f} s after sbatch")
        assert ran_on is not None
        node = bal.journal.node(ran_on)
        assert node is not None and node.state is NodeState.READY
        up = scrape(port)
        assert (up['elb_nodes{state="ready"}'], up["elb_nodes_added_total"]) == (1.0, 1.0), up
        assert up["elb_launch_to_ready_seconds_count"] == 1.0 and up["elb_node_failures_total"] == 0.0
        timeline = bal.journal.timeline(ran_on)
        assert timeline is not None
        passes_until(
            bal,
            f"{ran_on} to be drained, powered down and terminated",
            lambda: (n := bal.journal.node(ran_on)) is not None and n.state is NodeState.TERMINATED,
            timeout=300,
        )
        assert tc.workers() == []
        # elb asked Slurm to power the node down (POWER_DOWN); Slurm's power-saving thread runs the
        # SuspendProgram on its own cycle, and elb answers that request in a later pass.
        passes_until(
            bal,
            f"Slurm to power {ran_on} down",
            lambda: bool({"powered_down", "powering_down"} & set(sinfo_states()[ran_on].split("+"))),
            timeout=120,
        )
        # Slurm shows the node powering down as it starts its SuspendProgram, whose request file
        # can come a pass later on a busy machine: wait until it has come and elb has answered it.
        passes_until(
            bal,
            "the suspend request taken and every ask answered",
            lambda: not bal.journal.asks() and not list(slurm.REQUEST_DIR.glob("*.json")),
            timeout=60,
        )
        assert master_hosts() == hosts_before
        events = [e.state for e in bal.journal.events(ran_on)]
        assert NodeState.DRAINING in events and events[-1] is NodeState.TERMINATED
        gone = scrape(port)
        assert (gone['elb_nodes{state="ready"}'], gone["elb_nodes_removed_total"]) == (0.0, 1.0), gone
        assert gone['elb_passes_total{outcome="failed"}'] == 0.0 and gone['elb_passes_total{outcome="ok"}'] > 1
        assert gone["elb_launch_backoff_rounds"] == 0.0 and gone["elb_node_failures_total"] == 0.0
    finally:
        subprocess.run(["scancel", job], env={**os.environ, **slurm.env()}, capture_output=True, check=False)
        bal.journal.close()
        remove_left_workers(tc)  # (out of the master's hosts file and exports too, then terminated)


def test_names_past_max_nodes_are_held_so_slurm_puts_no_job_on_a_node_elb_would_give_back(
    controller: TestCluster, tmp_path: Path
) -> None:
    """max_nodes 1 and eight cloud nodes: the first passes hold the seven names past the room
    (``elb: held: ...``; a name an elb held before keeps its reason); two one-node jobs make
    Slurm resume one node only, the second job waits (Resources) instead of being put on a held
    node, given back and requeued."""
    tc = controller
    bal = slurm_balancer(slurm_config(tmp_path, max_nodes=1))
    jobs: list[str] = []
    try:

        def held() -> set[str]:
            return {n for n, why in sinfo_reasons().items() if why.startswith("elb: held: ")}

        # (the pass starts the holds as an operation of its own: they may land after it returns;
        # a name the previous test's node left powering down joins the pool only once Slurm shows
        # it powered down, up to SuspendTimeout later)
        first = passes_until(
            bal,
            "the names past the room held",
            lambda: len(held()) == slurm.CLOUD_NODES - 1,
            slurm.SUSPEND_TIMEOUT + 60,
        )
        jobs = [sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "--wrap", 'sleep 5; hostname > "$SLURM_JOB_ID.host"')]
        jobs.append(sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "--wrap", 'sleep 5; hostname > "$SLURM_JOB_ID.host"'))
        results = passes_until(bal, "both jobs to run", lambda: all(job_done(j) for j in jobs), timeout=420)
        assert not [r for r in results if r.outcomes.given_back], [r.summary() for r in results]
        launches = [n for r in (*first, *results) for n in r.outcomes.added]
        assert len(launches) <= len(jobs)  # a launch a job at most: none given back and asked for again
    finally:
        for job in jobs:
            subprocess.run(["scancel", job], env={**os.environ, **slurm.env()}, capture_output=True, check=False)
        bal.journal.close()
        # The node elb launched for the jobs is still up: out of the master's hosts file and exports,
        # then terminated, so that the next test starts from the master as it was; every name open.
        remove_left_workers(tc)
