"""Helpers of the fault tests: a short-timescale config, elb in-process or as a process killed at a
step, the three views of the cluster (journal, podman, SGE/hosts/exports) and their agreement,
jobs and their accounting."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from elb.core.config import Config, parse_config
from elb.core.interfaces import Cloud
from elb.core.model import NodeState
from elb.schedulers.sge.commands import SgeCommands
from elb.schedulers.sge.config import sge_settings
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.passrecord import PassResult
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import REPO_ROOT, TestCluster
from tests.cluster.helpers import cluster_state, written
from tests.cluster.names import start_after_used

HOME = Path("/home") / C.CLUSTER_USER / "faults"
NODE_NAME = re.compile(r"\bnode\d+\b")

JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
sleep {sleep}
hostname > "$HOME/faults/$JOB_ID.host"
"""


def reset_job_outputs() -> None:
    """An empty directory for the jobs' output files. SGE numbers jobs from 1 again after each
    cluster up: files of an earlier session would pass for this session's jobs."""
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir(parents=True)
    os.chown(HOME, C.CLUSTER_UID, C.CLUSTER_UID)


def race_offsets(
    races: int, before: tuple[float, float], after: tuple[float, float], rng: random.Random
) -> list[float]:
    """When each of ``races`` drain races submits its job, in seconds relative to the drain: one
    race in ten (at least one) draws from ``after`` (after elb disabled or drained the node), the
    others from ``before``, spread over it by strata (the k-th of n draws from the k-th of n equal
    parts), in a random order. A short run covers the whole window, as a long one does."""
    n_after = max(1, round(races / 10)) if races > 1 else 0
    n_before = races - n_after
    lo, hi = before
    part = (hi - lo) / max(1, n_before)
    offsets = [rng.uniform(lo + k * part, lo + (k + 1) * part) for k in range(n_before)]
    offsets += [rng.uniform(*after) for _ in range(n_after)]
    rng.shuffle(offsets)
    return offsets


# Time for a launch of several nodes at once: the local cloud gives every container of one launch the
# same deadline, and under load (CI runs the unit tests beside the cluster tests) six sshds take more
# than the single node's 25 s to answer.
BATCH_BOOT_TIMEOUT = 120.0


def fault_config(tmp: Path, *, boot_timeout: float = 25.0, **policy: object) -> Config:
    """Short timescales: poll 1 s, grow as soon as a job waits, shrink after a few idle seconds.
    ``boot_timeout`` is short so that a test whose launch never happens sees it abandoned soon;
    a test that launches several nodes at once passes ``BATCH_BOOT_TIMEOUT``."""
    pol: dict[str, object] = {
        "max_nodes": 1,
        "wait_time": 0,
        "stabilization_time": 0,
        "billing": "second",
        "grow": "wait_time",
        "shrink": "timer",
        "idle_time": 3,
        "poll_interval": 1,
        "boot_time": 20,
    }
    pol.update(policy)
    cfg = parse_config(
        {
            "poll_interval": 1,
            "state_dir": str(tmp / "state"),
            "cluster": {"name": C.CLUSTER_NAME, "master": C.MASTER_NAME},
            "policy": pol,
            "cloud": {"provider": "local", "local": {"boot_timeout": boot_timeout}},
            "provision": {
                "private_data_dir": str(tmp / "ansible"),
                "ssh_private_key": str(C.SSH_KEY),
                "timeout": 300,
                "extra_vars": {"sge_exec_wait_retries": 5, "sge_exec_wait_delay": 1},
            },
            "orphan_timeout": 60,
            # Back-off on the tests' timescale (poll 1 s, boot_timeout 25 s), not on EC2's.
            "backoff": {"initial": 5, "max": 60},
        }
    )
    start_after_used(cfg.journal_path)
    return cfg


def with_backoff(cfg: Config, initial: float) -> Config:
    """``cfg`` with launches backing off ``initial`` seconds after a first failed bring-up
    (fault_config's: 5 s), for a test whose nodes fail on purpose."""
    return cfg.model_copy(update={"backoff": cfg.backoff.model_copy(update={"initial": initial})})


def write_config(cfg: Config, path: Path) -> Path:
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    return path


def balancer(cfg: Config, *, cloud: Cloud | None = None, sge: SgeCommands | None = None) -> Balancer:
    """elb (re)started in this process: a fresh Balancer reading the journal on disk."""
    return Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge or SgeCommands(sge_settings(cfg))),
        journal=Journal(cfg.journal_path),
        cloud=cloud or factory.make_cloud(cfg),
        provisioner=factory.make_provisioner(cfg),
    )


def passes_until(
    bal: Balancer, what: str, done: Callable[[list[PassResult]], bool], timeout: float, *, allow_failed: bool = False
) -> list[PassResult]:
    """Run passes every poll interval (as ``elb run`` does) until ``done`` holds."""
    results: list[PassResult] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results.append(bal.run_pass())
        if not allow_failed:
            assert results[-1].ok, results[-1].summary()
        if done(results):
            return results
        time.sleep(bal.config.poll_interval)
    raise AssertionError(f"timed out waiting for {what}; passes: {[r.summary() for r in results]}")


def elb_killed_at(
    cfg_path: Path, step: str, *, delay: float = 0.0, timeout: float = 240.0
) -> subprocess.CompletedProcess[str]:
    """``elb once`` as a process of its own, SIGKILLed (with its children) at ``step`` (+ ``delay`` s)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.killpoint", str(cfg_path), step],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "ELB_KILL_DELAY": str(delay)},
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"elb once never reached step {step!r}:\n{out[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def last_step(journal_path: Path, node: str | None = None) -> tuple[str, NodeState] | None:
    j = Journal(journal_path)
    try:
        events = j.events(node)
    finally:
        j.close()
    return (events[-1].node, events[-1].state) if events else None


def disagreements(tc: TestCluster, journal: Journal, baseline: dict[str, object]) -> list[str]:
    """Where the journal, the cloud (podman) and the master (SGE, hosts, exports) disagree.

    Converged means: every live journal record is a ready node with a running container that SGE,
    the host group and /etc/hosts list; every container belongs to such a record; nothing else
    added to SGE, hosts or exports (compared with ``baseline``, the cluster before the test).
    """
    out: list[str] = []
    nodes = journal.nodes()
    containers = {w.instance_id: w for w in tc.cloud().list_workers()}  # every state, stopped too
    ready = {n.name for n in nodes if n.state is NodeState.READY}
    for n in nodes:
        if n.state is not NodeState.READY:
            out.append(f"journal: {n.name} is {n.state.value}")
        elif n.instance_id not in containers or containers[n.instance_id].state != "running":
            out.append(f"journal: {n.name} ready but its container is gone")
    known = {n.instance_id for n in nodes}
    out.extend(
        f"podman: {w.name} ({w.state}) unknown to the journal" for iid, w in containers.items() if iid not in known
    )
    st = cluster_state(tc)

    def nodes_in(state: dict[str, object], key: str) -> set[str]:  # node names only ("NONE", master, ...)
        return {h for h in state[key] if NODE_NAME.fullmatch(h)}  # type: ignore[attr-defined]

    for key in ("exechosts", "adminhosts", "submithosts", "hostgroup"):
        now, before = nodes_in(st, key), nodes_in(baseline, key)
        extra, missing = now - before, before - now
        if missing:
            out.append(f"SGE {key}: lost {sorted(missing)}")
        if key in ("exechosts", "hostgroup") and extra != ready:
            out.append(f"SGE {key}: {sorted(extra)} but ready nodes {sorted(ready)}")
        elif extra - ready:
            out.append(f"SGE {key}: {sorted(extra - ready)} not ready nodes")
    in_hosts = set(NODE_NAME.findall(str(st["etc_hosts"]))) - set(NODE_NAME.findall(str(baseline["etc_hosts"])))
    if in_hosts != ready:
        out.append(f"/etc/hosts names {sorted(in_hosts)} but ready nodes {sorted(ready)}")
    if not ready:
        for key in ("exports", "ganesha_exports", "queue_slots"):  # no ganesha_exports in a lane
            if st.get(key) != baseline.get(key):
                out.append(f"{key} differ from before the test")
    return out


def converged(tc: TestCluster, bal: Balancer, baseline: dict[str, object]) -> list[str]:
    return disagreements(tc, bal.journal, baseline)


def submit_jobs(tc: TestCluster, n: int, *, sleep: float = 1, name: str = "fault") -> list[str]:
    HOME.mkdir(parents=True, exist_ok=True)
    os.chown(HOME, C.CLUSTER_UID, C.CLUSTER_UID)
    # -w n: no verification (SGE refuses a job "not allowed to run in any queue" while no node exists);
    # TestCluster.submit takes qsub's job id even when it exits 1 for that warning.
    return [tc.submit(JOB.format(sleep=sleep), "-w", "n", "-N", f"{name}{i}", "-o", "/dev/null") for i in range(n)]


# A job that runs until the test releases it, then writes its host as JOB does: a test that needs a
# job running across a fault ends it as soon as the fault is over instead of sleeping out a length
# chosen with a margin. The release is a file in the node's own /tmp (written with podman exec): the
# node's NFS client may cache the absence of a file in /home for half a minute. Never released, the
# job fails (exit 3) after ``HELD_MAX`` seconds rather than pass for one that ran as it should.
HELD_MAX = 600
HELD_JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
n=0
while [ ! -e "/tmp/release.$JOB_ID" ]; do
  n=$((n + 1))
  [ "$n" -le {max} ] || exit 3
  sleep 1
done
hostname > "$HOME/faults/$JOB_ID.host"
"""


def submit_held_jobs(tc: TestCluster, n: int, *, name: str = "held") -> list[str]:
    """``n`` jobs that run until ``release`` (on the node they run on) lets them end."""
    HOME.mkdir(parents=True, exist_ok=True)
    os.chown(HOME, C.CLUSTER_UID, C.CLUSTER_UID)
    script = HELD_JOB.format(max=HELD_MAX)
    return [tc.submit(script, "-w", "n", "-N", f"{name}{i}", "-o", "/dev/null") for i in range(n)]


def release(node: str, job_ids: Sequence[str]) -> None:
    """Let held jobs running on ``node`` end (within a second)."""
    files = [f"/tmp/release.{jid}" for jid in job_ids]
    subprocess.run(["podman", "exec", node, "touch", *files], check=True, timeout=60, capture_output=True)


def jobs_in_qstat(tc: TestCluster, ids: Sequence[str]) -> set[str]:
    out = tc.master_run(["qstat", "-u", "*"]).stdout
    present = {line.split()[0] for line in out.splitlines() if line.strip() and line.split()[0].isdigit()}
    return present & set(ids)


def accounting(tc: TestCluster, job_id: str, timeout: float = 20.0) -> dict[str, str]:
    """``qacct -j`` of a finished job (SGE writes the record as the job ends; allow a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = tc.master_run(["qacct", "-j", job_id], check=False)
        fields = {}
        for line in proc.stdout.splitlines():
            key, _, value = line.partition(" ")
            if key and value.strip():
                fields[key] = value.strip()
        if proc.returncode == 0 and "exit_status" in fields:
            return fields
        if time.monotonic() > deadline:
            raise AssertionError(f"no accounting record for job {job_id}: {proc.stdout} {proc.stderr}")
        time.sleep(1)


def job_hosts(job_ids: Sequence[str]) -> dict[str, str]:
    """The host each job wrote (its last line) into the master's /home over NFS."""
    out = {}
    for jid in job_ids:
        host = written(HOME / f"{jid}.host")
        if host is not None:
            out[jid] = host
    return out


def clean_up(tc: TestCluster, cfg: Config, baseline: dict[str, object]) -> None:
    """After a test: no jobs; elb removes its nodes; whatever is left the test cluster removes (the
    names its elb gave are noted after the test, tests/conftest.py)."""
    tc.master_run(["qdel", "-f", "-u", C.CLUSTER_USER], check=False)
    cfg = cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"idle_time": 2.0, "min_nodes": 0})})
    bal = balancer(cfg)
    try:
        passes_until(
            bal, "elb to remove its nodes", lambda _: not bal.journal.nodes() and not converged(tc, bal, baseline), 90
        )
    except AssertionError:
        left = [w.name for w in tc.workers()]
        if left:
            tc.remove_nodes(left)
        tc.cloud().terminate([w.instance_id for w in tc.cloud().list_workers()])
        raise
    finally:
        bal.journal.close()
