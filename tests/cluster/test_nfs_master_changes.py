"""What the master changes in /home directly (not over NFS) a node sees at once (marked
``cluster``), as it does beside the kernel's NFS server: a directory a node has used, removed
and made again on the master under the same name, takes the node's new files (a job's output
file, opened to be written and truncated) and shows the master's.

The test cluster's NFS server is nfs-ganesha (the kernel's server cannot run here). Its own
cache of names and attributes, kept 60 s by default, once gave a new node the removed directory
for the new one (NFS3ERR_STALE, then ``No such file or directory`` for a Slurm job's output
file, and the job died at its start): ``elbdev.testcluster.master`` configures it to keep
neither past a change."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.core.interfaces import Instance
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import TestCluster

pytestmark = pytest.mark.cluster

HOME = Path(f"/home/{C.CLUSTER_USER}")
DIR = HOME / "nfs-master-changes"

# As slurmstepd opens a job's output file: created if missing, truncated, written.
WRITE = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, sys.argv[2].encode())
os.close(fd)
"""


@pytest.fixture
def node(testcluster: TestCluster) -> Iterator[Instance]:
    (added,) = testcluster.add_nodes(1)
    try:
        yield added
    finally:
        testcluster.remove_nodes([added.name])
        left = [w.instance_id for w in testcluster.workers() if w.name == added.name]
        testcluster.cloud().terminate(left)
        shutil.rmtree(DIR, ignore_errors=True)


def as_user(node: Instance, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", "exec", node.name, "runuser", "-u", C.CLUSTER_USER, "--", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def make_dir() -> None:
    DIR.mkdir()
    shutil.chown(DIR, C.CLUSTER_USER, C.CLUSTER_USER)


def test_a_directory_made_again_on_the_master_takes_a_nodes_new_file_at_once(node: Instance) -> None:
    shutil.rmtree(DIR, ignore_errors=True)
    make_dir()
    for round_ in range(3):
        first = as_user(node, "python3", "-c", WRITE, str(DIR / f"before-{round_}.out"), "before")
        assert first.returncode == 0, first.stderr
        assert (DIR / f"before-{round_}.out").read_text() == "before"

        shutil.rmtree(DIR)  # on the master, as the test modules' fixtures do between modules
        make_dir()
        (DIR / "from-master").write_text(f"round {round_}")

        after = as_user(node, "python3", "-c", WRITE, str(DIR / f"after-{round_}.out"), "after")
        assert after.returncode == 0, f"round {round_}: {after.stderr}"
        assert (DIR / f"after-{round_}.out").read_text() == "after"
        shown = as_user(node, "cat", str(DIR / "from-master"))
        assert (shown.returncode, shown.stdout) == (0, f"round {round_}"), shown.stderr
        listed = as_user(node, "ls", str(DIR))
        assert sorted(listed.stdout.split()) == sorted(["from-master", f"after-{round_}.out"]), listed
