"""What Slurm shares with Grid Engine in elb's one pass, on the real test cluster: Debian's
slurmctld 22.05 as the master (configless), slurmd in podman nodes elb launches through the local
provider and provisions with playbooks/slurm_add_node.yml. No stand-in but EC2's notice queue
(the spot interruption's notice source).

- pause: every name Slurm may pick is held (drained), so Slurm asks for none and the job waits,
  nothing is launched; resumed, names open within the room and Slurm's ask launches;
- keep: a ready idle node the admin keeps outlives the cost rule; released, it goes;
- drain: ``elb drain NODE`` drains it in Slurm; the next pass removes it with the safe drain and
  powers it down in Slurm, which can ask for it again (a later job pinned to it runs there);
- warm pool: an idle node is stopped (its container stopped), powered down in Slurm; when Slurm
  asks for it again (a job pinned to it) elb starts the same container again, no launch;
- a node that seems to have booted before Slurm's power-up request (a container started long
  before it) registers: the test cluster's slurmd reports its own start as the boot (-b);
- spot notice: a node running a job is drained in Slurm at once, its job requeued (never lost),
  and it is removed for good (never pooled, a warm pool configured), its history naming the
  notice, not an admin.

A launch and its play cost about a minute here, so the tests run in this order on one journal
(one ``state_dir``, as one elb that is restarted with another config) and hand their node on to
the next: each test takes the ready node the journal has, or launches one when there is none,
so each runs alone too. The controller's ``SuspendTimeout`` is short (``SUSPEND_TIMEOUT``) so
that Slurm may ask for a node it powered down again within seconds.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from elb.cli.main import main as elb_main
from elb.core.config import Config
from elb.core.exitcodes import Exit
from elb.core.interfaces import Instance, Notice, NoticeKind
from elb.core.model import NodeState
from elb.service.daemon import Balancer
from elb.service.passrecord import PassResult
from elbdev.testcluster import constants as C
from elbdev.testcluster import slurm
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.slurm_support import (
    HOME,
    flags,
    job_done,
    job_host,
    powered_down,
    remove_left_workers,
    sbatch,
    sinfo_reasons,
    sinfo_states,
    slurm_balancer,
    slurm_config,
)

pytestmark = pytest.mark.cluster

SUSPEND_TIMEOUT = 10  # seconds Slurm shows a node powering down before it may ask for it again
JOB = 'sleep 1; hostname > "$SLURM_JOB_ID.host"'
LONG_JOB = 'touch "$SLURM_JOB_ID.started"; sleep 600; hostname > "$SLURM_JOB_ID.host"'
POWERED_DOWN = {"powered_down", "powering_down", "power_down"}
NO_IDLE_RULE = {"boot_time": 3600}  # idle 1800 s before the cost rule removes a node: not in these tests
SHORT_IDLE = {"boot_time": 12}  # idle_factor 0.5: the cost rule removes a node idle for 6 s
POOL = {"warm_pool": {"max_nodes": 1, "restart_time": 5}}  # a restart (5 s) is worth it against a boot (12 s)


@pytest.fixture(scope="module")
def controller(testcluster: TestCluster) -> Iterator[TestCluster]:
    """The test cluster with Slurm's controller on its master (configless, SUSPEND_TIMEOUT), for
    this module; its state and requests gone after."""
    slurm.up(suspend_timeout=SUSPEND_TIMEOUT)
    testcluster.master_run(["rm", "-rf", str(HOME)], check=False)
    testcluster.master_run(["mkdir", "-p", str(HOME)], user=C.CLUSTER_USER)
    try:
        yield testcluster
    finally:
        slurm.down()  # its request files go with it


@pytest.fixture(autouse=True)
def _leftover_workers() -> Iterator[None]:
    """The tests here hand their node on to the next one (tests/conftest.py's fixture of this
    name would remove it after each test): the ``rig`` removes what is left at the module's end."""
    yield


@dataclass
class Rig:
    """One journal (``state_dir``) for the module's tests, each with a config and balancer of its own."""

    tc: TestCluster
    tmp: Path
    balancers: list[Balancer] = field(default_factory=list)

    def config(self, **policy: object) -> Config:
        return slurm_config(self.tmp, **policy)

    def balancer(self, cfg: Config, **kw: object) -> Balancer:
        bal = slurm_balancer(cfg, **kw)
        self.balancers.append(bal)
        return bal

    def instances(self) -> list[Instance]:
        """The cloud's workers, stopped ones too."""
        return self.tc.cloud().list_workers()

    def config_file(self, cfg: Config) -> Path:
        path = self.tmp / "elb.yml"
        path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True)))
        return path


@pytest.fixture(scope="module")
def rig(controller: TestCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    r = Rig(controller, tmp_path_factory.mktemp("slurm-features"))
    try:
        yield r
    finally:
        subprocess.run(["scancel", "-u", C.CLUSTER_USER], env=slurm_env(), capture_output=True, check=False)
        for bal in r.balancers:
            bal.journal.close()
        remove_left_workers(controller)


def slurm_env() -> dict[str, str]:
    return {**os.environ, **slurm.env()}


def scontrol_show(kind: str, name: str) -> dict[str, str]:
    """``scontrol show -o KIND NAME`` as key -> value (the first word of each value)."""
    proc = subprocess.run(
        ["scontrol", "show", "-o", kind, name], env=slurm_env(), capture_output=True, text=True, timeout=60, check=True
    )
    return dict(word.split("=", 1) for word in proc.stdout.split() if "=" in word)


def drained(node: str) -> bool:
    """Drained or draining in Slurm (``idle+drain``, ``drained``, ``draining``...)."""
    return "drain" in sinfo_states()[node]


def until(bal: Balancer, what: str, done: Callable[[Sequence[PassResult]], bool], timeout: float) -> list[PassResult]:
    """Passes, one each poll interval, until ``done`` holds for the passes so far."""
    results: list[PassResult] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results.append(bal.run_pass())
        assert results[-1].ok, results[-1].summary()
        if done(results):
            return results
        time.sleep(bal.config.poll_interval)
    raise AssertionError(
        f"timed out waiting for {what}; passes: {[r.summary() for r in results[-15:]]}; Slurm: {sinfo_states()}"
    )


def state(bal: Balancer, name: str) -> NodeState | None:
    node = bal.journal.node(name)
    return None if node is None else node.state


def wait_for(what: str, done: Callable[[], bool], timeout: float = 60.0) -> None:
    """Slurm changes on its own (no pass of elb's involved) within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; Slurm: {sinfo_states()}"
        time.sleep(0.5)


def ready_node(bal: Balancer) -> str:
    """The ready node the journal has (handed on by the test before), else one Slurm asks for
    for a job, launched and provisioned: its name, idle (its job done)."""
    ready = [n.name for n in bal.journal.nodes() if n.state is NodeState.READY]
    if ready:
        return ready[0]
    job = sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "--wrap", JOB)
    until(bal, f"job {job} to run on a new node", lambda _: job_done(job), timeout=300)
    host = job_host(job)
    assert host is not None
    return host


def job_state(job: str) -> str:
    return scontrol_show("job", job).get("JobState", "")


def test_paused_elb_holds_slurms_cloud_names_and_the_ask_after_resume_launches(rig: Rig) -> None:
    """Paused, elb would decline every launch: it holds every name Slurm may pick (drained, reason
    ``elb: held: scaling paused by an admin ...``), so Slurm asks for none and the job waits
    (no give-back, no requeue behind Slurm's 120 s hold). Resumed, names open within the room
    and Slurm's ask for the job is launched."""
    bal = rig.balancer(rig.config(**NO_IDLE_RULE))
    assert not bal.journal.nodes(), "the pause is tested on a cluster with no node of elb's"
    bal.journal.set_paused(time.time(), "kernel update")
    names = {f"node{i:03d}" for i in range(1, slurm.CLOUD_NODES + 1)}

    def held_for_the_pause() -> set[str]:
        return {n for n, why in sinfo_reasons().items() if why.startswith("elb: held: scaling paused by an admin")}

    until(bal, "every cloud name held", lambda _: held_for_the_pause() == names, timeout=60)
    job = sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "--wrap", JOB)
    results = until(bal, "five passes with the job waiting", lambda rs: len(rs) >= 5, timeout=120)
    assert job_state(job) == "PENDING", scontrol_show("job", job)
    assert not [r.summary() for r in results if r.outcomes.added or r.outcomes.given_back]
    assert bal.journal.nodes(include_gone=True) == [] and rig.tc.workers() == []  # nothing launched

    bal.journal.set_paused(None)
    until(bal, f"job {job} to run on a node launched after the pause", lambda _: job_done(job), timeout=300)
    ran_on = job_host(job)
    assert ran_on is not None
    assert state(bal, ran_on) is NodeState.READY
    assert [w.name for w in rig.tc.workers()] == [ran_on]  # one launch, after the pause
    events = bal.journal.events(ran_on)
    assert events[0].state is NodeState.REQUESTED and "the scheduler asked for" in (events[0].detail or "")
    # the names held still (past the room) say why now: the room, no longer the pause
    still = {n: why for n, why in sinfo_reasons().items() if why.startswith("elb: held: ")}
    assert still and not [why for why in still.values() if "paused" in why], still


def test_a_kept_idle_node_outlives_the_cost_rule_and_goes_once_released(rig: Rig) -> None:
    bal = rig.balancer(rig.config(**SHORT_IDLE))
    name = ready_node(bal)
    bal.journal.set_order("kept", name, on=True)

    def kept_by_the_admin(rs: Sequence[PassResult]) -> bool:
        plan = rs[-1].plan
        return plan is not None and f"kept by an admin: {name}" in plan.reason

    until(bal, f"the cost rule to want {name} gone", kept_by_the_admin, timeout=60)
    assert state(bal, name) is NodeState.READY
    assert NodeState.DRAINING not in [e.state for e in bal.journal.events(name)]
    assert not drained(name)

    bal.journal.set_order("kept", name, on=False)
    until(bal, f"{name} to be removed", lambda _: state(bal, name) is NodeState.TERMINATED, timeout=120)
    assert flags(name) & POWERED_DOWN, sinfo_states()
    wait_for(f"Slurm to clear {name}'s drain at its suspend (idle_on_node_suspend)", lambda: not drained(name))
    assert rig.tc.workers() == []
    assert "idle" in (bal.journal.events(name)[-1].detail or "")


def test_an_admins_drain_drains_in_slurm_removes_the_node_and_slurm_can_ask_for_it_again(
    rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = rig.config(**NO_IDLE_RULE)
    bal = rig.balancer(cfg)
    name = ready_node(bal)
    assert elb_main(["drain", "-c", str(rig.config_file(cfg)), name]) == Exit.OK
    assert f"{name}: disabled and idle" in capsys.readouterr().out
    assert drained(name), sinfo_states()
    assert name in bal.journal.orders().remove

    results = until(bal, f"{name} to be removed", lambda _: state(bal, name) is NodeState.TERMINATED, timeout=120)
    assert any(name in r.outcomes.removed for r in results)
    assert flags(name) & POWERED_DOWN, sinfo_states()
    wait_for(f"Slurm to clear {name}'s drain at its suspend (idle_on_node_suspend)", lambda: not drained(name))
    assert rig.tc.workers() == []
    assert "an admin asked for its removal" in (bal.journal.events(name)[-1].detail or "")

    # Slurm can ask for it again: a job pinned to it makes Slurm resume it, elb launches it.
    until(bal, f"Slurm to power {name} down", lambda _: powered_down(name), timeout=60)
    job = sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "-w", name, "--wrap", JOB)
    until(bal, f"job {job} to run on {name} again", lambda _: job_done(job), timeout=300)
    assert job_host(job) == name
    assert state(bal, name) is NodeState.READY
    assert name not in bal.journal.orders().remove  # the order ended with the node it was for


def test_the_warm_pool_stops_an_idle_node_and_starts_it_again_when_slurm_asks_for_it(rig: Rig) -> None:
    bal = rig.balancer(rig.config(**SHORT_IDLE, **POOL))
    name = ready_node(bal)
    node = bal.journal.node(name)
    assert node is not None and node.instance_id is not None
    instance = node.instance_id

    until(bal, f"{name} to be stopped into the pool", lambda _: state(bal, name) is NodeState.STOPPED, timeout=120)
    assert [(w.instance_id, w.state) for w in rig.instances()] == [(instance, "stopped")]  # podman stop
    assert flags(name) & POWERED_DOWN, sinfo_states()
    wait_for(f"Slurm to clear {name}'s drain at its suspend (idle_on_node_suspend)", lambda: not drained(name))

    until(bal, f"Slurm to power {name} down", lambda _: powered_down(name), timeout=60)
    job = sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "-w", name, "--wrap", JOB)
    results = until(bal, f"job {job} to run on {name} started again", lambda _: job_done(job), timeout=300)
    assert job_host(job) == name
    assert [n for r in results for n in r.outcomes.restarted] == [name]
    assert [n for r in results for n in r.outcomes.added] == []  # started again, not launched
    assert [(w.instance_id, w.state) for w in rig.instances()] == [(instance, "running")]
    states = [e.state for e in bal.journal.events(name)]
    stopped_at = len(states) - 1 - states[::-1].index(NodeState.STOPPED)
    assert NodeState.STARTING in states[stopped_at:] and NodeState.REQUESTED not in states[stopped_at:]
    assert state(bal, name) is NodeState.READY


class Interruptions:
    """Stand-in for EC2's notice queue: the notices handed to it, each delivered once."""

    def __init__(self) -> None:
        self.queue: list[Notice] = []

    def poll(self) -> Sequence[Notice]:
        out, self.queue = self.queue, []
        return out


def slurmd_argv(name: str) -> list[str]:
    """The command line of the node's running slurmd, as its play started it."""
    pid = subprocess.run(["podman", "exec", name, "pgrep", "-x", "slurmd"], capture_output=True, text=True, check=True)
    cmdline = subprocess.run(
        ["podman", "exec", name, "cat", f"/proc/{pid.stdout.split()[0]}/cmdline"],
        capture_output=True,
        text=True,
        check=True,
    )
    return cmdline.stdout.rstrip("\0").split("\0")


def test_a_node_that_started_before_slurms_power_up_request_registers(rig: Rig) -> None:
    # A container's uptime is about its own, so a node elb (re)starts at once after Slurm's ask
    # can seem to have booted before it, and Slurm ignores the registration of a node that booted
    # before its power-up request (slurmctld: "Still waiting for boot of node"): its job waits for
    # slurm.register_timeout and a relaunch. The test cluster's slurmd runs with -b
    # (slurm.NODE_VARS): its boot is its own start. Here the race is made certain: the node's
    # container runs long before Slurm's request, then its slurmd starts as its play started it.
    bal = rig.balancer(rig.config(**NO_IDLE_RULE))
    name = ready_node(bal)
    argv = slurmd_argv(name)
    assert "-b" in argv, argv
    subprocess.run(["podman", "exec", name, "pkill", "-x", "slurmd"], check=True)
    scontrol = ["scontrol", "update", f"nodename={name}"]
    subprocess.run([*scontrol, "state=power_down_force", "reason=test"], env=slurm_env(), timeout=60, check=True)
    wait_for(f"Slurm to power {name} down", lambda: powered_down(name))
    (address,) = [i.private_ip for i in rig.instances() if i.name == name]
    subprocess.run([*scontrol, "state=power_up"], env=slurm_env(), timeout=60, check=True)
    wait_for(f"Slurm to power {name} up", lambda: "powering_up" in flags(name))  # its request time set
    subprocess.run([*scontrol, f"nodeaddr={address}"], env=slurm_env(), timeout=60, check=True)
    subprocess.run(["podman", "exec", name, *argv], timeout=60, check=True)
    wait_for(f"{name}'s slurmd to register", lambda: not flags(name) & {"powering_up", "not_responding"})
    assert not flags(name) & POWERED_DOWN, sinfo_states()
    assert bal.run_pass().ok  # Slurm's ask for the node it has: answered, nothing launched
    assert [w.name for w in rig.tc.workers()] == [name]


def test_a_spot_interruption_drains_requeues_and_removes_the_node_for_good(rig: Rig) -> None:
    notices = Interruptions()
    bal = rig.balancer(rig.config(**NO_IDLE_RULE, **POOL), notices=notices)
    name = ready_node(bal)
    node = bal.journal.node(name)
    assert node is not None and node.instance_id is not None
    job = sbatch("-N", "1", "-n", str(slurm.NODE_CPUS), "-w", name, "--wrap", LONG_JOB)
    try:
        until(
            bal,
            f"job {job} to run on {name}",
            lambda _: job_state(job) == "RUNNING" and (HOME / f"{job}.started").exists(),
            timeout=120,
        )
        since = len(bal.journal.events(name))
        notices.queue = [Notice(NoticeKind.INTERRUPTION, node.instance_id, time.time(), "spot interruption")]
        assert bal.run_pass().ok
        # At once: drained in Slurm, the job requeued, the removal ordered.
        assert drained(name), sinfo_states()
        assert bal.journal.orders().causes[name][0] == "spot-interruption"
        # Slurm shows the requeued job COMPLETING while the node ends its first run, then waiting
        # again (pinned to the drained node, it cannot start elsewhere): requeued, not lost.
        wait_for(
            f"job {job} to wait again",
            lambda: (
                (shown := scontrol_show("job", job))["JobState"] in ("PENDING", "REQUEUED") and shown["Restarts"] == "1"
            ),
        )
        assert bal.counters.notices == {"spot-interruption": 1} and bal.counters.rescheduled == 1

        results = until(
            bal, f"{name} to be removed for good", lambda _: state(bal, name) is NodeState.TERMINATED, timeout=120
        )
        assert any(name in r.outcomes.removed for r in results)
        assert [r.outcomes.stopped for r in results if r.outcomes.stopped] == []
        after = bal.journal.events(name)[since:]
        assert NodeState.STOPPING not in [e.state for e in after]  # a warm pool has room: never pooled
        assert "local spot-interruption notice" in (after[-1].detail or "")  # the local cloud's notice
        assert not any("an admin" in (e.detail or "") for e in after), [e.detail for e in after]
        assert [i for i in rig.instances() if i.name == name] == []  # terminated, not stopped
        assert flags(name) & POWERED_DOWN, sinfo_states()
        # Still queued, never lost: waiting, or given the node again as Slurm asks for it anew.
        assert job_state(job) in ("PENDING", "REQUEUED", "CONFIGURING"), scontrol_show("job", job)
    finally:
        subprocess.run(["scancel", job], env=slurm_env(), capture_output=True, check=False)
