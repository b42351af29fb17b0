"""One SSH connection per host for the length of one playbook run, and none left after it.

Without connection sharing every module run of a play opens its own SSH connection (a key
exchange, an authentication and an sshd fork on the node): on a small master a tenth of a second
of CPU and more of wall time per task and host, a tenth of an add play. With it, the first task
on a host opens a master connection (``ControlMaster=auto``) that the later tasks of the same run
reuse.

A master connection must never outlive its run: a node re-created at the same address would be
reached through the old node's connection, its host key never checked. So each run has its own
directory for the sockets (``shared_connections``), given to Ansible as the run's
``ansible_control_path_dir``; when the run ends, whatever its end, every master left there is
told to exit (``ssh -O exit``) and the directory is deleted. A run whose elb was killed leaves
its masters to ``PERSIST`` (they exit that long after their last use) and
``ServerAliveInterval`` (a master to a host that went away exits within half a minute).

An inventory without such a directory (the dynamic EC2 inventory of admins' repairs, elb's own
checks) keeps a connection per task (``ControlMaster=no``).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("elb.provision")

PERSIST = "60s"  # how long an unused master waits for its next task (Ansible's own default)
SHARED = f"-o ControlMaster=auto -o ControlPersist={PERSIST}"
UNSHARED = "-o ControlMaster=no"

# A Unix socket's path has at most 107 bytes; Ansible names each socket by a 10-character hash
# of host, port and user in the directory, and ssh adds a suffix of 17 while it creates it.
MAX_DIR = 107 - 1 - 10 - 17
PREFIX = "elb-ssh-"  # a run's directory: this and the 8 random characters mkdtemp adds
NAME_LEN = len(PREFIX) + 8
EXIT_TIMEOUT = 5.0  # seconds for one ``ssh -O exit``


def connection_args(directory: Path | None) -> str:
    """The ``ControlMaster`` options for a run whose sockets go in ``directory`` (None: unshared)."""
    return UNSHARED if directory is None else SHARED


@contextlib.contextmanager
def shared_connections(parent: Path | None = None) -> Iterator[Path | None]:
    """A new directory (mode 0700) for one run's master connections, closed and deleted at the
    end; None (a connection per task) when no directory short enough can be made."""
    base = Path(parent or tempfile.gettempdir())
    if len(str(base)) + 1 + NAME_LEN > MAX_DIR:
        base = Path("/tmp")  # noqa: S108 (a private directory of our own in it, below)
    try:
        directory = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    except OSError as err:
        log.warning("no directory for shared SSH connections in %s (%s): a connection per task", base, err)
        yield None
        return
    try:
        yield directory
    finally:
        close_all(directory)
        shutil.rmtree(directory, ignore_errors=True)


def close_all(directory: Path) -> int:
    """Tell every master connection whose socket is in ``directory`` to exit; how many were."""
    closed = 0
    try:
        sockets = sorted(p for p in directory.iterdir() if p.is_socket())
    except OSError:
        return 0
    for sock in sockets:
        # The destination is only a placeholder: ControlPath names the master to talk to.
        argv = ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "elb-shared-connection"]
        try:
            r = subprocess.run(
                argv, capture_output=True, text=True, timeout=EXIT_TIMEOUT, check=False, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            log.warning("cannot close the shared SSH connection %s: %s", sock.name, err)
            continue
        if r.returncode == 0:
            closed += 1
        else:  # already gone (its host went, or ControlPersist ran out as we looked)
            log.debug("shared SSH connection %s: %s", sock.name, r.stderr.strip())
    return closed
