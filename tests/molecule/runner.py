"""Run the Molecule scenarios in ``molecule/`` against the machine's test cluster.

``python -m tests.molecule.runner [-s SCENARIO ...] [--down]`` (as root, from the repository
root) takes the test cluster's exclusive lock, brings the cluster up (idempotent), runs
``molecule test -s <scenario>`` for each scenario as the master (in its UTS namespace, with
the SGE environment), prints the time of each, and with ``--down`` tears the cluster down.
The pytest wrapper (``tests/molecule/test_molecule.py``) uses the same functions.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from elb.provision import sshmux
from tests.lanes import other_lane_names

REPO = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO / "molecule"
LOCK = Path("/var/lib/elb-testcluster.lock")  # the same lock as the `testcluster` fixture (tests/conftest.py)
SCENARIO_TIMEOUT = 900.0
ONE_AT_A_TIME = Path("/var/lib/elb-testcluster/run/molecule.lock")


def scenarios() -> list[str]:
    """The scenarios in molecule/ (directories with a molecule.yml), in name order."""
    return sorted(p.parent.name for p in SCENARIO_DIR.glob("*/molecule.yml"))


@contextmanager
def cluster_lock(path: Path = LOCK) -> Iterator[None]:
    """Hold an exclusive lock, by default the test cluster's (waits for the holder, e.g. a cluster
    test session)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass(frozen=True)
class ScenarioRun:
    scenario: str
    rc: int
    seconds: float
    output: str


def run_scenario(scenario: str, *, timeout: float = SCENARIO_TIMEOUT, echo: bool = False) -> ScenarioRun:
    """``molecule test -s scenario`` as the master. The cluster must be up and the lock held.
    One scenario at a time on the machine (the lanes of a test session each run some:
    tests/lanes.py): each run first installs the project's collection into the checkout."""
    if scenario not in scenarios():
        raise ValueError(f"no such scenario: {scenario!r} (have {scenarios()})")
    with cluster_lock(ONE_AT_A_TIME), sshmux.shared_connections() as shared:
        return _run(scenario, timeout, echo, shared)


def _run(scenario: str, timeout: float, echo: bool, shared: Path | None) -> ScenarioRun:
    """One scenario; ``shared``: the directory of its shared SSH connections (one per node for
    the scenario's runs, closed when it ends: ``elb.provision.sshmux``), None for one per task."""
    from elbdev.testcluster import master

    venv_bin = str(Path(sys.executable).parent)
    sharing = {}
    if shared is not None:  # molecule.yml's ssh_args read ELB_MOLECULE_SSH_SHARING
        sharing = {"ELB_MOLECULE_SSH_SHARING": sshmux.SHARED, "ANSIBLE_SSH_CONTROL_PATH_DIR": str(shared)}
    # molecule/_shared/master_state.yml leaves out the lines of the nodes of a lane beside this one
    lanes = {"ELB_TEST_OTHER_LANE_NAMES": other_lane_names()}
    argv = master.in_master(
        [str(Path(venv_bin) / "molecule"), "test", "-s", scenario],
        env={"ANSIBLE_NOCOLOR": "1", "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0", "NO_COLOR": "1", **sharing, **lanes},
    )
    env = dict(os.environ)
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', os.defpath)}"
    t = time.monotonic()
    lines: list[str] = []
    with subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        assert proc.stdout is not None
        deadline = t + timeout
        try:
            for line in proc.stdout:
                lines.append(line)
                if echo:
                    print(line, end="", flush=True)
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(argv, timeout)
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            lines.append(f"\nmolecule test -s {scenario}: killed after {timeout:g} s\n")
            rc = -9
    return ScenarioRun(scenario, rc, time.monotonic() - t, "".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.molecule.runner", description=__doc__.splitlines()[0])
    ap.add_argument("-s", "--scenario", action="append", help="scenario to run (repeatable; default all)")
    ap.add_argument("--down", action="store_true", help="tear the test cluster down afterwards")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only the summary (and a failure's output)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("the test cluster needs root", file=sys.stderr)
        return 2
    wanted = args.scenario or scenarios()
    from elbdev.testcluster.cluster import TestCluster

    results: list[ScenarioRun] = []
    with cluster_lock():
        tc = TestCluster()
        t = time.monotonic()
        try:
            tc.up(nodes=0)
            print(f"test cluster up in {time.monotonic() - t:.1f} s", flush=True)
            for s in wanted:
                r = run_scenario(s, echo=not args.quiet)
                results.append(r)
                if args.quiet and r.rc != 0:
                    print(r.output[-8000:])
        finally:
            if args.down:
                tc.down()
    for r in results:
        print(f"molecule test -s {r.scenario}: {'passed' if r.rc == 0 else f'FAILED (rc {r.rc})'} in {r.seconds:.0f} s")
    print(f"total {sum(r.seconds for r in results):.0f} s")
    return 0 if results and all(r.rc == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
