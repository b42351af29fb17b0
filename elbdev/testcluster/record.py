"""Record real ``qstat``/``qhost`` XML from the test cluster as parser fixtures.

``python -m elbdev.testcluster.record tests/fixtures/sge/recorded`` brings the cluster to a
series of states (no nodes; idle nodes; running, array, PE, held and error jobs with a
disabled queue instance; a node that died) and saves what SGE prints in each. It needs the
test cluster up with no workers (``python -m elbdev testcluster up``); it adds and removes its own.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from elbdev.testcluster import constants as C
from elbdev.testcluster._run import TestClusterError
from elbdev.testcluster.cluster import TestCluster

log = logging.getLogger("elbdev.testcluster")

QSTAT_F = ["qstat", "-u", "*", "-xml", "-r", "-f"]
QSTAT_PRI = ["qstat", "-u", "*", "-xml", "-r", "-f", "-pri", "-urg"]
QSTAT_PLAIN = ["qstat", "-u", "*", "-xml", "-r"]
QHOST = ["qhost", "-xml", "-q", "-j"]


def save(tc: TestCluster, out: Path, outputs: Iterable[tuple[str, list[str]]]) -> list[str]:
    """Write what each command (``argv``) prints on the master to its file (``name``) in ``out``,
    in order; the files' names."""
    written = []
    for name, argv in outputs:
        (out / name).write_text(tc.master_run(argv, timeout=30).stdout)
        written.append(name)
    return written


def _save(tc: TestCluster, out: Path, state: str, *, plain: bool = False, pri: bool = False) -> list[str]:
    cmds = [("qstat-f", QSTAT_F), ("qhost", QHOST)]
    if pri:
        cmds.append(("qstat-f-pri-urg", QSTAT_PRI))
    if plain:
        cmds.append(("qstat", QSTAT_PLAIN))
    return save(tc, out, ((f"{state}.{label}.xml", argv) for label, argv in cmds))


def _wait(what: str, pred: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TestClusterError(f"timed out waiting for {what}")
        time.sleep(1.0)


def _states(tc: TestCluster) -> str:
    return tc.master_run(["qstat", "-u", "*"], timeout=30).stdout


def record(out: Path) -> list[str]:
    tc = TestCluster()
    out.mkdir(parents=True, exist_ok=True)
    if tc.workers():
        raise TestClusterError("record needs the test cluster without workers (python -m elbdev testcluster down; up)")
    files = _save(tc, out, "empty-no-nodes", plain=True)

    new = tc.add_nodes(2, slots=4)
    names = [n.name for n in new]
    _wait("both nodes up", lambda: all(_host_up(tc, n) for n in names))
    files += _save(tc, out, "idle-2-nodes", plain=True)

    sleep = "#!/bin/sh\nsleep 600\n"
    # First, while slots are free: dispatched, it fails on its working directory (Eqw).
    error = tc.submit(sleep, "-N", "error", "-wd", "/nonexistent", "-o", "/dev/null", "-j", "y")
    _wait("the error job in Eqw", lambda: " Eqw " in _states(tc))
    ids = {
        "error": error,
        "serial1": tc.submit(sleep, "-N", "serial1", "-o", "/dev/null", "-j", "y"),
        "serial2": tc.submit(sleep, "-N", "serial2", "-o", "/dev/null", "-j", "y", "-l", "h_rt=01:00:00"),
        "smp": tc.submit(sleep, "-N", "smp2", "-pe", "smp", "2", "-o", "/dev/null", "-j", "y"),
        "mpi": tc.submit(sleep, "-N", "mpi3", "-pe", "mpi", "3", "-o", "/dev/null", "-j", "y"),
    }
    _wait("7 slots used", lambda: _states(tc).count(" r ") >= 4)
    ids["array"] = tc.submit(sleep, "-N", "array10", "-t", "1-10", "-o", "/dev/null", "-j", "y")
    ids["held"] = tc.submit(sleep, "-N", "held", "-h", "-o", "/dev/null", "-j", "y")
    ids["big_smp"] = tc.submit(sleep, "-N", "smp8", "-pe", "smp", "8", "-p", "-100", "-o", "/dev/null", "-j", "y")
    _wait("an array task running", lambda: "array10" in tc.master_run(["qstat", "-u", "*", "-s", "r"]).stdout)
    tc.master_run(["qmod", "-d", f"{C.QUEUE}@{names[1]}"])
    time.sleep(2)
    files += _save(tc, out, "busy-2-nodes", plain=True, pri=True)

    # A node dies: its container goes away without any deregistration.
    dead = [w for w in tc.workers() if w.name == names[1]]
    tc.cloud().terminate([w.instance_id for w in dead])
    _wait(
        f"{names[1]} unreachable (u)",
        lambda: "u" in _queue_state(tc, names[1]),
        timeout=180,
    )
    files += _save(tc, out, "node-died", pri=True)

    tc.master_run(["qdel", "-u", C.CLUSTER_USER], check=False)
    for ident in ids.values():
        tc.master_run(["qdel", "-f", ident], check=False)
    return files


def _host_up(tc: TestCluster, name: str) -> bool:
    proc = tc.master_run(["qhost", "-h", name], check=False)
    for line in proc.stdout.splitlines():
        f = line.split()
        if f and f[0] == name:
            return len(f) > 6 and f[6] != "-"
    return False


def _queue_state(tc: TestCluster, name: str) -> str:
    proc = tc.master_run(["qstat", "-f", "-q", f"{C.QUEUE}@{name}"], check=False)
    for line in proc.stdout.splitlines():
        f = line.split()
        if f and f[0] == f"{C.QUEUE}@{name}":
            return f[-1] if len(f) >= 6 else ""
    return ""


def main(recorder: Callable[[Path], list[str]]) -> None:
    """Run ``recorder`` on the folder named on the command line (tests/fixtures/sge/recorded when
    none is) and list the files it wrote; a failure is one line on stderr and exit 1."""
    logging.basicConfig(level=logging.INFO)
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("tests/fixtures/sge/recorded")
    try:
        for f in recorder(target):
            print(f)
    except TestClusterError as err:
        print(f"record: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover - run by hand
    main(record)
