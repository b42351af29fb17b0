"""The lock test both NFS lock tests run: a small Python program that takes a lock on a file and
says how it went, and the steps that show a lock one node holds keeps another node out until it
lets go (``test_nfs_locks``: two nodes of the test cluster; ``test_nfs_locks_private``: two FUSE
mounts of a private nfs-ganesha)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Take a lock (``posix``: lockf, ``bsd``: flock) on FILE and say how it went; ``hold`` keeps it
# until RELEASE exists. Arguments: KIND (posix, bsd), WHAT (try, wait, hold), FILE [RELEASE].
LOCKER = """
import fcntl, os, sys, time
kind, what, path = sys.argv[1:4]
f = open(path, "a")
take = fcntl.lockf if kind == "posix" else fcntl.flock
flags = fcntl.LOCK_EX | (fcntl.LOCK_NB if what == "try" else 0)
print("asking", flush=True)
try:
    take(f, flags)
except BlockingIOError as err:
    print("refused", err.errno, flush=True)
    sys.exit(0)
print("locked", flush=True)
if what == "hold":
    while not os.path.exists(sys.argv[4]):
        time.sleep(0.1)
f.close()
print("released", flush=True)
"""


def argv(python: str, *args: str) -> list[str]:
    """The command that runs ``LOCKER`` with ``python`` and the locker's ``args``."""
    return [python, "-c", LOCKER, *args]


@dataclass(frozen=True)
class Node:
    """Where one locker runs: ``start`` runs ``LOCKER`` there with the given arguments (stdout
    piped, as text); ``path`` names a file as that node sees it."""

    start: Callable[..., subprocess.Popen[str]]
    path: Callable[[str], Path]


def line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def finish(proc: subprocess.Popen[str]) -> list[str]:
    """The lines the locker says until it ends."""
    out, _ = proc.communicate(timeout=120)
    return out.strip().splitlines()


def lock_holds(first: Node, second: Node, kind: str, name: str, release: Path) -> None:
    """``first`` holds a ``kind`` lock on the file ``name``; ``second``'s non-blocking lock on it
    is refused and its blocking lock waits until ``first`` lets go (when ``release``, the file
    ``release.name`` as the test sees it, is written); then the lock is free for everyone."""
    holder = first.start(kind, "hold", str(first.path(name)), str(first.path(release.name)))
    waiter: subprocess.Popen[str] | None = None
    try:
        assert line(holder) == "asking" and line(holder) == "locked"
        assert finish(second.start(kind, "try", str(second.path(name)))) == ["asking", "refused 11"]  # EWOULDBLOCK

        waiter = second.start(kind, "wait", str(second.path(name)))
        assert line(waiter) == "asking"
        # While the first node holds the lock, the second's blocking lock has not been granted:
        # another non-blocking try from there is still refused, and the waiter has said nothing.
        assert finish(second.start(kind, "try", str(second.path(name)))) == ["asking", "refused 11"]
        assert waiter.poll() is None

        release.write_text("")  # the first node lets go
        assert finish(holder)[-1] == "released"
        assert finish(waiter) == ["locked", "released"]
        # Free again for everyone.
        assert finish(first.start(kind, "try", str(first.path(name)))) == ["asking", "locked", "released"]
    finally:
        release.write_text("")
        for proc in (holder, waiter):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
