"""Stop a process and everything it started, even what left its process group (Linux /proc).

ansible-playbook's workers call ``setsid()``, and its SSH connections start new sessions too,
so killing ansible-playbook's process group (what ansible-runner does on cancel and time-out)
leaves the workers, their ``ssh`` and the modules they run behind. Here the whole tree is
frozen with SIGSTOP (a stopped process cannot fork, and children of a stopped parent are not
re-parented), re-read until nothing new appears, then killed with SIGKILL.

``RunRecords`` keeps a record of each playbook run in flight, so that an elb started after a
crash stops its predecessor's playbooks (they run in sessions of their own, so the crash of elb
does not end them) before it acts on the same nodes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time in clock ticks) of a process, None if it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ... starttime(22nd field) ...": comm may hold anything.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for pid in _pids():
        st = _stat(pid)
        if st is not None:
            kids.setdefault(st[0], []).append(pid)
    return kids


def descendants(root: int, kids: dict[int, list[int]] | None = None) -> set[int]:
    """Every process below ``root`` (not ``root`` itself)."""
    kids = children_map() if kids is None else kids
    found: set[int] = set()
    todo = list(kids.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(kids.get(pid, ()))
    return found


def cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def find_child(match: Callable[[list[str]], bool], parent: int | None = None) -> int | None:
    """A direct child of ``parent`` (default: this process) whose command line matches."""
    parent = os.getpid() if parent is None else parent
    for pid in children_map().get(parent, ()):
        if match(cmdline(pid)):
            return pid
    return None


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_tree(root: int, rounds: int = 10) -> int:
    """Freeze ``root`` and all its descendants, then SIGKILL them. Returns how many were signalled."""
    frozen: dict[int, int] = {}  # pid -> start time, to never kill a recycled pid
    for _ in range(rounds):
        tree = {root} | descendants(root)
        new = [p for p in tree if p not in frozen]
        if not new:
            break
        for pid in new:
            st = _stat(pid)
            if st is not None:
                frozen[pid] = st[1]
        _signal(new, signal.SIGSTOP)
    same = [p for p, start in frozen.items() if (st := _stat(p)) is not None and st[1] == start]
    _signal(same, signal.SIGKILL)
    _signal(same, signal.SIGCONT)  # a stopped process dies of SIGKILL anyway; be sure
    return len(same)


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (with the pid, names one process)."""
    st = _stat(pid)
    return None if st is None else st[1]


def matching(marker: str) -> list[int]:
    """Processes (other than this one) with ``marker`` in an argument of their command line."""
    me = os.getpid()
    return [p for p in _pids() if p != me and any(marker in a for a in cmdline(p))]


class RunRecords:
    """Playbook runs in flight, one small JSON file each in ``directory``, so that a later elb
    can stop what a killed one left running.

    A record names its owner (pid and start time) and a marker found in the command line of the
    run's processes (the run's artifact directory). ``reap`` stops the processes of every record
    whose owner is gone, and nothing of a live owner's (another elb process on the same state
    directory keeps its runs).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def start(self, ident: str, marker: str) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        me = os.getpid()
        path = self.directory / f"{ident}.json"
        path.write_text(json.dumps({"owner": me, "owner_start": start_time(me), "marker": marker}), encoding="utf-8")
        return path

    @staticmethod
    def finish(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def reap(self) -> list[tuple[str, int]]:
        """Stop the runs whose owner is gone: (marker, processes killed) for each such record."""
        out: list[tuple[str, int]] = []
        try:
            paths = sorted(self.directory.glob("*.json"))
        except OSError:
            return out
        for path in paths:
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
                owner, owner_start, marker = int(rec["owner"]), rec["owner_start"], str(rec["marker"])
            except (OSError, ValueError, KeyError, TypeError):
                self.finish(path)  # unreadable: half-written by a process killed while writing it
                continue
            if start_time(owner) == owner_start and owner_start is not None:
                continue  # its owner still runs it
            if marker:
                pids = set(matching(marker))
                tops = [p for p in pids if (st := _stat(p)) is not None and st[0] not in pids]
                out.append((marker, sum(kill_tree(p) for p in tops)))
            self.finish(path)
        return out
