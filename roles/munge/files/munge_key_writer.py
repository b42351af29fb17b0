"""Give this node the cluster's munge key, in one run (elb's munge role runs it as root over SSH:
``python3 -c SOURCE KEY_PATH``, the key base64-encoded on stdin, never in an argument).

    python3 munge_key_writer.py KEY_PATH [--owner USER] [--group GROUP] [--proc DIR] [--systemd-dir DIR]

- The key at KEY_PATH is the one on stdin, a regular file of USER:GROUP (munge:munge), mode
  0400: nothing is written, the result says unchanged.
- Otherwise the key is written beside it (KEY_PATH.elb-new, created mode 0400 and given to
  USER:GROUP before a byte of the key is in it, so no one else may read it even for an instant),
  fsynced and renamed over KEY_PATH, the directory fsynced: munged never reads half a key.
- When the key's bytes changed (or there was none), a munged that runs (a process of that name
  under DIR, /proc) started with another key, so it is restarted: with ``systemctl restart munge``
  where systemd runs the node (--systemd-dir, /run/systemd/system, exists), else stopped
  (SIGTERM, until gone) and started as its unit would start it, as USER with its runtime
  directory /run/munge. A munged that does not run is left to whoever starts it.

Prints one line of JSON: ``{"changed": bool, "restarted": bool, "msg": str}``, exit 0; on a
failure (no such user, bad input, a write or a restart that failed) ``{"failed": true, "msg":
...}``, exit 1. The key is never printed.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import grp
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MODE = 0o400
SUFFIX = ".elb-new"
MUNGED = "munged"
MUNGED_BIN = "/usr/sbin/munged"
RUN_DIR = "/run/munge"
STOP_WAIT = 20.0  # seconds a stopped munged has to be gone (it removes its socket and pid file)


class WriterError(Exception):
    """A failure the writer reports in one line."""


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int
    user: str


@dataclass(frozen=True)
class Outcome:
    changed: bool  # the file was written
    replaced: bool  # its bytes changed: a running munged holds another key
    restarted: bool


def owner_of(user: str, group: str) -> Owner:
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        raise WriterError(f"no user {user} on this node: its image needs munge installed") from None
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise WriterError(f"no group {group} on this node: its image needs munge installed") from None
    return Owner(uid, gid, user)


def decode_key(text: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise WriterError("the key on stdin is not base64") from None
    if not key:
        raise WriterError("no key on stdin")
    return key


def current(path: Path, key: bytes, owner: Owner) -> tuple[bool, bool]:
    """(same bytes, same bytes and owner, group and mode) of the file at ``path``; a missing
    file, a link or anything but a regular file is neither."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False, False
    except OSError as err:
        if os.path.islink(path):
            return False, False
        raise WriterError(f"cannot read {path}: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False, False
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    same = b"".join(chunks) == key
    owned = st.st_uid == owner.uid and st.st_gid == owner.gid and stat.S_IMODE(st.st_mode) == MODE
    return same, same and owned


def write_atomically(path: Path, key: bytes, owner: Owner) -> None:
    """``key`` into ``path`` through a file beside it, mode 0400 and ``owner``'s before the key
    is in it, fsynced, renamed over ``path``; the directory fsynced."""
    tmp = path.with_name(path.name + SUFFIX)
    try:
        tmp.unlink(missing_ok=True)  # left by a run that was cut short
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, MODE)
        try:
            os.fchmod(fd, MODE)  # whatever the umask
            os.fchown(fd, owner.uid, owner.gid)
            view = memoryview(key)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dirfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise WriterError(f"cannot write {path}: {err.strerror}") from None


def running_munged(proc: Path) -> list[int]:
    """The pids of the processes named munged under ``proc``."""
    pids = []
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:  # gone meanwhile
            continue
        if name == MUNGED:
            pids.append(int(entry.name))
    return pids


def run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise WriterError(f"{' '.join(argv)}: {err}") from None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise WriterError(f"{' '.join(argv)} exited {done.returncode}: {why[-1] if why else 'no output'}")


def stop(pids: list[int], proc: Path) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT
    while running_munged(proc):
        if time.monotonic() > deadline:
            raise WriterError(f"munged did not stop within {STOP_WAIT:g} s of SIGTERM")
        time.sleep(0.2)


def start_directly(owner: Owner) -> None:
    """Start munged as its unit would where systemd does not run the node: as the munge user,
    with its runtime directory."""
    os.makedirs(RUN_DIR, mode=0o755, exist_ok=True)
    os.chown(RUN_DIR, owner.uid, owner.gid)
    os.chmod(RUN_DIR, 0o755)  # noqa: S103 (munge.service's RuntimeDirectory: its socket's directory)
    run(["runuser", "-u", owner.user, "--", MUNGED_BIN])


def restart(pids: list[int], owner: Owner, proc: Path, systemd: bool) -> None:
    if systemd:
        run(["systemctl", "restart", "munge"])
        return
    try:
        stop(pids, proc)
        start_directly(owner)
    except OSError as err:
        raise WriterError(f"restarting munged: {err}") from None


def give_key(path: Path, key: bytes, owner: Owner, proc: Path, systemd_dir: Path) -> Outcome:
    same, settled = current(path, key, owner)
    if settled:
        return Outcome(changed=False, replaced=False, restarted=False)
    write_atomically(path, key, owner)
    pids = [] if same else running_munged(proc)
    if pids:
        restart(pids, owner, proc, systemd_dir.is_dir())
    return Outcome(changed=True, replaced=not same, restarted=bool(pids))


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="munge_key_writer", description="Give this node the cluster's munge key.")
    p.add_argument("key_path", type=Path)
    p.add_argument("--owner", default="munge")
    p.add_argument("--group", default="munge")
    p.add_argument("--proc", type=Path, default=Path("/proc"))
    p.add_argument("--systemd-dir", type=Path, default=Path("/run/systemd/system"))
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        owner = owner_of(args.owner, args.group)
        out = give_key(args.key_path, decode_key(sys.stdin.read()), owner, args.proc, args.systemd_dir)
    except WriterError as err:
        print(json.dumps({"failed": True, "msg": str(err)}))
        return 1
    if not out.changed:
        msg = "the key was there"
    else:
        msg = "the key written" + (", munged restarted" if out.restarted else "")
    print(json.dumps({"changed": out.changed, "restarted": out.restarted, "msg": msg}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
