#!/usr/bin/python
"""A node's NFS mounts in one module run: mount points, fstab lines, mounts and remounts.

The same steps as builtin modules take six to eight module runs a node (a directory and an
fstab line per export, a read of the mounts, a mount per export), each a new Python process on
the node and the controller's work for a task: about half a second each on a busy 2-core
master, on the path of every node's bring-up. ``ansible.posix.mount`` does an export in one run,
but ansible.posix is not a dependency (ansible-core alone is). Here one run plans from the fstab
and the node's mounts, then acts; a mount that fails is tried again within the run."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: elb_nfs_mounts
short_description: Mount a server's NFS exports at the same paths, with their fstab lines
description:
  - For each of O(mounts): creates the mount point when it is missing (mode 0755; an existing
    directory is left as it is), makes its fstab line C(SERVER:PATH PATH FSTYPE OPTIONS 0 0) (the
    first line for that mount point is replaced, further ones removed, none: the line is added),
    mounts it with C(mount PATH) when it is not mounted, and remounts it with C(mount -o remount
    PATH) when it is mounted and its line changed.
  - The fstab is written once, whole, through a temporary file in its directory (root:root
    0644), only when a line changed.
  - A C(mount PATH) that fails is tried again within the run, at most O(tries) times, O(delay)
    seconds apart; the run fails with O(msg), the mount point and the last stderr.
  - The mounts are made one after the other, in the order of O(mounts).
  - In check mode nothing is changed and the result says what would change.
options:
  server:
    description: The NFS server's name as the node resolves it.
    type: str
    required: true
  mounts:
    description: Exported directories (absolute paths), mounted at the same path.
    type: list
    elements: str
    required: true
  options:
    description: Mount options of the fstab lines.
    type: str
    default: rw,hard
  fstype:
    description: The file system type of the fstab lines.
    type: str
    default: nfs
  tries:
    description: How many times a mount is tried at most (1 tries it once).
    type: int
    default: 1
  delay:
    description: Seconds between two tries of a mount.
    type: float
    default: 5
  msg:
    description: What a failed mount's message says first.
    type: str
    default: ""
  fstab:
    description: The fstab file.
    type: path
    default: /etc/fstab
  proc_mounts:
    description: Where the node's mounts are read.
    type: path
    default: /proc/self/mounts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - elb developers
"""

EXAMPLES = r"""
- name: Mount the master's /home and SGE's common directory
  elb_nfs_mounts:
    server: master
    mounts: [/home, /var/lib/gridengine/default/common]
    options: rw,hard
    tries: 150
    delay: 2
"""

RETURN = r"""
created:
  description: Mount points created.
  type: list
  elements: str
  returned: always
fstab_changed:
  description: Mount points whose fstab line was added or changed.
  type: list
  elements: str
  returned: always
mounted:
  description: Mount points mounted by this run.
  type: list
  elements: str
  returned: always
remounted:
  description: Mount points remounted because their line changed.
  type: list
  elements: str
  returned: always
"""

Run = Callable[[Sequence[str]], "tuple[int, str, str]"]


@dataclass(frozen=True)
class Plan:
    """What one run does: the fstab's new text (None: unchanged) and the mount points to
    create, whose lines change, to mount and to remount."""

    fstab: str | None
    create: tuple[str, ...] = ()
    changed_lines: tuple[str, ...] = ()
    mount: tuple[str, ...] = ()
    remount: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return bool(self.fstab is not None or self.create or self.mount or self.remount)


@dataclass
class Failed(Exception):
    """A mount that failed every try."""

    path: str
    rc: int
    said: str
    tries: int
    done: list[str] = field(default_factory=list)


def check(server: str, mounts: Sequence[str], *, options: str, fstype: str, tries: int, delay: float) -> None:
    """Raise ValueError for an argument that cannot make a valid fstab line or wait."""
    for what, value in (("server", server), ("options", options), ("fstype", fstype)):
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"{what} must be one word, without blanks: {value!r}")
    if not mounts:
        raise ValueError("mounts must name at least one directory")
    for path in mounts:
        if not path.startswith("/") or any(c.isspace() for c in path):
            raise ValueError(f"a mount must be an absolute path without blanks: {path!r}")
    if len(set(mounts)) != len(mounts):
        raise ValueError(f"a mount is named twice: {list(mounts)}")
    if tries < 1:
        raise ValueError(f"tries must be at least 1: {tries}")
    if delay < 0:
        raise ValueError(f"delay must not be negative: {delay}")


def line_of(server: str, path: str, fstype: str, options: str) -> str:
    return f"{server}:{path} {path} {fstype} {options} 0 0"


def mount_point(line: str) -> str | None:
    """The mount point of an fstab line (its second field); None for a comment or a blank line."""
    fields = line.split()
    if len(fields) < 2 or fields[0].startswith("#"):
        return None
    return fields[1]


def mounted_paths(proc_mounts: str) -> set[str]:
    """The mount points of a ``/proc/self/mounts`` text (octal escapes of blanks decoded)."""
    out: set[str] = set()
    for line in proc_mounts.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            out.add(fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\"))
    return out


def plan(
    fstab: str,
    mounted: set[str],
    existing_dirs: set[str],
    *,
    server: str,
    mounts: Sequence[str],
    fstype: str,
    options: str,
) -> Plan:
    """The run's plan from the fstab's text, the mounted paths and which mount points exist."""
    lines = fstab.splitlines()
    wanted = {path: line_of(server, path, fstype, options) for path in mounts}
    out: list[str] = []
    seen: set[str] = set()
    changed: set[str] = set()
    for line in lines:
        point = mount_point(line)
        if point not in wanted:
            out.append(line)
        elif point in seen:  # a further line for the same mount point: removed
            changed.add(point)
        else:
            seen.add(point)
            out.append(wanted[point])
            if line != wanted[point]:
                changed.add(point)
    missing = [p for p in mounts if p not in seen]
    out += map(wanted.__getitem__, missing)
    changed.update(missing)
    ordered = [p for p in mounts if p in changed]  # in the order of ``mounts``
    return Plan(
        fstab="\n".join(out) + "\n" if changed else None,
        create=tuple(p for p in mounts if p not in existing_dirs),
        changed_lines=tuple(ordered),
        mount=tuple(p for p in mounts if p not in mounted),
        remount=tuple(p for p in ordered if p in mounted),
    )


def mount_all(paths: Sequence[str], run: Run, *, tries: int, delay: float, sleep: Callable[[float], None]) -> list[str]:
    """``mount PATH`` for each path in turn, each tried up to ``tries`` times; raises Failed
    (with the paths mounted before it) at the first path that failed every try."""
    done: list[str] = []
    for path in paths:
        n = 0
        while True:
            n += 1
            rc, out, err = run(["mount", path])
            if rc == 0:
                done.append(path)
                break
            if n >= tries:
                raise Failed(path, rc, (err.strip() or out.strip()) or "(no output)", n, done)
            sleep(delay)
    return done


def failure(msg: str, err: Failed, delay: float) -> str:
    head = f"{msg}: " if msg else ""
    waited = f" over {(err.tries - 1) * delay:g} s" if err.tries > 1 else ""
    return (
        f"{head}mount {err.path} failed {err.tries} time{'s' if err.tries != 1 else ''}{waited}; "
        f"the last exited {err.rc}: {err.said}"
    )


def write_fstab(path: str, text: str, module: AnsibleModule) -> None:
    """The whole fstab through a temporary file in its directory, root:root 0644."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".fstab.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        if os.geteuid() == 0:
            os.chown(tmp, 0, 0)
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_node(
    module: AnsibleModule, fstab_path: str, proc_mounts: str, mounts: Sequence[str]
) -> tuple[str, set[str], set[str]]:
    """The fstab's text (empty when there is none), the mounted paths and the mount points that
    exist; the run fails on what cannot be read or on a mount point that is not a directory."""
    fstab = ""
    try:
        with open(fstab_path) as f:
            fstab = f.read()
    except FileNotFoundError:
        pass
    except OSError as err:
        module.fail_json(msg=f"cannot read {fstab_path}: {err}", changed=False)
    mounted: set[str] = set()
    try:
        with open(proc_mounts) as f:
            mounted = mounted_paths(f.read())
    except OSError as err:
        module.fail_json(msg=f"cannot read the node's mounts ({proc_mounts}): {err}", changed=False)
    existing = {m for m in mounts if os.path.isdir(m)}
    for m in mounts:
        if m not in existing and os.path.lexists(m):
            module.fail_json(msg=f"the mount point {m} exists and is not a directory", changed=False)
    return fstab, mounted, existing


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "server": {"type": "str", "required": True},
            "mounts": {"type": "list", "elements": "str", "required": True},
            "options": {"type": "str", "default": "rw,hard"},
            "fstype": {"type": "str", "default": "nfs"},
            "tries": {"type": "int", "default": 1},
            "delay": {"type": "float", "default": 5},
            "msg": {"type": "str", "default": ""},
            "fstab": {"type": "path", "default": "/etc/fstab"},
            "proc_mounts": {"type": "path", "default": "/proc/self/mounts"},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    mounts: list[str] = [m.rstrip("/") or "/" for m in p["mounts"]]
    try:
        check(p["server"], mounts, options=p["options"], fstype=p["fstype"], tries=p["tries"], delay=p["delay"])
    except ValueError as err:
        module.fail_json(msg=str(err), changed=False)
    fstab, mounted, existing = read_node(module, p["fstab"], p["proc_mounts"], mounts)
    todo = plan(fstab, mounted, existing, server=p["server"], mounts=mounts, fstype=p["fstype"], options=p["options"])
    result: dict[str, Any] = {
        "created": list(todo.create),
        "fstab_changed": list(todo.changed_lines),
        "mounted": list(todo.mount),
        "remounted": list(todo.remount),
    }
    if module.check_mode or not todo.changes:
        module.exit_json(changed=todo.changes, **result)
    try:
        for m in todo.create:
            os.makedirs(m, mode=0o755, exist_ok=True)
            os.chmod(m, 0o755)  # noqa: S103 (a mount point others read, as the file module made it)
    except OSError as err:
        module.fail_json(msg=f"cannot create the mount point {err.filename}: {err.strerror}", changed=False, **result)
    if todo.fstab is not None:
        try:
            write_fstab(p["fstab"], todo.fstab, module)
        except OSError as err:
            module.fail_json(msg=f"cannot write {p['fstab']}: {err}", changed=bool(todo.create), **result)

    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        rc, out, err = module.run_command([module.get_bin_path(argv[0], required=True), *argv[1:]])
        return int(rc), str(out), str(err)

    try:
        mount_all(todo.mount, run, tries=p["tries"], delay=p["delay"], sleep=time.sleep)
    except Failed as err:
        result["mounted"] = err.done
        result["remounted"] = []
        module.fail_json(msg=failure(p["msg"], err, p["delay"]), changed=True, **result)
    for m in todo.remount:
        rc, out, err_text = run(["mount", "-o", "remount", m])
        if rc != 0:
            said = (err_text.strip() or out.strip()) or "(no output)"
            module.fail_json(msg=f"mount -o remount {m} failed, exit {rc}: {said}", changed=True, **result)
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
