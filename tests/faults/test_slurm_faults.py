"""Fault tests of elb behind Slurm's power saving, on the real test cluster (Debian's slurmctld
as the master, slurmd in podman nodes elb launches and provisions).

1. The controller restarted after elb held and reopened the names it leaves open: a job
   submitted after the restart runs (Slurm brings those names back not responding). First in
   the module: its names, node001 and node002, are powered down since the controller's start
   (after another test Slurm may show them powering down for SuspendTimeout, 120 s).
2. Drain races: jobs submitted just before or just after elb drains the node that would run
   them, many times over: no job is lost or killed, no node leaked.
3. SIGKILL of elb between Slurm's resume request and the node ready, at several steps: the
   restarted elb finds in its journal what Slurm asked for and what it had done, and converges
   (the job runs, nothing is leaked).
4. A node whose slurmd never registers after a play that succeeded: failed after
   ``slurm.register_timeout`` and given back to Slurm, which requeues the job waiting for it.
5. A ready node whose slurmd dies: Slurm stops hearing from it; once ``unreachable_timeout``
   has passed with no job running there, elb gives it back to Slurm and takes it out.
6. A node whose slurmd exits right after its start: its play fails on it, and elb fails it at
   once for its own fault instead of waiting ``slurm.register_timeout`` for it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from elb.core.config import parse_config
from elb.core.model import NodeState, Removal
from elb.schedulers.slurm.commands import SlurmCommands
from elb.schedulers.slurm.config import slurm_settings
from elb.service.actuator import Outcomes
from elb.service.daemon import Balancer
from elbdev.testcluster import faults as F
from elbdev.testcluster import slurm
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import wait_for
from tests.cluster.slurm_support import (
    controller,
    job_done,
    job_host,
    passes_until,
    powered_down,
    remove_left_workers,
    sbatch,
    sinfo_states,
    slurm_balancer,
    slurm_config,
    start_requeued_now,
)
from tests.faults.support import elb_killed_at, last_step, race_offsets, with_backoff

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
__all__ = ["controller"]  # the fixture, used by name

# 4 races in CI, their submit times spread over the whole window (``race_offsets``; each that ends in
# a power-down needs a new node, about a minute here); the soak of 20 is a benchmark
# (benchmarks/bench_fault_soaks.py, docs/safety.md).
RACES = int(os.environ.get("ELB_SLURM_RACES", "2"))
# Long enough that a job given the node just before the drain still holds it when elb reads Slurm again.
JOB = 'sleep 4; hostname > "$SLURM_JOB_ID.host"'
# Submit this many seconds relative to the drain: L +- ~1 s before it, L the measured time from
# sbatch to the job holding a node.
EARLY, LATE = 1.0, 0.75
AFTER = (0.0, 0.3)


def figures(test: str, **values: object) -> None:
    print(f"\nFIGURES {json.dumps({'test': test, **values})}")


class HookedSlurm(SlurmCommands):
    """The real Slurm commands; ``drain`` first tells the submitter to fire."""

    on_drain: threading.Event | None = None

    def drain(self, name: str, reason: str) -> None:
        if self.on_drain is not None:
            self.on_drain.set()
        super().drain(name, reason)


def dispatch_latency(probes: int = 3) -> float:
    """Median seconds from sbatch to the job holding a node (Slurm schedules in cycles, not at
    once): the races submit that long before the drain, give or take."""
    seen = []
    for _ in range(probes):
        t = time.monotonic()
        job = sbatch("-N", "1", "-n", "2", "--wrap", "true")
        while job_state(job) == "PENDING":
            assert time.monotonic() - t < 60, f"probe {job} not scheduled in 60 s"
            time.sleep(0.05)
        seen.append(time.monotonic() - t)
        while job_state(job) not in ("", "COMPLETED"):
            time.sleep(0.2)
    return sorted(seen)[len(seen) // 2]


def job_state(job: str) -> str:
    proc = subprocess.run(
        ["squeue", "--noheader", "--jobs", job, "--format=%T"],
        env={**os.environ, **slurm.env()},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return proc.stdout.strip()


def clean_up(tc: TestCluster, bal: Balancer | None = None) -> None:
    """After a test, pass or fail: the cluster user's jobs cancelled, the journal closed, every
    worker left (a test that failed half way) out of the master's hosts file and exports, then
    terminated, so that the next test starts from the master as it was."""
    subprocess.run(["scancel", "-u", "sgeuser"], env={**os.environ, **slurm.env()}, check=False)
    if bal is not None:
        bal.journal.close()
    remove_left_workers(tc)


def assert_given_back(name: str) -> None:
    """Slurm powers the node down (and may ask for it again), never leaves it down for good."""
    state = set(sinfo_states()[name].split("+"))
    assert {"powered_down", "powering_down", "power_down"} & state, state


def no_elb_nodes_left(bal: Balancer, tc: TestCluster) -> bool:
    return not bal.journal.nodes() and not tc.workers() and not bal.journal.asks()


@pytest.mark.timeout(900)
def test_names_elb_reopened_before_the_controller_restarts_are_asked_for_after_it(
    controller: TestCluster, tmp_path: Path
) -> None:
    # slurmctld 22.05, restarted, brings back each powered-down cloud node drained and undrained
    # since its last power-down as not responding, and puts no job on one until an update
    # touches it. In an hour of the soak the names elb had held and reopened were so for 15
    # minutes: every job pending (ReqNodeNotAvail, UnavailableNodes: every node), no node asked for.
    cfg = slurm_config(tmp_path)
    tc = controller
    # What is tested is what the restart makes of powered-down names. First in the module, the
    # names are powered down since the controller's start; run after a test that left a node up,
    # its clean-up powered that node down, and Slurm shows it powering down for SuspendTimeout.
    wait_for(
        "Slurm to be done powering node001 and node002 down",
        lambda: powered_down("node001") and powered_down("node002"),
        timeout=slurm.SUSPEND_TIMEOUT + 60,
    )
    bal = slurm_balancer(cfg)
    try:
        bal.run_pass()  # names past max_nodes (2) held, node001 and node002 left open
        # elb's hold and reopen of the open names, as a pass at max_nodes and the next make them
        for state, extra in (("DRAIN", ["reason=elb: held: no room within max_nodes 2"]), ("UNDRAIN", [])):
            subprocess.run(
                ["scontrol", "update", "nodename=node001,node002", f"state={state}", *extra],
                env={**os.environ, **slurm.env()}, check=True, capture_output=True, timeout=60,
            )  # fmt: skip
        F.restart_controller("slurm")
        restarted = time.monotonic()
        shown = sinfo_states()
        assert all("not_responding" in shown[n] for n in ("node001", "node002")), shown
        job = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
        passes_until(bal, f"job {job} to run after the restart", lambda: job_done(job), 240)
        figures(
            "slurm_restart_reopened_names",
            after_restart=shown,
            seconds_to_job_done=round(time.monotonic() - restarted, 1),
        )
    finally:
        clean_up(tc, bal)


@pytest.mark.timeout(1800)
def test_job_submitted_as_the_slurm_node_drains_is_never_lost(controller: TestCluster, tmp_path: Path) -> None:
    tc = controller
    cfg = slurm_config(tmp_path, idle_time=3600, boot_time=3600)  # elb's own idle rule stays out of the races
    bal = slurm_balancer(cfg)
    hooked = HookedSlurm(slurm_settings(cfg))
    bal.scheduler.slurm = hooked  # type: ignore[attr-defined]
    seed = int(os.environ.get("ELB_FAULT_SEED", str(int(time.time()))))
    rng = random.Random(seed)
    jobs: list[str] = []
    outcomes = {"kept": 0, "powered_down": 0}
    t0 = time.monotonic()
    try:
        first = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
        jobs.append(first)
        passes_until(bal, f"job {first} to run", lambda: job_done(first), timeout=300)
        node = job_host(first)
        assert node is not None
        latency = dispatch_latency()
        offsets = (-(latency + EARLY), -max(0.0, latency - LATE))
        # Around the time Slurm takes to give the job a node, before the drain: it lands on the node
        # just before, while or just after DRAIN (kept, or the node powers down and Slurm asks elb
        # for another); one race in ten (at least one) submits after DRAIN.
        for i, offset in enumerate(race_offsets(RACES, offsets, AFTER, rng)):
            fire = threading.Event()
            hooked.on_drain = fire if offset >= 0 else None
            submitted: list[str] = []

            def submitter(offset: float = offset, fire: threading.Event = fire, out: list[str] = submitted) -> None:
                if offset >= 0:
                    fire.wait(30)
                    time.sleep(offset)
                out.append(sbatch("-N", "1", "-n", "2", "--wrap", JOB))

            t = threading.Thread(target=submitter)
            t.start()
            if offset < 0:
                time.sleep(-offset)
            out = Outcomes()
            bal.actuator().remove_all([Removal(node, "fault test: drain race")], out)
            t.join(60)
            assert submitted, "the submitter did not submit"
            job = submitted[0]
            jobs.append(job)
            state = bal.journal.node(node)
            assert state is not None
            if out.kept == [node]:
                outcomes["kept"] += 1
                assert state.state is NodeState.READY, state
                passes_until(bal, f"job {job} to end", functools.partial(job_done, job), timeout=120)
                assert "drain" not in sinfo_states()[node], f"{node} left drained"
            else:
                assert out.failed == {} and state.state is NodeState.TERMINATED, (out, state)
                outcomes["powered_down"] += 1
                old = node

                def moved(job: str = job, old: str = old) -> bool:
                    return (
                        job_done(job) and (n := bal.journal.node(old)) is not None and n.state is NodeState.TERMINATED
                    )

                passes_until(bal, f"job {job} to run on another node and {old} to go", moved, timeout=300)
                node = job_host(job)
                assert node is not None
                if node == old:  # it ran and ended on the old node before the drain read Slurm
                    starter = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
                    jobs.append(starter)
                    passes_until(bal, f"job {starter} to run", functools.partial(job_done, starter), timeout=300)
                    node = job_host(starter)
                    assert node is not None
                    print(f"race {i + 1}/{RACES}: offset {offset:+.2f} s, job {job}: {outcomes}", flush=True)

        hooked.on_drain = None
        out = Outcomes()
        bal.actuator().remove_all([Removal(node, "fault test: done")], out)
        passes_until(bal, "every node gone", lambda: no_elb_nodes_left(bal, tc), timeout=180)
        lost = [j for j in jobs if not job_done(j)]
        assert lost == []
        assert tc.workers() == []
        figures(
            "slurm_drain_race",
            races=RACES,
            seed=seed,
            dispatch_latency=round(latency, 2),
            offsets=[round(offsets[0], 2), round(offsets[1], 2)],
            **outcomes,
            jobs=len(jobs),
            jobs_lost=len(lost),
            nodes_launched=sum(1 for e in bal.journal.events() if e.state is NodeState.REQUESTED),
            nodes_leaked=len(tc.workers()),
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        clean_up(tc, bal)


# Where elb dies: in the middle of the launch (the container exists, its sshd not yet awaited)
# and in the middle of the provisioning play; ELB_SLURM_KILLS=all adds just after the journal says
# it asked for the node (the restart's rule for that case is tested on values in
# tests/unit/test_slurm_plan.py).
KILLS: tuple[tuple[str, float], ...] = (("launching", 0.0), ("provisioning", 4.0))
if os.environ.get("ELB_SLURM_KILLS") == "all":
    KILLS = (("requested", 0.0), *KILLS)


@pytest.mark.timeout(1200)
def test_sigkill_between_resume_request_and_node_ready_converges(controller: TestCluster, tmp_path: Path) -> None:
    tc = controller
    cfg = slurm_config(tmp_path)
    cfg_path = tmp_path / "elb.yml"
    cfg_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    crashes: list[dict[str, object]] = []
    jobs: list[str] = []
    t0 = time.monotonic()
    try:
        for step, delay in KILLS:
            job = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
            jobs.append(job)
            deadline = time.monotonic() + 60
            while not any(slurm.REQUEST_DIR.glob("*-resume.json")):
                assert time.monotonic() < deadline, "Slurm did not ask to resume a node"
                time.sleep(0.2)
            r = elb_killed_at(cfg_path, step, delay=delay)
            assert r.returncode == -signal.SIGKILL, r.stdout[-3000:]
            last = last_step(cfg.journal_path)
            assert last is not None and last[1] is NodeState(step), last
            bal = slurm_balancer(cfg)  # elb restarts
            started = time.monotonic()
            passes = passes_until(
                bal, f"job {job} to run after a kill at {step}", functools.partial(job_done, job), 300
            )
            crashes.append(
                {
                    "step": step,
                    "delay": delay,
                    "node": last[0],
                    "passes_to_run_the_job": len(passes),
                    "seconds_to_run_the_job": round(time.monotonic() - started, 1),
                }
            )
            bal.journal.close()
            bal = slurm_balancer(cfg)
            passes_until(bal, "the idle node to go", functools.partial(no_elb_nodes_left, bal, tc), 240)
            bal.journal.close()
            assert tc.workers() == []
        lost = [j for j in jobs if not job_done(j)]
        assert lost == []
        figures(
            "slurm_sigkill",
            crashes=crashes,
            jobs=len(jobs),
            jobs_lost=len(lost),
            nodes_leaked=len(tc.workers()),
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        clean_up(tc)


@pytest.mark.timeout(600)
def test_a_ready_node_whose_slurmd_dies_is_given_back_and_taken_out(controller: TestCluster, tmp_path: Path) -> None:
    # The cost rule keeps an idle node 300 s (0.5 x boot_time 600 s), longer than this test: the
    # node goes because Slurm lost it, not because it is idle.
    cfg = slurm_config(tmp_path, boot_time=600).model_copy(update={"unreachable_timeout": 5.0})
    tc = controller
    bal = slurm_balancer(cfg)
    t0 = time.monotonic()
    try:
        job = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
        passes_until(bal, f"job {job} to run", lambda: job_done(job), 300)
        name = job_host(job)
        assert name is not None
        passes_until(bal, f"job {job} to end", lambda: job_state(job) in ("", "COMPLETED"), 60)
        subprocess.run(["podman", "exec", name, "pkill", "-x", "slurmd"], check=True, timeout=30)
        killed = time.monotonic()
        passes_until(bal, f"Slurm to see {name} not responding", lambda: "not_responding" in sinfo_states()[name], 120)
        noticed = time.monotonic()
        passes_until(
            bal,
            f"{name} to be taken out",
            lambda: (n := bal.journal.node(name)) is not None and n.state is NodeState.TERMINATED,
            120,
        )
        taken_out = time.monotonic()
        why = bal.journal.events(name)[-1].detail or ""
        assert "absent from Slurm for" in why and "no job on it" in why, why
        assert tc.workers() == []
        assert_given_back(name)
        figures(
            "slurm_lost_node",
            slurmd_timeout=slurm.SLURMD_TIMEOUT,
            unreachable_timeout=cfg.unreachable_timeout,
            seconds_to_not_responding=round(noticed - killed, 1),
            seconds_to_taken_out=round(taken_out - killed, 1),
            slurm_state=sinfo_states()[name],
            nodes_leaked=len(tc.workers()),
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        clean_up(tc, bal)


@pytest.mark.timeout(600)
def test_a_node_whose_slurmd_never_registers_fails_and_goes_back_to_slurm(
    controller: TestCluster, tmp_path: Path
) -> None:
    # The add play starts the node's slurmd under another node's name (provision.extra_vars
    # override the role's slurm_node_name): it fetches its configuration and runs, so the play
    # succeeds, but the node Slurm waits for never registers. Without a bound elb kept it, and the
    # job waiting for it, until Slurm's ResumeTimeout (1200 s here). The job running on a node
    # elb launches next is the give-back path the SIGKILL test takes; here the job is checked
    # requeued, not lost (its rerun waits for Slurm's SuspendTimeout, 120 s, a documented run).
    impostor = f"node{slurm.CLOUD_NODES:03d}"
    cfg = slurm_config(tmp_path).model_dump(mode="json")
    cfg["slurm"]["register_timeout"] = 10.0
    cfg["provision"]["extra_vars"]["slurm_node_name"] = impostor
    tc = controller
    t0 = time.monotonic()
    bal = slurm_balancer(parse_config(cfg))
    try:
        job = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
        passes_until(
            bal,
            "the node that never registered to fail and go back to Slurm",
            lambda: bool(bal.journal.nodes(include_gone=True)) and not bal.journal.nodes() and not bal.journal.asks(),
            180,
        )
        (node,) = bal.journal.nodes(include_gone=True)
        why = bal.journal.events(node.name)[-1].detail or ""
        assert node.state is NodeState.FAILED, node
        assert "its slurmd did not register within 10 s of its play" in why and "powering_up" in why, why
        assert tc.workers() == []
        assert_given_back(node.name)
        assert job_state(job) == "PENDING"  # requeued by Slurm, to run on a node it asks for next
        figures(
            "slurm_never_registers",
            register_timeout=10.0,
            seconds_to_failed_and_given_back=round(time.monotonic() - t0, 1),
            job=job_state(job),
            nodes_leaked=len(tc.workers()),
        )
    finally:
        clean_up(tc, bal)
        # The impostor registered under the other node's name: that node goes back to powered down.
        subprocess.run(
            ["scontrol", "update", f"nodename={impostor}", "state=POWER_DOWN_FORCE", "reason=test"],
            env={**os.environ, **slurm.env()},
            check=False,
        )


@pytest.mark.timeout(600)
def test_a_node_whose_slurmd_exits_after_its_start_fails_its_play(controller: TestCluster, tmp_path: Path) -> None:
    # The node's slurmd is replaced by a program that exits 0 at once (as the soak breaks a
    # play): its start "succeeds" and nothing runs. The play must say so on that node, so that
    # elb fails the node for its own fault at once, not after ``slurm.register_timeout`` (the
    # daemon's 120 s here) with the job waiting for it all that time. The relaunch for the job
    # backs off 5 s (the fault tests' back-off), not the daemon's minute.
    cfg = with_backoff(slurm_config(tmp_path), 5)
    control = tmp_path / "cloud-control.json"
    F.write_control(control, {"break_next": 1, "scheduler": "slurm"})
    cloud = F.FaultyLocalCloud.from_config(cfg)
    cloud.control = control
    tc = controller
    bal = slurm_balancer(cfg, cloud=cloud)
    try:
        job = sbatch("-N", "1", "-n", "2", "--wrap", JOB)
        failed = passes_until(
            bal,
            "the broken node's bring-up to fail",
            lambda: any(n.state is NodeState.FAILED for n in bal.journal.nodes(include_gone=True)),
            300,
        )
        (broken,) = [n for n in bal.journal.nodes(include_gone=True) if n.state is NodeState.FAILED]
        noted = [json.loads(line) for line in cloud.log.read_text().splitlines()]
        assert [x["node"] for x in noted if x["fault"] == "play_fail"] == [broken.name], noted
        why = bal.journal.events(broken.name)[-1].detail or ""
        assert "provisioning failed" in why and "slurmd does not run" in why, why
        assert "did not register" not in why, why
        assert broken.name in failed[-1].outcomes.failed, failed[-1].summary()

        # The job is served by a node launched after it; nothing is left behind. Slurm requeued
        # the job it had given the broken node: its 120-s hold is Slurm's, not elb's, and let go.
        def ran() -> bool:
            start_requeued_now("-j", job)
            return job_done(job)

        passes_until(bal, f"job {job} to run", ran, 400)
        assert job_host(job) != broken.name
        figures("slurm_slurmd_exits", failed=broken.name, why=why[:200], job_ran_on=job_host(job))
    finally:
        clean_up(tc, bal)
