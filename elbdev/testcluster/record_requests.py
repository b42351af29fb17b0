"""Record real ``qstat -r`` XML of waiting jobs with the requests node groups match, and the
site's ``qconf`` answers, from the test cluster, as fixtures of the demand model.

``flock /var/lib/elb-testcluster.lock python -m elbdev.testcluster.record_requests
tests/fixtures/sge/recorded`` stands the cluster up with one 1-slot node whose queue instances
are disabled (SGE refuses a queue request that no queue instance matches), adds a consumable
``bigmem`` (INT, per host) and a queue ``big.q`` on that node, submits one waiting job per kind of
request (queue lists with wildcards, memory, a consumable, a host, PEs wider than a node or
than the cluster, ``qsub -a``, an array with load requests, a PE range over two queues), saves
what SGE prints, then deletes the jobs, the queue and the complex and takes the cluster down.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from elbdev.testcluster import constants as C
from elbdev.testcluster._run import TestClusterError
from elbdev.testcluster.cluster import TestCluster
from elbdev.testcluster.record import main, save

log = logging.getLogger("elbdev.testcluster")

BIGMEM = "bigmem              bm         INT         <=      YES         YES        0        0\n"
SLEEP = "#!/bin/sh\nsleep 60\n"
JOBS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("plain", ()),
    ("anyhost", ("-q", "all.q@*")),
    ("bigq", ("-q", "big.q")),
    ("vmem64", ("-l", "h_vmem=64G")),
    ("bigmem", ("-l", "bigmem=1")),
    ("onhost", ("-l", "hostname=master")),
    ("smp4", ("-pe", "smp", "4")),
    ("mpi64", ("-pe", "mpi", "64")),
    ("later", ("-a", "202712011200")),
    ("array", ("-t", "1-5", "-l", "mem_free=2G,arch=lx-amd64")),
    ("range", ("-pe", "mpi", "2-8", "-q", "all.q,big.q")),
)


def record(out: Path) -> list[str]:
    tc = TestCluster()
    out.mkdir(parents=True, exist_ok=True)
    tc.down()
    tc.up(nodes=0)
    try:
        return _record(tc, out)
    finally:
        tc.down()


def _record(tc: TestCluster, out: Path) -> list[str]:
    # SGE refuses a queue request no queue instance matches: one node, its queues disabled so
    # that every job stays waiting.
    (node,) = (i.name for i in tc.add_nodes(1, slots=1))
    original = tc.master_run(["qconf", "-sc"]).stdout
    with tempfile.TemporaryDirectory() as tmp:
        sc = Path(tmp) / "complexes"
        sc.write_text(original.replace("# >#< starts a comment", BIGMEM + "# >#< starts a comment", 1))
        tc.master_run(["qconf", "-Mc", str(sc)])
        queue = tc.master_run(["qconf", "-sq", C.QUEUE]).stdout
        lines = []
        changed = {"qname": "qname big.q", "hostlist": f"hostlist {node}", "slots": "slots 1"}
        for line in queue.replace("\\\n", " ").splitlines():
            key = line.split(None, 1)[0] if line.strip() else ""
            lines.append(changed.get(key, line))
        qfile = Path(tmp) / "big.q"
        qfile.write_text("\n".join(lines) + "\n")
        tc.master_run(["qconf", "-Aq", str(qfile)])
    tc.master_run(["qmod", "-d", f"*@{node}"])
    files: list[str] = []
    ids: dict[str, str] = {}
    try:
        for name, args in JOBS:
            try:
                ids[name] = tc.submit(SLEEP, "-N", name, "-o", "/dev/null", "-j", "y", *args)
            except TestClusterError as err:
                log.warning("not recorded: job %s (%s): %s", name, " ".join(args), err)
        asked = ",".join(ids[n] for n in ("later", "plain") if n in ids)
        files += save(
            tc,
            out,
            (
                ("groups-waiting.qstat-r-f.xml", ["qstat", "-u", "*", "-xml", "-r", "-f"]),
                ("groups-waiting.qstat-r.xml", ["qstat", "-u", "*", "-xml", "-r"]),
                ("qconf-sc-bigmem.txt", ["qconf", "-sc"]),
                ("qconf-sql-big.txt", ["qconf", "-sql"]),
                ("groups-waiting.qstat-j.djob.txt", ["qstat", "-xml", "-j", asked]),
            ),
        )
        (out / "groups-waiting.jobs.txt").write_text(
            "".join(f"{ids[n]} {n} {' '.join(a)}\n" for n, a in JOBS if n in ids)
        )
        files.append("groups-waiting.jobs.txt")
    finally:
        tc.master_run(["qdel", "-u", C.CLUSTER_USER], check=False)
        tc.master_run(["qconf", "-dq", "big.q"], check=False)
        with tempfile.TemporaryDirectory() as tmp:
            sc = Path(tmp) / "complexes"
            sc.write_text(original)
            tc.master_run(["qconf", "-Mc", str(sc)], check=False)
    return files


if __name__ == "__main__":  # pragma: no cover - run by hand
    main(record)
