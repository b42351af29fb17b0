"""A spot interruption on the real test cluster: real SGE, podman nodes through LocalCloud, real
Ansible. EC2's notice is the one stand-in (EventBridge and SQS cannot be reached from here; their
parsing is tested against moto in tests/moto/test_ec2_notices.py): a notice source that reports
an interruption for the node the jobs run on. elb disables the node at once, requeues its
rerunnable job, which starts again and ends on a new node, lets the job that is not rerunnable end
where it runs, and removes both nodes once idle, leaving the cluster as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from elb.clouds import local
from elb.core.config import Config
from elb.core.interfaces import Notice, NoticeKind
from elb.core.model import NodeState
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
from tests.cluster.test_elb_e2e import e2e_config, passes_until

pytestmark = pytest.mark.cluster

# Each run of a job writes where it ran and whether SGE restarted it ($RESTARTED is 1 for a run
# after a requeue). A run killed by the requeue writes nothing; one that ended just before the
# requeue reached it leaves its line until the rerun overwrites it. A first run lasts 30 s, long
# past the notice; a rerun only has to run and end on the new node, so it is short.
JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
touch "$HOME/spot/$JOB_ID.started"
if [ "${RESTARTED:-0}" = 1 ]; then sleep 1; else sleep 30; fi
echo "$(hostname) ${RESTARTED:-0}" > "$HOME/spot/$JOB_ID.host"
"""


def ran(path: Path) -> tuple[str, str] | None:
    """(host, restarted) of the last run of a job that wrote ``path``; None before it did."""
    line = written(path)
    if line is None:
        return None
    host, restarted = line.split()
    return host, restarted


def runs_of(tc: TestCluster, job_ids: Sequence[str]) -> str:
    """What SGE's accounting says of each run of the jobs: where, how it ended, its exit status."""
    keep = ("jobnumber", "hostname", "start_time", "end_time", "failed", "exit_status")
    out = []
    for job in job_ids:
        acct = tc.master_run(["qacct", "-j", job], check=False).stdout
        out += [line for line in acct.splitlines() if line.split(" ", 1)[0] in keep]
    return "SGE's accounting of the jobs' runs:\n" + "\n".join(out)


def nfs_logs(names: Sequence[str]) -> str:
    """The end of each node's NFS client log, kept on this machine past the node's life."""
    out = []
    for name in names:
        for path in sorted((local.NODE_LOGS / name).glob("*.log")):
            out.append(f"--- {path} (its end):\n{path.read_text(errors='replace')[-3000:]}")
    return "\n".join(out) or f"no NFS client log of {', '.join(names)} in {local.NODE_LOGS}"


class Interruptions:
    """Stand-in for EC2's notice queue: the notices handed to it, each delivered once."""

    def __init__(self) -> None:
        self.queue: list[Notice] = []

    def poll(self) -> Sequence[Notice]:
        out, self.queue = self.queue, []
        return out


def test_a_spot_interruption_requeues_the_rerunnable_job_and_replaces_the_node(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    before = cluster_state(tc)
    home = Path("/home") / C.CLUSTER_USER / "spot"
    tc.master_run(["rm", "-rf", str(home)], check=False)
    tc.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    cfg: Config = e2e_config(tmp_path)
    notices = Interruptions()
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, SgeCommands(sge_settings(cfg))),
        journal=Journal(cfg.journal_path),
        cloud=factory.make_cloud(cfg),
        provisioner=factory.make_provisioner(cfg),
        notices=notices,
    )
    rerun = tc.submit(JOB, "-N", "spot-rerun", "-r", "y", "-o", "/dev/null")
    stays = tc.submit(JOB, "-N", "spot-stays", "-r", "n", "-o", "/dev/null")

    # One 2-slot node for the two jobs; both start on it.
    grown = passes_until(bal, "a node", lambda rs: bool(rs[-1].outcomes.added), timeout=120)
    (doomed,) = grown[-1].outcomes.added

    def both_running(rs: list[PassResult]) -> bool:
        snap = rs[-1].snapshot
        # Running ("r", not still in transfer to the node) and their scripts started: a requeue
        # then reaches the run itself (one caught while starting may end where it began).
        running = {j.job_id for j in snap.jobs if j.host == doomed and j.state == "r"} if snap is not None else set()
        started = all((home / f"{j}.started").exists() for j in (rerun, stays))
        return running == {int(rerun), int(stays)} and started

    passes_until(bal, "both jobs to run on the node", both_running, timeout=60)
    instance = bal.journal.node(doomed).instance_id  # type: ignore[union-attr]
    assert instance is not None
    notices.queue = [Notice(NoticeKind.INTERRUPTION, instance, 0.0, "Spot Instance Interruption Warning: terminate")]
    assert bal.run_pass().ok
    # At once: nothing new lands on the node, its rerunnable job is off it, its removal is ordered.
    assert isinstance(bal.scheduler, GridEngine)
    snap = bal.scheduler.sge.read_snapshot()
    (host,) = [h for h in snap.hosts if h.name == doomed]
    assert all(q.disabled for q in host.queues)
    assert {j.job_id: j.host for j in snap.jobs}.get(int(rerun)) != doomed
    assert doomed in bal.journal.orders().remove

    # The rerunnable job starts again on a new node and ends there; the other ends on the doomed node.
    def both_done(_: list[PassResult]) -> bool:
        done = {p.stem for p in home.glob("*.host") if written(p) is not None} == {rerun, stays}
        last = ran(home / f"{rerun}.host")
        return done and last is not None and last[1] == "1"

    try:
        passes_until(bal, "both jobs to end", both_done, timeout=300)
    except AssertionError as err:  # what each run of the jobs left, for the reader of a failure
        left = {p.name: p.read_text().strip() for p in sorted(home.iterdir())}
        nodes = [n.name for n in bal.journal.nodes(include_gone=True)]
        why = f"the jobs' files in {home}: {left}\n{runs_of(tc, (rerun, stays))}\n{nfs_logs(nodes)}"
        raise AssertionError(f"{err}\n{why}") from None
    assert bal.counters.rescheduled == 1
    assert ran(home / f"{stays}.host") == (doomed, "0")
    rerun_ran = ran(home / f"{rerun}.host")
    assert rerun_ran is not None
    replacement = rerun_ran[0]
    assert replacement != doomed

    def all_gone(_: list[PassResult]) -> bool:
        return tc.workers() == []

    passes_until(bal, "every node to be removed", all_gone, timeout=180)
    assert bal.journal.node(doomed).state is NodeState.TERMINATED  # type: ignore[union-attr]
    assert bal.journal.node(replacement).state is NodeState.TERMINATED  # type: ignore[union-attr]
    assert cluster_state(tc) == before
    bal.journal.close()
