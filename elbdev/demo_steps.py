"""The steps both demos take (``elbdev.demo`` and ``elbdev.demo_slurm``): a line with the time,
a line per phase (``== NAME (at XmYs)``, as scripts/test prints its stages), status lines only
when they change, a step's output sent to a log file, and ``elb run`` started as the test
cluster's master.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from elb.core.model import NodeState
from elb.service.journal import Journal

if TYPE_CHECKING:
    from elbdev.testcluster.cluster import TestCluster


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


T = TypeVar("T")
SETUP_LOG = Path("/var/log/elb-demo/setup.log")  # the test cluster's set-up and take-down (apt, podman)
_STARTED = time.time()  # the demo's start, when scripts/demo does not give its own (ELB_DEMO_T0)


def phase_line(name: str, elapsed: float) -> str:
    """A phase's line: its name and the whole minutes and seconds since the demo began."""
    seconds = int(max(0.0, elapsed))
    return f"== {name} (at {seconds // 60}m{seconds % 60}s)"


def phase(name: str) -> None:
    """Print the line of phase ``name``, timed from scripts/demo's start (``ELB_DEMO_T0``, epoch
    seconds) when it gave one, else from the demo's."""
    try:
        start = float(os.environ.get("ELB_DEMO_T0", ""))
    except ValueError:
        start = _STARTED
    print(phase_line(name, time.time() - start), flush=True)


class Changes:
    """Which status lines to print: one whose status differs from the last printed, or that says
    what a pass did (an event, even when the counts it shows are the same), unless the line
    before said the same."""

    def __init__(self) -> None:
        self.last: tuple[str, str] | None = None

    def new(self, status: str, did: str = "") -> bool:
        if self.last is not None and status == self.last[0] and did in ("", self.last[1]):
            return False
        self.last = (status, did)
        return True


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """Send everything written to standard output and error, this process's and its children's
    (apt's and dpkg's progress, podman's), to ``log`` (appended) while the block runs."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with log.open("a", buffering=1) as f:  # line-buffered: lines in the order written
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            try:
                with contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
                    yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def start_elb(
    cluster: TestCluster, state: Path, config: dict[str, Any], results: str, procs: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], Path]:
    """A fresh ``state`` directory with ``config`` in it, an empty directory ``results`` in the
    cluster user's home for the jobs' result files, and ``elb run`` started as the master (its
    log in ``state``); the process (also added to ``procs``) and that directory."""
    from elbdev.testcluster import constants as C  # noqa: PLC0415
    from elbdev.testcluster.master import in_master  # noqa: PLC0415

    if state.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(state)], check=True, timeout=60)
    state.mkdir(parents=True)
    cfg_path = state / "elb.yml"
    cfg_path.write_text(yaml.safe_dump(config))
    home = Path("/home") / C.CLUSTER_USER / results
    cluster.master_run(["rm", "-rf", str(home)], check=False)
    cluster.master_run(["mkdir", "-p", str(home)], user=C.CLUSTER_USER)
    with (state / "elb.log").open("wb") as log:
        argv = in_master([sys.executable, "-m", "elb", "run", "--config", str(cfg_path)])
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    procs.append(proc)
    return proc, home


def used_node_seconds(journal: Journal, now: float) -> float:
    """The seconds every node of the journal lived: launch to its end (terminated or failed), or to
    ``now`` for one still up."""
    total = 0.0
    for n in journal.nodes(include_gone=True):
        ends = [e.time for e in journal.events(n.name) if e.state in (NodeState.TERMINATED, NodeState.FAILED)]
        total += (ends[-1] if ends else now) - n.launched_at
    return total


def launch_line(journal: Journal, last_end: float | None) -> str:
    """The summary's count of launches from the journal: how many, how many failed, and how many
    came after the last job ended (``last_end``: POSIX seconds; None: no job ended)."""
    launches = failed = late = 0
    for n in journal.nodes(include_gone=True):
        for e in journal.events(n.name):
            if e.state is NodeState.LAUNCHING:
                launches += 1
                late += last_end is not None and e.time > last_end
            failed += e.state is NodeState.FAILED
    return f"  launches:          {launches} ({failed} failed); after the last job ended: {late}"


INSTALLED = "ELB_DEMO_INSTALLED"  # set by scripts/demo once its installs (packages, the node image) are done


def setup_note(env: Mapping[str, str]) -> str:
    """What the set-up is about to do, said before it starts: after scripts/demo's installs
    (``INSTALLED`` set in ``env``), check them and start the master; else install what is
    missing first."""
    if env.get(INSTALLED) == "1":
        return f"packages and node image installed above: checked, then the master started (output: {SETUP_LOG})"
    return (
        "installs what is missing first (packages, the node image: minutes on a first run), "
        f"then starts the master (output: {SETUP_LOG})"
    )


def set_up(up: Callable[[], T]) -> T:
    """Run ``up`` (the test cluster's set-up) with its output in SETUP_LOG; if it fails, say where
    that output is before the error goes on."""
    try:
        with output_to(SETUP_LOG):
            return up()
    except Exception:
        say(f"setting up failed; its output: {SETUP_LOG}")
        raise


# With ``--provision boot``: how long elb waits for a node to configure itself after the master
# admitted it. The Slurm demo's bring-up stays within the test cluster's ResumeTimeout (1200 s):
# the local cloud's boot_timeout 120 s + provision.timeout 300 s + three times this.
BOOT_WAIT = 150


def at_boot(config: dict[str, Any], mounts: Sequence[Path]) -> dict[str, Any]:
    """``config`` with nodes that configure themselves at boot (``provision.mode: boot``): the
    local cloud mounts ``mounts`` (this machine's Python environment and checkout, standing in for
    an image with elb installed) into each node, which runs its boot playbook on itself."""
    provision = {**config["provision"], "mode": "boot", "boot": {"timeout": BOOT_WAIT}}
    cloud = {**config["cloud"], "local": {"mounts": [str(m) for m in mounts]}}
    return {**config, "provision": provision, "cloud": cloud}
