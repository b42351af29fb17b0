"""Helpers of the Slurm cluster and fault tests: the controller, elb's config and balancer for
Slurm, jobs submitted as the cluster user, passes until something holds."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.passrecord import PassResult
from elbdev.testcluster import constants as C
from elbdev.testcluster import slurm
from elbdev.testcluster.cluster import REPO_ROOT, TestCluster
from tests.cluster.helpers import written
from tests.lanes import own_lines

HOME = Path("/home") / C.CLUSTER_USER / "slurm-e2e"


@pytest.fixture(scope="module")
def controller(testcluster: TestCluster) -> Iterator[TestCluster]:
    """The test cluster with Slurm's controller on its master (configless), for one module."""
    slurm.up()  # a controller with no state: job ids start again at 1, so old results go
    testcluster.master_run(["rm", "-rf", str(HOME)], check=False)
    testcluster.master_run(["mkdir", "-p", str(HOME)], user=C.CLUSTER_USER)
    try:
        yield testcluster
    finally:
        slurm.down()


def slurm_config(tmp: Path, **policy: object) -> Config:
    return parse_config(
        {
            "scheduler": "slurm",
            "poll_interval": 2,
            "state_dir": str(tmp / "state"),
            "cluster": {"name": C.CLUSTER_NAME, "master": C.MASTER_NAME},
            # elb's cost rule on a short timescale: a node idle for idle_factor x boot_time goes.
            "policy": {
                "max_nodes": 2,
                "slots_per_node": slurm.NODE_CPUS,
                "billing": "second",
                "boot_time": 12,
                **policy,
            },
            # A slurmd that works registers within seconds of its start, but a restarted node's has
            # taken over 30 s on a CI machine with both cores busy: the daemon's default, 120 s.
            "slurm": {"conf": str(slurm.CONF), "requests": str(slurm.REQUEST_DIR), "register_timeout": 120},
            "cloud": {"provider": "local"},
            "provision": {
                "playbook_dir": str(REPO_ROOT / "playbooks"),
                "private_data_dir": str(tmp / "ansible"),
                "ssh_private_key": str(C.SSH_KEY),
                "timeout": 600,
                "extra_vars": dict(slurm.NODE_VARS),
            },
        }
    )


def slurm_balancer(cfg: Config, **kw: object) -> Balancer:
    """elb's one pass with Slurm's driver, the test cluster's cloud (or ``kw``'s ``cloud``) and
    the real playbooks."""
    journal = Journal(cfg.journal_path)
    if "cloud" not in kw:
        kw["cloud"] = factory.make_cloud(cfg)
    return Balancer(
        cfg,
        scheduler=factory.make_scheduler(cfg, journal),
        journal=journal,
        provisioner=factory.make_provisioner(cfg),
        **kw,  # type: ignore[arg-type]
    )


def as_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **slurm.env()}
    return subprocess.run(
        ["runuser", "-u", C.CLUSTER_USER, "--", *argv],
        env=env,
        cwd=str(HOME),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def sbatch(*args: str) -> str:
    proc = as_user(["sbatch", "--parsable", "-p", slurm.PARTITION, *args])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def master_hosts() -> str:
    """The master's /etc/hosts (without the other lane's nodes in a lane: tests/lanes.py)."""
    return own_lines(Path("/etc/hosts").read_text())


def sinfo_states() -> dict[str, str]:
    """Each node's state and flags as ``sinfo`` shows them (``idle+cloud+powered_down``)."""
    return _sinfo_column("StateComplete")


def sinfo_reasons() -> dict[str, str]:
    """Each node's reason as ``sinfo`` shows it (``none`` when it has none)."""
    return _sinfo_column("Reason")


def _sinfo_column(field: str) -> dict[str, str]:
    """Each node's ``field`` of ``sinfo --Node``, by node."""
    proc = subprocess.run(
        ["sinfo", "--noheader", "--Node", f"--Format=NodeList:0|,{field}:0"],
        env={**os.environ, **slurm.env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(line.split("|", 1) for line in proc.stdout.splitlines() if "|" in line)


def passes_until(bal: Balancer, what: str, done: Callable[[], bool], timeout: float) -> list[PassResult]:
    results: list[PassResult] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results.append(bal.run_pass())
        assert results[-1].ok, results[-1].summary()
        if done():
            return results
        time.sleep(bal.config.poll_interval)
    states = sinfo_states()
    waited_for = [name for name, state in states.items() if "powering_up" in state or "not_responding" in state]
    raise AssertionError(
        f"timed out waiting for {what}; passes: {[r.summary() for r in results[-15:]]}; Slurm: {states}"
        + "".join(slurmd_log(name) for name in waited_for)
    )


def slurmd_log(node: str) -> str:
    """What a node's container says of its slurmd (its processes, the end of its log), for a
    failure's message: a node Slurm still waits for has nothing of it on the master."""
    script = "pgrep -a slurmd; pgrep -a munged; tail -n 40 /var/log/slurm/slurmd.log"
    try:
        proc = subprocess.run(
            ["podman", "exec", node, "sh", "-c", script], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"\n{node}: podman exec: {err}"
    return f"\n--- {node} (podman exec, exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"


def flags(node: str) -> set[str]:
    """The node's state and flags as sinfo shows them (``idle+cloud+powered_down``)."""
    return set(sinfo_states()[node].split("+"))


def powered_down(node: str) -> bool:
    """Slurm shows the node powered down and done powering down (its ``SuspendTimeout`` over): a
    job pinned to it that is submitted now makes Slurm ask for it at once. One submitted while it
    powers down waits for a later scheduling pass of Slurm's: about 13 s more here."""
    state = flags(node)
    return "powered_down" in state and "powering_down" not in state


def release_held_names() -> None:
    """Undrain the cloud nodes an elb of a test held from Slurm's asks (reason ``elb: held: ...``),
    so that the next test's Slurm may ask for any of them before its elb's first pass."""
    held = sorted(n for n, why in sinfo_reasons().items() if why.startswith("elb: held"))
    if held:
        scontrol_update(f"nodename={','.join(held)}", "state=UNDRAIN")


def scontrol_update(*what: str) -> None:
    """``scontrol update WHAT...`` on this controller, as an admin would; what it says is not
    read (the tests check the state it leaves)."""
    subprocess.run(
        ["scontrol", "update", *what], env={**os.environ, **slurm.env()}, capture_output=True, timeout=60, check=False
    )


def start_requeued_now(*select: str) -> list[str]:
    """Let the jobs Slurm requeued start at once, of those ``select`` picks (``squeue``'s
    options: ``-j N``, ``-u USER``): Slurm holds a requeued job for a job credential's lifetime
    (120 s by default; ``squeue`` shows the reason ``BeginTime``) before it may start again. A
    test that is about elb, not that timer, clears it as an admin would (``scontrol update
    jobid=N StartTime=now``); nothing is done to a job not so held (the tests ask for no begin
    time). The jobs let start."""
    env = {**os.environ, **slurm.env()}
    shown = subprocess.run(
        ["squeue", "-h", "-t", "PD", *select, "-o", "%i %r"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = (line.partition(" ") for line in shown.stdout.splitlines())
    held = [job for job, _, reason in lines if reason.strip() == "BeginTime"]
    for job in held:
        scontrol_update(f"jobid={job}", "StartTime=now")
    return held


def remove_left_workers(tc: TestCluster) -> None:
    """Workers a test left (one that failed half way, or ended with its node up; stopped ones
    too): out of the master's hosts file and exports, then terminated, so that the next test
    starts from the master as it was; powered down in Slurm, which would otherwise show a
    terminated node idle and up and give the next test's job to it (the job then waits out
    SlurmdTimeout and the requeue); and the names its elb held from Slurm's asks opened again."""
    release_held_names()
    left = tc.cloud().list_workers()
    if not left:
        return
    print(f"\nworkers left: {[w.name for w in left]}; removing them")
    try:
        old = [tc.spec(w) for w in left if w.private_ip]
        if old:
            tc.run_playbook("slurm_remove_node.yml", old_nodes=old)
    finally:
        tc.cloud().terminate([w.instance_id for w in left])
        scontrol_update(f"nodename={','.join(w.name for w in left)}", "state=POWER_DOWN_FORCE")


def job_host(job: str) -> str | None:
    """The host the job wrote into its output file (each test job writes ``$SLURM_JOB_ID.host``
    into HOME), once written in full; None before."""
    return written(HOME / f"{job}.host")


def job_done(job: str) -> bool:
    """The job wrote its output file in full."""
    return job_host(job) is not None
