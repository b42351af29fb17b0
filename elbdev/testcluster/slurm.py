"""A real Slurm controller on this machine, with elb's programs behind its power saving.

Debian 12's ``slurmctld`` 22.05 and ``munged``, started by ``up`` (no systemd: the processes
are started and stopped here, with pid files), with a ``slurm.conf`` written under
``/var/lib/elb-testcluster/slurm`` (``/etc/slurm`` is left alone: clients are pointed at it with
``SLURM_CONF``). Its ``cloud`` partition has ``CLOUD_NODES`` nodes in state ``CLOUD`` (powered
down until a job needs them); ``ResumeProgram``, ``SuspendProgram`` and ``ResumeFailProgram``
are elb's ``elb-slurm-*`` programs of this Python environment (``programs``), writing their
requests into ``REQUEST_DIR``.
``SuspendTime`` is long: elb decides when a node goes.

With the test cluster's master up (its UTS namespace), slurmctld runs there as ``master`` at
``10.77.0.1`` in configless mode, so podman nodes that elb provisions with the ``munge`` and
``slurm_node`` roles fetch its configuration and register; without it, the controller runs alone
under this machine's name and jobs it powers nodes up for stay ``CONFIGURING``.
"""

from __future__ import annotations

import grp
import logging
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from elbdev.testcluster import constants as C
from elbdev.testcluster import master, pids
from elbdev.testcluster._run import TestClusterError, run

log = logging.getLogger("elbdev.testcluster")

SLURM_DIR = C.STATE_DIR / "slurm"
CONF = SLURM_DIR / "slurm.conf"
STATE = SLURM_DIR / "state"
LOGS = SLURM_DIR / "log"
REQUEST_DIR = SLURM_DIR / "requests"
SLURMCTLD_PID = LOGS / "slurmctld.pid"
SLURMCTLD = "slurmctld"  # its process's name (``elbdev.testcluster.pids``)
MUNGE_SOCKET_DIR = Path("/run/munge")
MUNGED_STARTED = C.RUN_DIR / "munged.started-by-elb"
PARTITION = "cloud"
CLOUD_NODES = 8
NODE_CPUS = 2
SLURM_USER = "slurm"
# Above the local cloud's boot_timeout (120 s), provision.timeout (the tests' 600 s, the demo's
# 300 s) and three times the wait for a registration (slurm.register_timeout 120 s, or the demo's
# provision.boot.timeout 150 s with --provision boot): the wall-clock cap of that wait, which
# counts only the time slurmctld answered (``elb validate``'s ResumeTimeout check). An ask elb
# leaves open under its launch back-off needs a bring-up's room before it (docs/slurm.md).
RESUME_TIMEOUT = 1200
SUSPEND_TIME = 86400  # Slurm's own idle rule: a safety net behind elb's
# How long Slurm shows a node it powered down as powering down before it may ask for it again;
# ``up(suspend_timeout=...)`` sets another (tests that ask for the same node again soon after).
SUSPEND_TIMEOUT = 120
# A node whose slurmd stops answering is marked not responding at the next ping (every third of
# this) and set down after it: the fault tests see Slurm lose a node within a minute.
SLURMD_TIMEOUT = 30
# The variables elb's Slurm plays take on the test cluster (``provision.extra_vars``). A container
# does not boot: the uptime its slurmd reports counts from about the container's start (measured:
# a second or so before it), and elb starts a container, or restarts a pooled one, within a second
# or two of Slurm's power-up request when its pass runs just then. Slurm takes such a node for one
# that booted before the request and ignores its registration (slurmctld: "Still waiting for boot
# of node") until ResumeTimeout, and elb fails the node after ``slurm.register_timeout``. With
# ``-b`` slurmd reports its own start as the node's boot, which follows the play, as a real
# instance's boot follows its launch.
NODE_VARS: Mapping[str, object] = {"slurm_node_options": ["-b"]}


def env() -> Mapping[str, str]:
    """What a client (``squeue``, ``sbatch``, ``scontrol``) needs to reach this controller."""
    return {"SLURM_CONF": str(CONF)}


BIN = SLURM_DIR / "bin"
PROGRAMS = {"resume": "elb-slurm-resume", "suspend": "elb-slurm-suspend", "resume-fail": "elb-slurm-resume-fail"}
SYSTEM_PYTHON = Path("/usr/bin/python3")


def program(name: str) -> Path:
    """One of elb's ``elb-slurm-*`` programs in this Python environment."""
    return Path(sys.executable).parent / name


def _slurm_can_run(path: Path) -> bool:
    return run(["runuser", "-u", SLURM_USER, "--", "test", "-x", str(path.resolve())], check=False).returncode == 0


def programs() -> dict[str, Path]:
    """The programs slurm.conf names, by request kind: small scripts that set the request
    directory (slurmctld gives its programs an environment of its own, not its own environment)
    and run elb's program: this environment's ``elb-slurm-*`` when Slurm's user can run its
    interpreter, else (a Python under root's home, as on the test machines) the same module with
    Debian's python3 of the same version on this environment's packages. A site installs elb
    where Slurm's user can run it and names ``elb-slurm-*`` directly (docs/slurm.md)."""
    if _slurm_can_run(Path(sys.executable)):
        commands = {kind: f'exec {program(name)} "$@"' for kind, name in PROGRAMS.items()}
    else:
        same = run([str(SYSTEM_PYTHON), "-c", "import sys; print(tuple(sys.version_info[:2]))"], check=False)
        if same.returncode != 0 or same.stdout.strip() != str(tuple(sys.version_info[:2])):
            raise TestClusterError(
                f"Slurm's user cannot run {sys.executable} and {SYSTEM_PYTHON} is not Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}: install elb where Slurm's user can run it"
            )
        import elb  # noqa: PLC0415 (where this environment's elb is)

        paths = [p for p in sys.path if p.endswith("site-packages")]
        paths.append(str(Path(elb.__file__).resolve().parents[1]))
        commands = {
            kind: f'PYTHONPATH={":".join(paths)} exec {SYSTEM_PYTHON} -m elb.schedulers.slurm.programs {kind} "$@"'
            for kind in PROGRAMS
        }
    BIN.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for kind, name in PROGRAMS.items():
        script = BIN / name
        script.write_text(
            f"#!/bin/sh\n# elb's Slurm {kind} program for the test controller.\n"
            f"ELB_SLURM_REQUESTS={REQUEST_DIR}\nexport ELB_SLURM_REQUESTS\n{commands[kind]}\n"
        )
        script.chmod(0o755)
        out[kind] = script
    return out


def render_conf(
    host: str,
    progs: dict[str, Path],
    address: str | None = None,
    *,
    suspend_timeout: int = SUSPEND_TIMEOUT,
    cloud_nodes: int = CLOUD_NODES,
) -> str:
    """The controller's slurm.conf, with ``progs`` (``programs()``) behind its power saving;
    ``address``: where the nodes reach the controller (the test cluster's master);
    ``cloud_nodes``: how many cloud nodes it defines (a site defines no more than elb's
    ``policy.max_nodes``, so that Slurm never asks for a node elb must give back)."""
    if not 1 <= cloud_nodes <= 999:
        raise ValueError(f"cloud_nodes {cloud_nodes}: 1 to 999")
    nodes = f"node[001-{cloud_nodes:03d}]"
    controller = f"{host}({address})" if address else host
    return "\n".join(
        [
            "# Written by python -m elbdev testcluster (elbdev.testcluster.slurm): a controller for elb's tests.",
            "ClusterName=elbtest",
            f"SlurmctldHost={controller}",
            f"SlurmUser={SLURM_USER}",
            "AuthType=auth/munge",
            "CryptoType=crypto/munge",
            f"StateSaveLocation={STATE}",
            "SlurmdSpoolDir=/var/spool/slurmd",
            "SlurmdLogFile=/var/log/slurm/slurmd.log",
            "SlurmdPidFile=/run/slurmd.pid",
            f"SlurmctldPidFile={SLURMCTLD_PID}",
            f"SlurmctldLogFile={LOGS / 'slurmctld.log'}",
            "SlurmctldDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            f"ResumeProgram={progs['resume']}",
            f"SuspendProgram={progs['suspend']}",
            f"ResumeFailProgram={progs['resume-fail']}",
            f"ResumeTimeout={RESUME_TIMEOUT}",
            f"SuspendTimeout={suspend_timeout}",
            f"SlurmdTimeout={SLURMD_TIMEOUT}",
            f"SuspendTime={SUSPEND_TIME}",
            "PrivateData=cloud",
            "CommunicationParameters=NoAddrCache",
            # The nodes' slurmd fetch this file from the controller (configless).
            "SlurmctldParameters=idle_on_node_suspend,enable_configless",
            f"NodeName={nodes} State=CLOUD CPUs={NODE_CPUS} RealMemory=1000",
            f"PartitionName={PARTITION} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _pid(path: Path) -> int | None:
    """slurmctld's pid, when the process its pid file names runs and is slurmctld
    (``elbdev.testcluster.pids``: a stale file's number may be another process's by now)."""
    return pids.pid_of(path, SLURMCTLD)


def _munged_running() -> bool:
    if not (MUNGE_SOCKET_DIR / "munge.socket.2").exists():
        return False
    return run(["pgrep", "-x", "munged"], check=False).returncode == 0


def _need(binary: str) -> None:
    if shutil.which(binary) is None:
        raise TestClusterError(
            f"{binary} is not installed: run scripts/install-system-deps.sh (Debian's slurmctld, munge)"
        )


def _check_installed() -> None:
    for binary in ("slurmctld", "munged", "sinfo"):
        _need(binary)
    for name in ("elb-slurm-resume", "elb-slurm-suspend", "elb-slurm-resume-fail"):
        if not program(name).is_file():
            raise TestClusterError(f"{program(name)} is missing: install elb into this environment (pip install -e .)")


def cloud_nodes_now() -> int:
    """How many cloud nodes the controller's slurm.conf defines now (``CLOUD_NODES`` without one)."""
    try:
        text = CONF.read_text()
    except OSError:
        return CLOUD_NODES
    found = re.search(r"^NodeName=node\[001-([0-9]{3})\] ", text, re.MULTILINE)
    return int(found.group(1)) if found else CLOUD_NODES


def up(timeout: float = 60.0, *, suspend_timeout: int = SUSPEND_TIMEOUT, cloud_nodes: int = CLOUD_NODES) -> None:
    """Start munged (if not running) and slurmctld with this module's slurm.conf (idempotent; a
    slurm.conf that changes, such as another ``suspend_timeout`` or ``cloud_nodes``, restarts
    slurmctld)."""
    _check_installed()
    slurm_gid = grp.getgrnam(SLURM_USER).gr_gid
    for d in (STATE, LOGS):
        d.mkdir(parents=True, exist_ok=True)
        shutil.chown(d, SLURM_USER, SLURM_USER)
    REQUEST_DIR.mkdir(parents=True, exist_ok=True)
    os.chown(REQUEST_DIR, 0, slurm_gid)
    REQUEST_DIR.chmod(0o2770)  # Slurm's user writes requests; elb (root) reads them
    C.RUN_DIR.mkdir(parents=True, exist_ok=True)
    in_master = master.uts_ready()
    if in_master:  # the test cluster's master: slurmctld runs under its name, nodes reach its address
        conf = render_conf(
            C.MASTER_NAME, programs(), C.MASTER_IP, suspend_timeout=suspend_timeout, cloud_nodes=cloud_nodes
        )
    else:
        conf = render_conf(socket.gethostname(), programs(), suspend_timeout=suspend_timeout, cloud_nodes=cloud_nodes)
    if not CONF.exists() or CONF.read_text() != conf:
        CONF.write_text(conf)
        if _pid(SLURMCTLD_PID) is not None:
            down_controller()
    if not _munged_running():
        MUNGE_SOCKET_DIR.mkdir(mode=0o755, exist_ok=True)
        shutil.chown(MUNGE_SOCKET_DIR, "munge", "munge")
        run(["runuser", "-u", "munge", "--", "munged", "--num-threads=10"])
        MUNGED_STARTED.write_text("")
    if _pid(SLURMCTLD_PID) is None:
        argv = ["slurmctld", "-f", str(CONF)]
        run(["nsenter", f"--uts={C.UTS_NS}", "--", *argv] if in_master else argv)
    deadline = time.monotonic() + timeout
    while True:
        probe = run(["sinfo", "--noheader"], env=env(), check=False, quiet=True)
        if probe.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise TestClusterError(f"slurmctld did not answer within {timeout:g} s: {probe.stderr.strip()}")
        time.sleep(0.5)


def down_controller(timeout: float = 30.0) -> None:
    """SIGTERM to slurmctld, SIGKILL if it is still there after ``timeout`` (held by its pidfd:
    its pid file goes before the process does)."""
    pids.terminate(SLURMCTLD_PID, SLURMCTLD, timeout)


def down() -> None:
    """Stop slurmctld, forget its state (jobs, node states), and stop munged if ``up`` started it."""
    down_controller()
    shutil.rmtree(STATE, ignore_errors=True)
    for request in REQUEST_DIR.glob("*"):  # requests of the controller that went: never taken by the next one
        request.unlink(missing_ok=True)
    if MUNGED_STARTED.exists():
        run(["pkill", "-x", "munged"], check=False)
        MUNGED_STARTED.unlink()


def running() -> bool:
    return _pid(SLURMCTLD_PID) is not None


__all__: Sequence[str] = (
    "CONF",
    "PARTITION",
    "REQUEST_DIR",
    "down",
    "env",
    "render_conf",
    "running",
    "up",
)
