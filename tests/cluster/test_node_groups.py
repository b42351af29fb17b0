"""Node groups on the real test cluster: two groups of different node sizes, one offering a
consumable (``bigmem``) the other does not.

A job requesting ``bigmem=1`` gets a node of the group that offers it (its exec host carries
``bigmem=1``, in that group's host group) and runs there; a plain job gets a node of the other
group; a job requesting more ``bigmem`` than any node offers gets no node and is named, with its
reason, by the pass, ``elb status --json`` and ``elb once --dry-run --json``. Once the queue is
empty both nodes are removed and SGE, /etc/hosts and the exports are as before (the host group
the role made and the complex are taken away by the test).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from elb.core.config import Config, parse_config
from elb.core.model import NodeState
from elb.service.passrecord import PassResult
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster
from tests.cluster.helpers import cluster_state, written
from tests.cluster.names import note_used, start_after_used
from tests.cluster.test_elb_e2e import balancer, passes_until

pytestmark = pytest.mark.cluster

BIGMEM = "bigmem              bm         INT         <=      YES         YES        0        0\n"
JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
hostname > "$HOME/groups/$JOB_ID.host"
"""


def groups_config(tmp: Path) -> dict[str, object]:
    return {
        "poll_interval": 2,
        "state_dir": str(tmp / "state"),
        "cluster": {"name": C.CLUSTER_NAME, "master": C.MASTER_NAME},
        "policy": {"max_nodes": 2, "billing": "second", "boot_time": 12},
        "node_groups": [
            {"name": "small", "slots": 1, "max_nodes": 1},
            {"name": "big", "slots": 2, "max_nodes": 1, "hostgroup": "@bigmem", "offers": {"bigmem": "1"}},
        ],
        "cloud": {"provider": "local"},
        "provision": {"private_data_dir": str(tmp / "ansible"), "ssh_private_key": str(C.SSH_KEY), "timeout": 600},
    }


def set_complexes(tc: TestCluster, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "complexes"
        path.write_text(text)
        tc.master_run(["qconf", "-Mc", str(path)])


def elb_json(cfg_file: Path, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "elb", *args, "--json", "--config", str(cfg_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_a_job_gets_a_node_of_the_group_that_offers_what_it_requests(testcluster: TestCluster, tmp_path: Path) -> None:
    tc = testcluster
    before = cluster_state(tc)
    complexes = tc.master_run(["qconf", "-sc"]).stdout
    home = Path("/home") / C.CLUSTER_USER / "groups"
    tc.master_run(["rm", "-rf", str(home)], check=False)
    tc.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    raw = groups_config(tmp_path)
    cfg: Config = parse_config(raw)
    first = note_used() + 1  # the session's names go on (tests/cluster/names.py)
    start_after_used(cfg.journal_path)
    cfg_file = tmp_path / "elb.yml"
    cfg_file.write_text(yaml.safe_dump(raw))
    bal = balancer(cfg)
    jobs: list[str] = []
    try:
        set_complexes(tc, complexes.replace("# >#< starts a comment", BIGMEM + "# >#< starts a comment", 1))
        big = tc.submit(JOB, "-N", "big", "-l", "bigmem=1", "-o", "/dev/null")
        plain = tc.submit(JOB, "-N", "plain", "-o", "/dev/null")
        never = tc.submit(JOB, "-N", "never", "-l", "bigmem=2", "-o", "/dev/null")
        jobs = [big, plain, never]

        # Before any node: the dry run plans one node of each group and names the unservable job.
        plan = elb_json(cfg_file, "once", "--dry-run")
        assert plan["add"] == [
            {"group": "small", "count": 1, "names": [f"node{first:03d}"]},
            {"group": "big", "count": 1, "names": [f"node{first + 1:03d}"]},
        ]
        assert [u["job_id"] for u in plan["unservable"]] == [int(never)]  # type: ignore[attr-defined]
        assert "bigmem=2" in plan["unservable"][0]["reason"]  # type: ignore[index]

        grown = passes_until(bal, "two nodes to be added", lambda rs: len(rs[-1].outcomes.added) == 2, timeout=180)
        groups = {n: bal.journal.node(n).group for n in grown[-1].outcomes.added}  # type: ignore[union-attr]
        # A group may be None for mypy; with one the test fails whatever sorted() does with it.
        assert sorted(groups.values()) == ["big", "small"]  # type: ignore[type-var]
        big_node = next(n for n, g in groups.items() if g == "big")
        small_node = next(n for n, g in groups.items() if g == "small")
        exechost = tc.master_run(["qconf", "-se", big_node]).stdout
        assert "bigmem=1" in exechost.replace(" ", "") and "slots=2" in exechost.replace(" ", "")
        assert big_node in tc.master_run(["qconf", "-shgrp", "@bigmem"]).stdout.split()

        def both_written(_: list[PassResult]) -> bool:
            return all(written(home / f"{j}.host") is not None for j in (big, plain))

        ran = passes_until(bal, "the two servable jobs to run", both_written, timeout=120)
        assert written(home / f"{big}.host") == big_node
        assert written(home / f"{plain}.host") in (small_node, big_node)
        # the unservable job got no node: named by the pass, in status and in the dry run
        assert [(n.job.job_id, n.unservable) for n in bal.last.not_demand] == [(int(never), True)]
        assert bal.last.unservable_jobs == 1
        status = elb_json(cfg_file, "status")
        assert [(n["job_id"], n["unservable"]) for n in status["not_demand"]] == [(int(never), True)]  # type: ignore[attr-defined]
        assert len(bal.journal.nodes()) == 2  # no third node for it

        tc.master_run(["qdel", never], check=False)

        def all_removed(rs: list[PassResult]) -> bool:
            # the pass after which the jobs' files were seen may have begun it
            return sorted(n for r in [*ran, *rs] for n in r.outcomes.removed) == sorted(groups)

        passes_until(bal, "both nodes to be removed", all_removed, timeout=180)
        for node in groups:
            assert bal.journal.node(node).state is NodeState.TERMINATED  # type: ignore[union-attr]
        assert tc.workers() == []
    finally:
        for j in jobs:
            tc.master_run(["qdel", "-f", j], check=False)
        bal.journal.close()
        # what the test and the role added for the group: the queue's host group, the group, the complex
        tc.master_run(["qconf", "-dattr", "queue", "hostlist", "@bigmem", C.QUEUE], check=False)
        tc.master_run(["qconf", "-dhgrp", "@bigmem"], check=False)
        set_complexes(tc, complexes)
    assert cluster_state(tc) == before
