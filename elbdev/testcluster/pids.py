"""The test cluster's daemons found and signalled by their pid files, never another process.

A pid file outlives its daemon when the daemon dies hard (SIGKILL, a crash), and on a machine
whose pids wrap at 32,768 its number soon names another process: a command of the other test
lane (its ``qstat``), a playbook. So a pid file's number counts as the daemon only while the
process under it has the daemon's name (``/proc/PID/comm``, or the basename of the program it
runs), and every signal goes through a pidfd taken on it: Linux's handle on that one process,
which never names a later process that gets the same number."""

from __future__ import annotations

import contextlib
import os
import select
import signal
from pathlib import Path


def _read(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_named(pid: int, name: str) -> bool:
    """Whether the process ``pid`` is ``name``: its command name (the kernel keeps 15
    characters) or the program it runs (a name the package links to another, as Debian's
    ``slurmctld`` to ``slurmctld-wlm``)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    if comm == name[:15]:
        return True
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith(name)
    except OSError:
        return False


def _open(pidfile: Path, name: str) -> tuple[int, int] | None:
    """The pid of ``pidfile`` and a pidfd on it when the process runs and is ``name``."""
    pid = _read(pidfile)
    if pid is None or pid <= 0:
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # (no such process)
        return None
    if not is_named(pid, name):  # checked after the pidfd is held: the number cannot change process now
        os.close(fd)
        return None
    return pid, fd


def pid_of(pidfile: Path, name: str) -> int | None:
    """The daemon's pid: the number in ``pidfile`` when the process under it runs and is ``name``."""
    opened = _open(pidfile, name)
    if opened is None:
        return None
    os.close(opened[1])
    return opened[0]


class Held:
    """A daemon held by its pidfd for a while (stopped and continued, waited for)."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd

    @classmethod
    def of(cls, pidfile: Path, name: str) -> Held | None:
        opened = _open(pidfile, name)
        return None if opened is None else cls(*opened)

    def send(self, sig: int) -> bool:
        try:
            signal.pidfd_send_signal(self.fd, sig)
        except ProcessLookupError:
            return False
        return True

    def exited_within(self, seconds: float) -> bool:
        """Whether the process ends within ``seconds`` (a pidfd reads ready once it has)."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, seconds))
        return bool(ready)

    def close(self) -> None:
        os.close(self.fd)


def terminate(pidfile: Path, name: str, timeout: float = 10.0) -> None:
    """SIGTERM to the daemon of ``pidfile`` (when it runs and is ``name``), SIGKILL if it is still
    there after ``timeout`` seconds."""
    held = Held.of(pidfile, name)
    if held is None:
        return
    try:
        if held.send(signal.SIGTERM) and not held.exited_within(timeout):
            held.send(signal.SIGKILL)
            held.exited_within(5.0)
    finally:
        held.close()


def stop(pidfile: Path, name: str, timeout: float = 10.0) -> None:
    """``terminate`` the daemon of ``pidfile``, then remove the pid file."""
    terminate(pidfile, name, timeout)
    with contextlib.suppress(OSError):
        pidfile.unlink()
