"""Fault injection on the test cluster, for the random-fault soak (tests/faults/soak.py).

Test cluster only; nothing here is used by elb itself.

- ``FaultyLocalCloud``: the local cloud with EC2-like failures switched on and off from outside
  the process through a small JSON control file: throttling (the launch call refused, retryable),
  insufficient capacity (every name of the launch failed), a fleet filled in part (the first
  half of the names launched, the rest failed), and the next launched node's provisioning made
  to fail (its scheduler daemon replaced by a program that exits at once).
- ``slow_bin_dir``: a directory of wrappers around the scheduler's commands, for ``sge.bin_dir`` /
  ``slurm.bin_dir``, each of which sleeps as long as a control file says before it execs the
  real command.
- the controller restarted or stopped (SIGSTOP, then SIGCONT), for SGE (``sge_qmaster``) and
  Slurm (``slurmctld``).
- ``python -m elbdev.testcluster.faults run CONFIG CONTROL``: ``elb run`` (elb's own command,
  unchanged) with ``FaultyLocalCloud`` as its cloud, so that the soak can SIGKILL it and start it
  again while the cloud's faults keep their schedule.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elb.clouds.local import LocalCloud
from elb.core.config import Config
from elb.core.interfaces import CloudError, LaunchResult, NodeBoot
from elbdev.testcluster import pids

# What the next launch's chosen node runs instead of its scheduler daemon: it exits at once, so the
# node never registers and its add play fails on it (the node's own failure).
BREAK_DAEMON = {
    "sge": "printf '#!/bin/sh\\nexit 0\\n' > /usr/sbin/sge_execd && chmod 755 /usr/sbin/sge_execd",
    "slurm": "printf '#!/bin/sh\\nexit 0\\n' > /usr/sbin/slurmd && chmod 755 /usr/sbin/slurmd",
}

SGE_COMMANDS = ("qstat", "qhost", "qconf", "qmod", "qdel", "qsub", "qacct", "qalter", "qrls", "qhold", "qselect")
SLURM_COMMANDS = ("squeue", "sinfo", "scontrol", "sbatch", "scancel", "sacct")


def read_control(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_control(path: Path, data: Mapping[str, Any]) -> None:
    """Replace the control file whole (a reader never sees half of it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(data)))
    os.replace(tmp, path)


def note(path: Path, **fields: Any) -> None:
    """Append one JSON line to ``path`` (what an injected fault did, for the soak's tally)."""
    with path.open("a") as f:
        f.write(json.dumps({"time": time.time(), **fields}) + "\n")


class FaultyLocalCloud(LocalCloud):
    """LocalCloud whose launches fail as the control file says at the time of the call.

    Control keys (each a POSIX time until which the fault is on): ``throttle_until``,
    ``capacity_until``, ``partial_until``; ``break_next`` (int): so many of the next launched
    nodes get a broken scheduler daemon; ``scheduler``: ``sge`` or ``slurm``. Each injected fault
    is noted in the control file's ``.log`` sibling."""

    control: Path = Path("/nonexistent")

    @property
    def log(self) -> Path:
        return self.control.with_suffix(".log")

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        ctl = read_control(self.control)
        now = time.time()
        if now < float(ctl.get("throttle_until", 0)):
            note(self.log, fault="throttle", names=list(names))
            raise CloudError("RequestLimitExceeded: Request limit exceeded (injected)", retryable=True, throttled=True)
        if now < float(ctl.get("capacity_until", 0)):
            note(self.log, fault="capacity", names=list(names))
            return LaunchResult((), {n: "InsufficientInstanceCapacity (injected)" for n in names})
        cut: list[str] = []
        if now < float(ctl.get("partial_until", 0)) and len(names) > 1:
            cut = list(names[(len(names) + 1) // 2 :])
            names = list(names[: (len(names) + 1) // 2])
            note(self.log, fault="partial", names=list(names), failed=cut)
        res = super().launch(names, groups, boot, stopping=stopping)
        failed = {**res.failed, **{n: "InsufficientInstanceCapacity: fleet filled in part (injected)" for n in cut}}
        res = LaunchResult(res.launched, failed, res.not_started)
        breaks = int(ctl.get("break_next", 0))
        if breaks > 0 and res.launched:
            victim = res.launched[0].name
            script = BREAK_DAEMON[str(ctl.get("scheduler", "sge"))]
            subprocess.run(["podman", "exec", victim, "sh", "-c", script], check=False, timeout=60)
            write_control(self.control, {**read_control(self.control), "break_next": breaks - 1})
            note(self.log, fault="play_fail", node=victim)
        return res


def slow_bin_dir(directory: Path, commands: Sequence[str], delay_file: Path) -> Path:
    """Wrappers for ``commands`` in ``directory``: each sleeps the seconds ``delay_file`` holds
    (none while it is absent or empty), then execs the real command found on PATH now."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in commands:
        real = shutil.which(name)
        if real is None:
            continue
        wrapper = directory / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f"d=$(cat {shlex.quote(str(delay_file))} 2>/dev/null)\n"
            '[ -n "$d" ] && sleep "$d"\n'
            f'exec {shlex.quote(real)} "$@"\n'
        )
        wrapper.chmod(0o755)
    return directory


# ---------------------------------------------------------------------------------------- controllers


def _controller(scheduler: str) -> pids.Held | None:
    """The controller (sge_qmaster, slurmctld) held by its pidfd, when its pid file names it."""
    if scheduler == "sge":
        from elbdev.testcluster import master  # noqa: PLC0415

        return pids.Held.of(master.QMASTER_PID, master.DAEMONS[master.QMASTER_PID])
    from elbdev.testcluster import slurm  # noqa: PLC0415

    return pids.Held.of(slurm.SLURMCTLD_PID, slurm.SLURMCTLD)


def restart_controller(scheduler: str) -> None:
    """Stop the controller as its service would be stopped, then start it again (its jobs and
    hosts kept: SGE's spool, Slurm's state save)."""
    if scheduler == "sge":
        from elbdev.testcluster import master  # noqa: PLC0415

        master.stop_qmaster()
        master.ensure_qmaster()
        return
    from elbdev.testcluster import slurm  # noqa: PLC0415

    slurm.down_controller()
    slurm.up(cloud_nodes=slurm.cloud_nodes_now())  # the same slurm.conf: a restart changes nothing of it


def pause_controller(scheduler: str, seconds: float) -> bool:
    """SIGSTOP the controller for ``seconds``, then SIGCONT it; False if it was not running."""
    held = _controller(scheduler)
    if held is None:
        return False
    try:
        held.send(signal.SIGSTOP)
        time.sleep(seconds)
    finally:
        held.send(signal.SIGCONT)
        held.close()
    return True


# ---------------------------------------------------------------------------------------- elb run


def _faulty_cloud(control: Path) -> Any:
    def make_cloud(cfg: Config) -> FaultyLocalCloud:
        cloud = FaultyLocalCloud.from_config(cfg)
        cloud.control = control
        return cloud

    return make_cloud


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3 or argv[0] != "run":
        print("usage: python -m elbdev.testcluster.faults run CONFIG CONTROL", file=sys.stderr)
        return 2
    from elb.cli import main as cli  # noqa: PLC0415
    from elb.service import factory  # noqa: PLC0415

    factory.make_cloud = _faulty_cloud(Path(argv[2]))
    return cli.main(["run", "--config", argv[1]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
