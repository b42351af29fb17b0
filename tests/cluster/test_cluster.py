"""Cluster tests: real SGE, real podman nodes, real SSH and Ansible (marked ``cluster``).

Run alone with ``python -m pytest -m cluster tests/cluster`` as root; the session fixture
in conftest.py brings the test cluster up and always tears it down. The tests share one
cluster and run in file order: each leaves the cluster as it found it (no workers).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from elb.clouds.local import LocalCloud
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError, Outcome
from elb.schedulers.sge.driver import ADD_PLAYBOOK, REMOVE_PLAYBOOK
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, job_state, provisioner, qconf_words, spec, wait_for

pytestmark = pytest.mark.cluster


def _home_file(name: str) -> Path:
    return Path(f"/home/{C.CLUSTER_USER}") / name


def test_two_nodes_added_in_one_run_run_jobs_that_write_home_and_a_busy_one_is_not_removed(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    tc = testcluster
    before = cluster_state(tc)
    new = tc.launch(2)
    t = time.monotonic()
    results = provisioner(tmp_path).add_nodes(ADD_PLAYBOOK, [spec(i) for i in new], existing=[])
    seconds = time.monotonic() - t
    print(f"\nadd_node.yml (provisioner) for 2 nodes: {seconds:.1f} s")
    assert {n: r.outcome for n, r in results.items()} == {i.name: Outcome.OK for i in new}, results
    names = sorted(i.name for i in new)
    assert sorted(qconf_words(tc, "-sel")) == names
    try:
        # One job pinned to each node, submitted as the cluster user on the master.
        stamp = str(time.time_ns())
        jobs = {}
        for name in names:
            out = f"where-{stamp}-{name}"
            script = (
                f"#!/bin/sh\nhostname > $HOME/{out}.tmp && id -un >> $HOME/{out}.tmp\nmv $HOME/{out}.tmp $HOME/{out}\n"
            )
            jobs[name] = tc.submit(script, "-l", f"hostname={name}", "-o", "/dev/null", "-j", "y")
        for name in names:
            path = _home_file(f"where-{stamp}-{name}")
            wait_for(f"job {jobs[name]} to write {path}", path.exists, timeout=120)
            assert path.read_text().split() == [name, C.CLUSTER_USER]
            assert path.stat().st_uid == C.CLUSTER_UID
            path.unlink()
        # A second run of the same playbook changes nothing.
        pb = tc.run_playbook("add_node.yml", new_nodes=[spec(i) for i in new])
        assert pb.ok, pb.stdout[-3000:]
        assert {h: pb.changed(h) for h in names} == dict.fromkeys(names, 0), pb.stdout[-3000:]
        # A node that runs a job is not removed: BUSY, still a working exec host, its queue
        # instance enabled again, the job still running. Its removal below, once the job is
        # gone, succeeds.
        busy = names[0]
        job = tc.submit("#!/bin/sh\nsleep 300\n", "-l", f"hostname={busy}", "-o", "/dev/null", "-j", "y")
        try:
            wait_for(f"job {job} running", lambda: job_state(tc, job) == "r")
            result = provisioner(tmp_path).remove_nodes(
                REMOVE_PLAYBOOK, [spec(i) for i in new if i.name == busy], existing=[]
            )
            assert result[busy].outcome is Outcome.BUSY, result
            assert busy in qconf_words(tc, "-sel")
            qstat = tc.master_run(["qstat", "-f", "-q", f"{C.QUEUE}@{busy}"]).stdout
            line = next(ln for ln in qstat.splitlines() if ln.startswith(f"{C.QUEUE}@{busy}"))
            assert "d" not in line.split()[5:], line
            assert job_state(tc, job) == "r"
        finally:
            tc.master_run(["qdel", "-f", job], check=False)
            wait_for(f"job {job} gone", lambda: job_state(tc, job) == "", timeout=60)
    finally:
        # Remove one live node (the one that was busy) and one that was killed first (container
        # gone, no goodbye).
        live, dead = sorted(new, key=lambda i: i.name)
        tc.cloud().terminate([dead.instance_id])
        t = time.monotonic()
        removed = provisioner(tmp_path).remove_nodes(REMOVE_PLAYBOOK, [spec(live), spec(dead)], existing=[])
        print(f"remove_node.yml for 1 live + 1 dead node: {time.monotonic() - t:.1f} s")
        tc.cloud().terminate([w.instance_id for w in tc.workers()])
    assert {n: r.outcome for n, r in removed.items()} == {live.name: Outcome.OK, dead.name: Outcome.OK}, removed
    assert cluster_state(tc) == before


def _replace_with_exit(node: str, path: str, rc: int) -> None:
    """Replace the program at ``path`` on ``node`` with one that exits ``rc`` at once."""
    script = f"#!/bin/sh\necho broken by the test >&2\nexit {rc}\n"
    subprocess.run(
        ["podman", "exec", "-i", node, "sh", "-c", 'cat > "$1" && chmod 755 "$1"', "sh", path],
        input=script,
        text=True,
        check=True,
        timeout=30,
    )


def test_failed_provisioning_is_reported_and_leaves_nothing_registered(
    testcluster: TestCluster, tmp_path: Path
) -> None:
    """Two nodes in one run, each failing at its own place: one before the registration (its
    mount), one after it (the worst place to fail). The one that failed first is left out of
    the registration of the rest; both are reported with where they failed and both are taken
    out again."""
    tc = testcluster
    before = cluster_state(tc)
    early, late = sorted(tc.launch(2), key=lambda i: i.name)
    try:
        # The early node's mount fails (the play does not try a mount again by default).
        _replace_with_exit(early.name, "/usr/bin/mount", 32)
        # The late node's execd starts and exits at once, so it never reports to the qmaster and
        # the play fails after the SGE registration.
        _replace_with_exit(late.name, "/usr/sbin/sge_execd", 0)
        prov = provisioner(tmp_path, sge_exec_wait_retries=3, sge_exec_wait_delay=1)
        results = prov.add_nodes(ADD_PLAYBOOK, [spec(early), spec(late)], existing=[])
        r = results[early.name]
        assert r.outcome is Outcome.FAILED, r
        assert r.task is not None and r.message is not None
        assert "Mount the master's exports" in (r.task + " " + r.message), r
        r = results[late.name]
        assert r.outcome is Outcome.FAILED, r
        assert r.task is not None and r.message is not None
        assert "qhost shows the node up" in (r.task + " " + r.message), r
    finally:
        tc.cloud().terminate([early.instance_id, late.instance_id])
    assert cluster_state(tc) == before


def test_local_cloud_sees_and_terminates_only_its_own_workers(testcluster: TestCluster) -> None:
    tc = testcluster
    cloud = tc.cloud()
    other = LocalCloud(tc.local_config, "another-cluster", authorized_key=C.SSH_PUBKEY)
    mine = cloud.launch(["node901"])
    theirs = other.launch(["node902"])
    try:
        assert not mine.failed and not theirs.failed, (mine.failed, theirs.failed)
        (inst,) = mine.launched
        assert inst.state == "running" and inst.private_ip and inst.private_ip.startswith("10.77.0.")
        assert inst.tags == {
            TAG_CLUSTER: tc.cluster_name,
            TAG_ROLE: "worker",
            TAG_MANAGED_BY: "elb",
            TAG_NAME: "node901",
        }
        assert [i.name for i in cloud.list_workers()] == ["node901"]
        assert [i.name for i in other.list_workers()] == ["node902"]
        with pytest.raises(CloudError, match="refusing"):
            cloud.terminate([theirs.launched[0].instance_id])
        assert [i.name for i in other.list_workers()] == ["node902"]
        again = cloud.launch(["node901", "-bad"])
        assert set(again.failed) == {"node901", "-bad"} and not again.launched
    finally:
        cloud.terminate([i.instance_id for i in cloud.list_workers()])
        other.terminate([i.instance_id for i in other.list_workers()])
    assert cloud.list_workers() == [] and other.list_workers() == []


def test_a_local_node_keeps_its_address_through_a_stop_and_a_start(testcluster: TestCluster) -> None:
    """As an EC2 instance keeps its private address: SGE's qmaster caches what a name resolves
    to and loses an exec host that comes back on another address. Two nodes never share one."""
    cloud = testcluster.cloud()
    launched = cloud.launch(["node903", "node904"])
    try:
        assert not launched.failed, launched.failed
        first, second = launched.launched
        assert first.private_ip != second.private_ip
        cloud.stop([first.instance_id])
        assert {i.name: i.state for i in cloud.list_workers()}["node903"] == "stopped"
        # A node launched while the first is stopped does not take its address.
        third = cloud.launch(["node905"])
        assert not third.failed and third.launched[0].private_ip not in (first.private_ip, second.private_ip)
        started = cloud.start([first.instance_id])
        assert not started.failed, started.failed
        assert started.launched[0].private_ip == first.private_ip
    finally:
        cloud.terminate([i.instance_id for i in cloud.list_workers()])
    assert cloud.list_workers() == []


def test_a_name_launched_again_gets_its_old_address_and_a_new_name_one_never_given(testcluster: TestCluster) -> None:
    """Each test runs elb with a journal of its own against one qmaster, so names come back on
    the test cluster; the qmaster caches what a name resolves to and which name an address has,
    and an exec host whose name came back on another address went to state ``u`` about two
    minutes after its add play succeeded (seen with a spot interruption test's replacement)."""
    cloud = testcluster.cloud()
    try:
        first = cloud.launch(["node906", "node907"])
        assert not first.failed, first.failed
        had = {i.name: i.private_ip for i in first.launched}
        cloud.terminate([i.instance_id for i in first.launched])
        # A new name does not take an address a gone node had; a name back gets its own again.
        again = cloud.launch(["node908", "node907"])
        assert not again.failed, again.failed
        got = {i.name: i.private_ip for i in again.launched}
        assert got["node907"] == had["node907"]
        assert got["node908"] not in had.values()
    finally:
        cloud.terminate([i.instance_id for i in cloud.list_workers()])
    assert cloud.list_workers() == []


def test_site_converges_live_workers_and_cleans_out_dead_ones(testcluster: TestCluster) -> None:
    tc = testcluster
    before = cluster_state(tc)
    new = tc.add_nodes(2)
    live, dead = sorted(new, key=lambda i: i.name)
    try:
        tc.cloud().terminate([dead.instance_id])
        workers = [spec(live), spec(dead)]
        pb = tc.run_playbook("site.yml", workers=workers, extra_vars={"site_connect_timeout": 5})
        assert pb.ok, pb.stdout[-3000:]
        assert qconf_words(tc, "-sel") == [live.name]
        assert dead.name not in Path("/etc/hosts").read_text()
        assert dead.name not in Path("/etc/exports").read_text()
        hosts_on_live = subprocess.run(
            ["podman", "exec", live.name, "cat", "/etc/hosts"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        assert live.name in hosts_on_live and dead.name not in hosts_on_live
        # Converged: a second run changes nothing, on the live worker or for the dead one.
        again = tc.run_playbook("site.yml", workers=workers, extra_vars={"site_connect_timeout": 5})
        assert again.ok and again.changed() == 0, again.stdout[-3000:]
    finally:
        tc.remove_nodes([live.name])
    assert cluster_state(tc) == before
