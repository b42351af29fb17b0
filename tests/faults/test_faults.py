"""Safety proved with faults: each test injects its fault for real on the test cluster.

Real SGE (8.1.9), real podman nodes through LocalCloud, real Ansible. elb runs in this process
(a ``Balancer``, as ``elb run`` does; the session fixture put the process in the master's UTS
namespace) or, where it must die, as ``elb once`` in a process of its own killed by SIGKILL.
Every test ends with the three views (journal, podman, SGE/hosts/exports) in agreement and the
cluster as it was before the test. Figures are printed as ``FIGURES {...}`` lines (run with -s).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from elb.clouds.local import LocalCloud, local_settings
from elb.core.config import Config
from elb.core.drivers import cloud_settings
from elb.core.interfaces import LaunchResult, NodeBoot
from elb.core.model import NodeState, Removal, Snapshot
from elb.schedulers.sge.commands import Rescheduled, SgeCommands
from elb.schedulers.sge.config import sge_settings
from elb.schedulers.sge.demand import Site
from elb.schedulers.sge.driver import GridEngine
from elb.service.actuator import Actuator, Outcomes
from elb.service.daemon import Balancer
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, job_state, wait_for
from tests.faults.support import (
    BATCH_BOOT_TIMEOUT,
    accounting,
    balancer,
    clean_up,
    converged,
    disagreements,
    elb_killed_at,
    fault_config,
    job_hosts,
    jobs_in_qstat,
    last_step,
    passes_until,
    race_offsets,
    release,
    submit_held_jobs,
    submit_jobs,
    with_backoff,
    write_config,
)

pytestmark = [pytest.mark.cluster, pytest.mark.faults]


def figures(test: str, **values: object) -> None:
    print(f"\nFIGURES {json.dumps({'test': test, **values})}")


def assert_jobs_ran_ok(tc: TestCluster, jobs: Sequence[str]) -> dict[str, str]:
    """Every job wrote its last line, and SGE accounted it as not failed, exit status 0."""
    hosts = job_hosts(jobs)
    assert set(hosts) == set(jobs), f"jobs without output: {sorted(set(jobs) - set(hosts))}"
    for jid in jobs:
        acct = accounting(tc, jid)
        assert acct.get("failed", "").split()[0] == "0", (jid, acct)
        assert acct["exit_status"].split()[0] == "0", (jid, acct)
    return hosts


def wait_gone(tc: TestCluster, jobs: Sequence[str], timeout: float = 90) -> None:
    """Wait until the jobs left qstat (finished)."""
    wait_for(f"jobs {list(jobs)} to finish", lambda: not jobs_in_qstat(tc, jobs), timeout, interval=0.3)


def queue_states(tc: TestCluster, node: str) -> str:
    """The state letters of the node's queue instance (``qstat -f``), '' if none."""
    out = tc.master_run(["qstat", "-f", "-q", f"{C.QUEUE}@{node}"]).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == f"{C.QUEUE}@{node}":
            return f[5] if len(f) > 5 else ""
    raise AssertionError(f"no queue instance {C.QUEUE}@{node} in qstat -f:\n{out}")


# ---------------------------------------------------------------------------------------------------------
# 6. SGE loses a ready node (its execd stops answering): kept while SGE lists a job there; with nothing
#    there for unreachable_timeout, drained from the master's side, terminated and replaced.

# elb's unreachable_timeout here: the test waits it out twice (kept under a job past it, removed once
# empty after it). What elb does past it is under test, not its length: short, a few polls (1 s).
UNREACHABLE = 8.0


def _stop_execd(tc: TestCluster, node: str) -> None:
    """Shut the node's execd down (``qconf -ke``: its jobs keep running); wait for state u."""
    tc.master_run(["qconf", "-ke", node])
    wait_for(f"{node}'s queue to go to state u", lambda: "u" in queue_states(tc, node), 60)


def _start_execd(tc: TestCluster, node: str) -> None:
    subprocess.run(
        ["podman", "exec", node, "/etc/init.d/gridengine-exec", "start"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    wait_for(f"{node}'s restarted execd to clear state u", lambda: "u" not in queue_states(tc, node), 60)


def one_ready_node(tc: TestCluster, bal: Balancer, baseline: dict[str, object]) -> bool:
    return len(bal.journal.nodes()) == 1 and not converged(tc, bal, baseline)


def test_node_sge_loses_is_kept_under_a_job_and_replaced_when_empty(
    testcluster: TestCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    # A static cluster of one node (min_nodes = max_nodes = 1): elb only replaces a lost node.
    cfg = fault_config(tmp_path, idle_time=600, min_nodes=1)
    cfg = cfg.model_copy(update={"unreachable_timeout": UNREACHABLE})
    cfg_path = write_config(cfg, tmp_path / "elb.yml")
    t0 = time.monotonic()
    try:
        bal = balancer(cfg)
        passes_until(bal, "the first node", lambda _: one_ready_node(tc, bal, baseline), 150)
        (lost,) = [n.name for n in bal.journal.nodes()]

        # a) Its execd stops with a job running there: the node is kept, past unreachable_timeout.
        jobs = submit_held_jobs(tc, 1, name="lost")  # runs until released, past unreachable_timeout
        wait_for("the job to start", lambda: job_state(tc, jobs[0]) == "r", 60)
        _stop_execd(tc, lost)
        since = time.monotonic()
        past = UNREACHABLE + 3
        kept = passes_until(bal, "unreachable_timeout to pass", lambda _: time.monotonic() - since > past, 60)
        assert [x for r in kept for x in (*r.outcomes.repaired, *r.outcomes.removed)] == []
        node = bal.journal.node(lost)
        assert node is not None and node.state is NodeState.READY
        assert lost in [w.name for w in tc.cloud().list_workers()]
        assert f"{lost}: SGE hasn't reached it for" in caplog.text
        assert f"lists jobs {jobs[0]} there; kept" in caplog.text
        # The job, never interrupted, ends well: it ends on the node while the execd is still down,
        # then the admin brings the execd back, which reports it. (A job that outlives an execd
        # restart is noticed ending only by the restarted execd's check of its old jobs, once a
        # minute: 60 s of waiting in this test. One that ended before is reported at its start.)
        release(lost, jobs)
        wait_for("the job to end on the node", lambda: set(job_hosts(jobs)) == set(jobs), 60)
        _start_execd(tc, lost)
        wait_gone(tc, jobs)
        assert_jobs_ran_ok(tc, jobs)
        assert job_hosts(jobs) == {jobs[0]: lost}
        assert bal.run_pass().ok  # as every poll does: the journal notes that SGE reaches the node again

        # b) Its execd stops with nothing there: elb status says so; then it is removed and replaced.
        _stop_execd(tc, lost)
        since = time.monotonic()
        status = subprocess.run(
            [sys.executable, "-m", "elb", "status", "--config", str(cfg_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        lines = [line for line in status.splitlines() if line.startswith(lost)]
        assert len(lines) == 1 and "the scheduler has not reached it for" in lines[0], status
        gone = passes_until(
            bal, "the lost node to be removed", lambda rs: bool(rs[-1].outcomes.repaired), UNREACHABLE + 60
        )
        assert [x.split(" (")[0] for x in gone[-1].outcomes.repaired] == [f"{lost}: unreachable"], gone[-1].summary()
        assert gone[-1].outcomes.removed == [lost]
        waited = time.monotonic() - since
        events = bal.journal.events(lost)
        assert [e.state for e in events[-3:]] == [NodeState.DRAINING, NodeState.DEREGISTERED, NodeState.TERMINATED]
        assert events[-3].detail is not None and "unreachable in SGE" in events[-3].detail
        assert lost not in [w.name for w in tc.cloud().list_workers()]
        assert lost not in cluster_state(tc)["exechosts"]  # type: ignore[operator]

        passes_until(bal, "a replacement node", lambda _: one_ready_node(tc, bal, baseline), 150)
        (new,) = [n.name for n in bal.journal.nodes()]
        assert int(new.removeprefix("node")) > int(lost.removeprefix("node"))  # numbers are not reused

        # c) The replacement's instance vanishes under a running job: the job dies with it. elb keeps the
        #    host registered and names the job every pass, without holding scaling up; once an admin
        #    ends the job (qdel -f), the next pass deregisters the host and a new node replaces it.
        doomed = submit_jobs(tc, 1, sleep=300, name="doomed")
        wait_for("the doomed job to start", lambda: job_state(tc, doomed[0]) == "r", 60)
        subprocess.run(["podman", "rm", "--force", "--time", "0", new], check=True, timeout=60, capture_output=True)
        caplog.clear()
        held = passes_until(bal, "two passes", lambda rs: len(rs) == 2, 30)
        assert [x for r in held for x in r.outcomes.repaired] == []
        assert all(r.plan is not None and "reconciling" not in r.plan.reason for r in held)
        assert f"{new}: instance gone (terminated outside elb) but SGE lists jobs {doomed[0]} there" in caplog.text
        assert new in cluster_state(tc)["exechosts"]  # type: ignore[operator]
        tc.master_run(["qdel", "-f", doomed[0]])
        cleared = passes_until(bal, "the vanished node's repair", lambda rs: bool(rs[-1].outcomes.repaired), 90)
        assert [x.split(" (")[0] for x in cleared[-1].outcomes.repaired] == [f"{new}: vanished"]
        assert new not in cluster_state(tc)["exechosts"]  # type: ignore[operator]
        passes_until(bal, "a second replacement", lambda _: one_ready_node(tc, bal, baseline), 150)
        (third,) = [n.name for n in bal.journal.nodes()]
        bal.journal.close()
        figures(
            "execd_lost",
            lost=lost,
            replacement=new,
            seconds_lost_to_removed=round(waited, 1),
            vanished_under_job=new,
            passes_kept_under_job=len(held) + len(cleared) - 1,
            second_replacement=third,
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        clean_up(tc, cfg, baseline)


# ---------------------------------------------------------------------------------------------------------
# 5. qstat fails or lies for several passes: nothing added or removed; then recovery.

LYING_QSTAT = """#!/bin/sh
mode=$(cat "$(dirname "$0")/mode")
case "$mode" in
  real) exec /usr/bin/qstat "$@" ;;
  fail) echo "error: commlib error: got select error (Connection refused)" >&2; exit 1 ;;
  garbage) echo '<?xml version="1.0"?><job_info><queue_info><job_list state="run'; exit 0 ;;
  noise) head -c 300 /dev/urandom; exit 0 ;;
  empty) exit 0 ;;
  hollow) echo '<?xml version="1.0"?><job_info><queue_info></queue_info><job_info></job_info></job_info>'; exit 0 ;;
  hang) exec sleep 120 ;;
esac
echo "unknown mode" >&2
exit 3
"""
LIES = ("fail", "garbage", "noise", "empty", "hang")
# Well-formed, no queue instance, no job. With no exec host it is what an empty cluster prints and
# cannot be refused (it shows no job, so it adds nothing); beside a qhost that shows queue
# instances, it must be refused.
HOLLOW = "hollow"


def lying_sge_dir(tmp: Path) -> Path:
    bin_dir = tmp / "sgebin"
    bin_dir.mkdir()
    qstat = bin_dir / "qstat"
    qstat.write_text(LYING_QSTAT)
    qstat.chmod(0o755)
    for name in ("qhost", "qmod", "qconf", "qacct"):
        (bin_dir / name).symlink_to(f"/usr/bin/{name}")
    (bin_dir / "mode").write_text("real")
    return bin_dir


def test_qstat_failing_or_lying_changes_nothing_then_elb_recovers(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    bin_dir = lying_sge_dir(tmp_path)
    mode = bin_dir / "mode"
    base = fault_config(tmp_path)
    cfg = base.with_section(sge_settings(base).model_copy(update={"bin_dir": bin_dir, "timeout": 3.0}))
    bal = balancer(cfg)
    t0 = time.monotonic()
    lying = 0
    try:
        # A job waits: elb would add a node at once. qstat fails / lies for a pass of each kind.
        jobs = submit_jobs(tc, 1, name="lies")
        time.sleep(1.5)
        for lie in LIES:
            mode.write_text(lie)
            r = bal.run_pass()
            lying += 1
            assert not r.ok, f"{lie}: {r.summary()}"
            assert "reading SGE" in (r.error or ""), r.error
            assert tc.workers() == [] and bal.journal.nodes() == [], f"{lie}: something was launched"
        assert bal.failed_in_a_row == len(LIES)
        mode.write_text(HOLLOW)
        r = bal.run_pass()
        lying += 1
        assert r.ok and not r.outcomes.added and tc.workers() == [], r.summary()
        mode.write_text("real")
        grown = passes_until(bal, "a node to be added", lambda rs: bool(rs[-1].outcomes.added), 120)
        node = grown[-1].outcomes.added[0]
        passes_until(bal, "the job to run", lambda _: set(job_hosts(jobs)) == set(jobs), 120)
        assert job_hosts(jobs) == {jobs[0]: node}

        # The node is idle past idle_time: elb would remove it at once. qstat lies again.
        time.sleep(cfg.policy.idle_time + 1)
        for lie in (*LIES, HOLLOW):
            mode.write_text(lie)
            r = bal.run_pass()
            lying += 1
            assert not r.ok, f"{lie}: {r.summary()}"
            n = bal.journal.node(node)
            assert n is not None and n.state is NodeState.READY, f"{lie}: {n}"
            assert [w.name for w in tc.workers()] == [node]
            assert node in cluster_state(tc)["exechosts"]  # type: ignore[operator]
            assert "d" not in queue_states(tc, node), f"{lie}: {node} disabled"
        mode.write_text("real")
        shrunk = passes_until(bal, "the node to be removed", lambda rs: bool(rs[-1].outcomes.removed), 60)
        assert len(shrunk) == 1, "the removal was due: the first good pass must make it"
        assert_jobs_ran_ok(tc, jobs)
        assert disagreements(tc, bal.journal, baseline) == []
        assert cluster_state(tc) == baseline
        figures("qstat_lies", lying_passes=lying, kinds=[*LIES, HOLLOW], seconds=round(time.monotonic() - t0, 1))
    finally:
        mode.write_text("real")
        bal.journal.close()
        clean_up(tc, cfg, baseline)


# ---------------------------------------------------------------------------------------------------------
# 4. A node that never comes up (boot time-out) and a node that vanishes: reconcile cleans both up.


def _stop_sshd(tc: TestCluster, node: str) -> None:
    """SIGSTOP the node's sshd (the child of the container's init): it accepts, never answers."""
    pid = subprocess.run(
        ["podman", "inspect", "--format", "{{.State.Pid}}", node],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert children, f"{node}: no process under the container's init"
    for child in children:
        os.kill(int(child), signal.SIGSTOP)


# The back-off after a failed bring-up in a test whose node fails on purpose and whose next launch
# is not what it checks (fault_config's: 5 s).
SHORT_BACKOFF = 1.0


def test_node_that_never_comes_up_and_node_that_vanishes_are_cleaned_up(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    # The stuck node is abandoned once boot_timeout has passed since its launch, and the test waits
    # that out: short, as a launch here is running within a second or two (its play is done within
    # the pass that launched it, so the replacement is never judged by it).
    cfg = with_backoff(fault_config(tmp_path, boot_timeout=10, idle_time=600), SHORT_BACKOFF)
    cfg_path = write_config(cfg, tmp_path / "elb.yml")
    t0 = time.monotonic()
    try:
        jobs = submit_jobs(tc, 1, name="vanish")
        time.sleep(1.5)
        # elb launches a node and dies before provisioning it; the node's sshd never answers.
        r = elb_killed_at(cfg_path, "running")
        assert r.returncode == -signal.SIGKILL, r.stdout
        step = last_step(cfg.journal_path)
        assert step is not None and step[1] is NodeState.RUNNING
        stuck = step[0]
        _stop_sshd(tc, stuck)
        bal = balancer(cfg)
        launched = bal.journal.node(stuck)
        assert launched is not None
        time.sleep(max(0.0, launched.launched_at + cloud_settings(cfg).boot_timeout + 1 - time.time()))
        # elb restarts past boot_timeout: reconcile abandons the node, cleans it up, terminates it.
        first = bal.run_pass()
        assert first.ok, first.summary()
        assert any(f"{stuck}: abandon" in r for r in first.outcomes.repaired), first.summary()
        n = bal.journal.node(stuck)
        assert n is not None and n.state is NodeState.FAILED, n
        assert stuck not in [w.name for w in tc.cloud().list_workers()]

        # The job still waits: elb adds a node that serves it.
        passes_until(bal, "a node to run the job", lambda _: set(job_hosts(jobs)) == set(jobs), 150)
        node = job_hosts(jobs)[jobs[0]]
        assert node != stuck
        wait_gone(tc, jobs)  # the job wrote its last line; let it end before its node vanishes
        assert converged(tc, bal, baseline) == []
        # The node vanishes: its container is removed by hand.
        subprocess.run(["podman", "rm", "--force", "--time", "0", node], check=True, timeout=60, capture_output=True)
        gone = passes_until(bal, "reconcile to notice", lambda rs: bool(rs[-1].outcomes.repaired), 30)
        assert any(f"{node}: vanished" in r for r in gone[-1].outcomes.repaired), gone[-1].summary()
        n = bal.journal.node(node)
        assert n is not None and n.state is NodeState.FAILED, n
        assert disagreements(tc, bal.journal, baseline) == []
        assert cluster_state(tc) == baseline
        assert_jobs_ran_ok(tc, jobs)
        bal.journal.close()
        figures("boot_timeout_and_vanished", stuck=stuck, vanished=node, seconds=round(time.monotonic() - t0, 1))
    finally:
        clean_up(tc, cfg, baseline)


# ---------------------------------------------------------------------------------------------------------
# 3. Provisioning fails on one of two new nodes: that node is terminated, the other serves jobs.

BREAK_EXECD = "printf '#!/bin/sh\\nexit 0\\n' > /usr/sbin/sge_execd && chmod 755 /usr/sbin/sge_execd"


class BreakOneOfTwo(LocalCloud):
    """LocalCloud that, after launching two nodes at once, breaks the second one's sge_execd
    (it exits at once, so it never reports to the qmaster and the play fails on that host)."""

    broken: str | None = None

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        res = super().launch(names, stopping=stopping)
        if self.broken is None and len(res.launched) == 2:
            victim = res.launched[1].name
            subprocess.run(["podman", "exec", victim, "sh", "-c", BREAK_EXECD], check=True, timeout=30)
            self.broken = victim
        return res


def test_provisioning_fails_on_one_of_two_new_nodes(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    cfg = fault_config(
        tmp_path,
        boot_timeout=BATCH_BOOT_TIMEOUT,
        max_nodes=2,
        add_nodes_per_iteration=2,
        slots_per_node=1,
        idle_time=600,
    )
    cloud = BreakOneOfTwo.from_config(cfg)
    bal = balancer(cfg, cloud=cloud)
    t0 = time.monotonic()
    try:
        jobs = submit_jobs(tc, 4, sleep=2, name="onebad")
        time.sleep(1.5)
        grown = passes_until(bal, "the add", lambda rs: bool(rs[-1].outcomes.added or rs[-1].outcomes.failed), 240)
        out = grown[-1].outcomes
        victim = cloud.broken
        assert victim is not None, "two nodes were not launched together"
        assert victim in out.failed and "provisioning failed" in out.failed[victim], out
        assert len(out.added) == 1 and out.added[0] != victim, out
        good = out.added[0]
        n = bal.journal.node(victim)
        assert n is not None and n.state is NodeState.FAILED, n
        assert victim not in [w.name for w in tc.cloud().list_workers()], "the failed node was not terminated"
        assert converged(tc, bal, baseline) == []

        passes_until(bal, "the jobs to run", lambda _: set(job_hosts(jobs)) == set(jobs), 240)
        hosts = assert_jobs_ran_ok(tc, jobs)
        assert victim not in hosts.values()
        assert good in hosts.values()
        bal.journal.close()
        figures("one_of_two_fails", good=good, failed=victim, hosts=hosts, seconds=round(time.monotonic() - t0, 1))
    finally:
        clean_up(tc, cfg, baseline)


# ---------------------------------------------------------------------------------------------------------
# 2. elb killed by SIGKILL at each step of adding and of removing a node, then restarted.

# (step of the add, delay after it), (step of the removal, delay after it) or None: a normal removal
CRASHES: list[tuple[tuple[str, float], tuple[str, float] | None]] = [
    (("requested", 0.0), ("draining", 0.0)),
    (("launching", 0.0), ("deregistered", 0.0)),
    (("running", 0.0), ("sge-deregistered", 0.0)),  # mid-play: out of SGE, not yet out of hosts/exports
    (("provisioning", 4.0), None),  # in the middle of the provisioning play
]
# A restart forgets a node the journal has as requested but the cloud has no instance of once
# boot_timeout has passed since the request, and only then launches for the job: the cycle that
# kills elb at "requested" waits that long, so it runs with a shorter boot_timeout (a launch here
# is running within a second or two; a launch and its play are done within one pass). The other
# cycles keep fault_config's: the restart after a kill in the middle of the provisioning play must
# find the node younger than boot_timeout, to provision it rather than abandon it.
FORGET_BOOT_TIMEOUT = 10.0


def with_boot_timeout(cfg: Config, seconds: float) -> Config:
    local = local_settings(cfg).model_copy(update={"boot_timeout": seconds})
    return cfg.with_section(local)


def test_sigkill_at_each_step_then_restart_converges(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    cfg = fault_config(tmp_path)
    t0 = time.monotonic()
    crashes: list[dict[str, object]] = []
    all_jobs: list[str] = []
    try:
        for (add_step, add_delay), removal in CRASHES:
            # the forgotten request is a failed bring-up: the launch after it backs off
            cycle = (
                with_backoff(with_boot_timeout(cfg, FORGET_BOOT_TIMEOUT), SHORT_BACKOFF)
                if add_step == "requested"
                else cfg
            )
            cfg_path = write_config(cycle, tmp_path / f"elb-{add_step}.yml")
            jobs = submit_jobs(tc, 1, name=add_step[:4])
            all_jobs += jobs
            time.sleep(1.5)
            r = elb_killed_at(cfg_path, add_step, delay=add_delay)
            assert r.returncode == -signal.SIGKILL, r.stdout
            step = last_step(cfg.journal_path)
            assert step is not None and step[1] is NodeState(add_step), step
            left = [w.name for w in tc.cloud().list_workers()]
            crash: dict[str, object] = {"step": add_step, "delay": add_delay, "node": step[0], "containers": left}
            if add_step == "launching":
                assert step[0] in left, "killed mid-launch: the container must exist"

            bal = balancer(cycle)  # elb restarts
            passes = passes_until(
                bal,
                f"convergence after a kill at {add_step}",
                lambda _: set(job_hosts(jobs)) == set(jobs) and not converged(tc, bal, baseline),  # noqa: B023 (called at once)
                cloud_settings(cycle).boot_timeout + 180,
            )
            crash["repairs"] = [x for p in passes for x in p.outcomes.repaired]
            crash["passes_to_converge"] = len(passes)
            assert crash["repairs"] or add_step == "requested", "the restart repaired nothing"
            crashes.append(crash)
            bal.journal.close()

            wait_gone(tc, jobs)
            time.sleep(cfg.policy.idle_time + 1.5)  # the node is idle: the next pass removes it
            if removal is not None:
                rm_step, rm_delay = removal
                r = elb_killed_at(cfg_path, rm_step, delay=rm_delay)
                assert r.returncode == -signal.SIGKILL, r.stdout
                step = last_step(cfg.journal_path)
                assert step is not None and step[1] is NodeState(rm_step.replace("sge-deregistered", "draining"))
                crash = {"step": rm_step, "delay": rm_delay, "node": step[0]}
                bal = balancer(cycle)
                passes = passes_until(
                    bal,
                    f"convergence after a kill at {rm_step}",
                    lambda _: not bal.journal.nodes() and not converged(tc, bal, baseline),  # noqa: B023
                    120,
                )
                crash["repairs"] = [x for p in passes for x in p.outcomes.repaired]
                crash["passes_to_converge"] = len(passes)
                assert crash["repairs"], "the restart repaired nothing"
                crashes.append(crash)
            else:
                bal = balancer(cycle)
                passes_until(bal, "the node to be removed", lambda _: not bal.journal.nodes(), 60)  # noqa: B023
            bal.journal.close()
            assert tc.cloud().list_workers() == []
            assert cluster_state(tc) == baseline

        hosts = assert_jobs_ran_ok(tc, all_jobs)
        figures(
            "sigkill",
            crashes_injected=len(crashes),
            crashes=crashes,
            jobs=len(hosts),
            jobs_lost=len(all_jobs) - len(hosts),
            nodes_leaked=len(tc.cloud().list_workers()),
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        clean_up(tc, cfg, baseline)


# ---------------------------------------------------------------------------------------------------------
# 1. A job submitted just as a node is drained, many times over.

# 5 races in CI, their submit times spread over the whole window (``race_offsets``); the soak of 50
# is a benchmark (benchmarks/bench_fault_soaks.py, docs/safety.md).
RACES = int(os.environ.get("ELB_FAULT_RACES", "3"))
# Submit this many seconds relative to the drain: < 0 before the removal starts, >= 0 that long after
# elb's ``qmod -d`` went out. The window is L +- ~1 s before the drain, with L the measured time from qsub
# to dispatch on the node (SGE schedules every second), so the job is dispatched just before, while or
# just after the node is disabled; one race in ten (at least one) submits after ``qmod -d``.
EARLY, LATE = 1.0, 0.75
AFTER = (0.0, 0.2)


def dispatch_latency(tc: TestCluster, node: str, jobs: list[str], probes: int = 3) -> float:
    """Median seconds from qsub to the job dispatched (state t or r) on ``node``."""
    seen = []
    for _ in range(probes):
        t = time.monotonic()
        jid = submit_jobs(tc, 1, sleep=0.5, name="probe")[0]
        jobs.append(jid)
        while not {"t", "r"} & set(job_state(tc, jid)):
            assert time.monotonic() - t < 60, f"probe {jid} not dispatched to {node} in 60 s"
            time.sleep(0.05)
        seen.append(time.monotonic() - t)
        wait_gone(tc, [jid])
    return sorted(seen)[len(seen) // 2]


class HookedSge:
    """The real SGE client; ``disable_host`` first tells the submitter to fire."""

    def __init__(self, real: SgeCommands) -> None:
        self.real = real
        self.on_disable: threading.Event | None = None

    def read_snapshot(self) -> Snapshot:
        return self.real.read_snapshot()

    def disable_host(self, host: str) -> None:
        if self.on_disable is not None:
            self.on_disable.set()
        self.real.disable_host(host)

    def enable_host(self, host: str) -> None:
        self.real.enable_host(host)

    def reschedule_host(self, host: str) -> Rescheduled:
        return self.real.reschedule_host(host)

    def configured_exec_hosts(self) -> frozenset[str]:
        return self.real.configured_exec_hosts()

    def read_site(self) -> Site:
        return self.real.read_site()

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        return self.real.start_times(job_ids)


# Nodes added per provisioning run. Each race that ends in a removal needs a fresh node; adding them
# a few at a time (one play) and keeping the spares disabled (so the scheduler can only pick the
# node under test) costs a fraction of one play per removal. No more than the races can use.
BATCH = min(6, RACES + 1)


@pytest.mark.timeout(1500)  # 50 races and their replacement nodes: longer than pyproject's 900 s
def test_job_submitted_as_the_node_drains_is_never_lost_or_killed(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    baseline = cluster_state(tc)
    cfg = fault_config(tmp_path, boot_timeout=BATCH_BOOT_TIMEOUT, idle_time=600)
    bal = balancer(cfg)
    sge = HookedSge(bal.scheduler.sge)  # type: ignore[attr-defined]
    assert bal.cloud is not None and bal.provisioner is not None
    act = Actuator(bal.journal, GridEngine(cfg, sge), bal.cloud, bal.provisioner, time.time)  # type: ignore[arg-type]
    seed = int(os.environ.get("ELB_FAULT_SEED", str(int(time.time()))))
    rng = random.Random(seed)
    counter = iter(range(901, 1000))
    t0 = time.monotonic()
    jobs: list[str] = []
    outcomes = {"kept": 0, "removed": 0, "failed": 0}
    kept_offsets: list[float] = []
    removed_offsets: list[float] = []
    spares: list[str] = []
    batches = 0

    def next_node() -> str:
        """The next node under test: a spare, enabled now, or the first of a new batch whose
        other nodes become the (disabled) spares."""
        nonlocal batches
        if not spares:
            names = [f"node{next(counter)}" for _ in range(BATCH)]
            out = Outcomes()
            act.request(names, "fault test")
            act.launch(names, out)
            assert out.added == names, out
            batches += 1
            for spare in names[1:]:
                sge.real.disable_host(spare)
            spares.extend(names[1:])
            return names[0]
        name = spares.pop(0)
        sge.real.enable_host(name)
        return name

    try:
        node = next_node()
        latency = dispatch_latency(tc, node, jobs)
        offsets = (-(latency + EARLY), -max(0.0, latency - LATE))
        for i, offset in enumerate(race_offsets(RACES, offsets, AFTER, rng)):
            fire = threading.Event()
            sge.on_disable = fire if offset >= 0 else None
            submitted: list[str] = []

            def submitter(offset: float = offset, fire: threading.Event = fire, out: list[str] = submitted) -> None:
                if offset >= 0:
                    fire.wait(30)
                    time.sleep(offset)
                out.extend(submit_jobs(tc, 1, sleep=0.5, name="race"))

            t = threading.Thread(target=submitter)
            t.start()
            if offset < 0:
                time.sleep(-offset)
            out = Outcomes()
            act.remove_all([Removal(node, "fault test: drain race")], out)
            t.join(60)
            assert submitted, "the submitter did not submit"
            jobs += submitted
            if out.removed == [node]:
                outcomes["removed"] += 1
                removed_offsets.append(offset)
                node = next_node()  # the job waits for a node; this one serves it
            elif out.kept == [node]:
                outcomes["kept"] += 1
                kept_offsets.append(offset)
                n = bal.journal.node(node)
                assert n is not None and n.state is NodeState.READY, n
            else:
                outcomes["failed"] += 1
                raise AssertionError(f"neither removed nor kept: {out}")
            print(f"race {i + 1}/{RACES}: offset {offset:+.2f} s, job {submitted[0]}: {outcomes}", flush=True)
            wait_gone(tc, submitted)
            assert "d" not in queue_states(tc, node), f"{node} left disabled"

        hosts = assert_jobs_ran_ok(tc, jobs)
        for name in [node, *spares]:
            out = Outcomes()
            act.remove_all([Removal(name, "fault test: done")], out)
            assert out.removed == [name], out
        assert disagreements(tc, bal.journal, baseline) == []
        assert cluster_state(tc) == baseline
        figures(
            "drain_race",
            races=RACES,
            seed=seed,
            dispatch_latency=round(latency, 2),
            offsets=[round(offsets[0], 2), round(offsets[1], 2)],
            **outcomes,
            kept_offset_range=[round(min(kept_offsets, default=0), 2), round(max(kept_offsets, default=0), 2)],
            removed_offset_range=[round(min(removed_offsets, default=0), 2), round(max(removed_offsets, default=0), 2)],
            jobs=len(jobs),
            nodes_added=batches * BATCH,
            jobs_lost=len(jobs) - len(hosts),
            nodes_leaked=len(tc.cloud().list_workers()),
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        bal.journal.close()
        clean_up(tc, cfg, baseline)
