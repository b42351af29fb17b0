#!/usr/bin/python
"""Set or remove the hosts-file lines that map names (one, or a batch in one run), under a lock
shared by every run."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: elb_hosts_line
short_description: Set or remove the line mapping one name in a hosts file, under a lock
description:
  - Edits the lines of a hosts file that map O(name) - an address, whitespace, the name, then nothing
    or whitespace and anything - which is the regular expression ^\S+\s+NAME(\s.*)?$ with NAME escaped.
  - "present: the last such line becomes C(ADDRESS<TAB>NAME); with none, that line is added at the end."
  - "absent: every such line is removed."
  - Every other line, comments included, is kept byte for byte.
  - Runs hold an exclusive C(flock) on O(lock_path) from reading the file to replacing it, so two
    plays editing one hosts file at the same time cannot lose each other's edit.
  - The new file is written next to the old one, synced, given the old one's mode, owner and SELinux
    context, and renamed over it. Where the rename fails with EBUSY or EXDEV (a hosts file
    bind-mounted into a container), or no file can be made beside it, the file is rewritten in
    place, still under the lock.
  - If O(path) is a symbolic link, the file it points to is edited.
  - O(lines) edits many names in one read and one write (a batch of nodes), as many runs with
    O(name) one after the other would.
options:
  name:
    description: The host name. No whitespace and no C(#). One of O(name) and O(lines) is required.
    type: str
  address:
    description: The IPv4 or IPv6 address the name maps to. Required when O(state=present).
    type: str
  lines:
    description:
      - Names and the addresses they map to (the address ignored with O(state=absent)), edited in
        order in one run, instead of O(name) and O(address).
    type: dict
  state:
    description: Whether the name's line should exist.
    type: str
    choices: [present, absent]
    default: present
  path:
    description:
      - The hosts file. It must exist when O(state=present).
      - A missing file is left missing when O(state=absent).
    type: path
    default: /etc/hosts
  lock_path:
    description:
      - The lock file every run on the host takes. It is created if missing.
      - When its directory does not exist, the file of the same name in C(/tmp) is used.
    type: path
    default: /run/lock/elb-etc-hosts.lock
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - elb developers
"""

EXAMPLES = r"""
- name: Map a batch of nodes on the master in one run
  elb_hosts_line:
    lines:
      node004: 10.77.0.14
      node005: 10.77.0.15

- name: Map node004 on the master
  elb_hosts_line:
    name: node004
    address: 10.77.0.14

- name: Remove node004 from a test copy of the hosts file
  elb_hosts_line:
    name: node004
    state: absent
    path: /tmp/hosts
    lock_path: /tmp/hosts.lock
"""

RETURN = r"""
found:
  description: How many lines mapped the name before the run.
  type: int
  returned: always
  sample: 1
lock_path:
  description: The lock file the run took (none is taken in check mode).
  type: str
  returned: always
  sample: /run/lock/elb-etc-hosts.lock
in_place:
  description: Whether the file was rewritten in place because renaming over it failed.
  type: bool
  returned: always
  sample: false
"""

DEFAULT_LOCK = "/run/lock/elb-etc-hosts.lock"
FALLBACK_LOCK_DIR = "/tmp"  # noqa: S108  (only when the lock's own directory does not exist)


def check_input(name: str, address: str | None, state: str) -> None:
    """Raise ValueError, with a message for the play, for input that cannot make a hosts line."""
    if state not in ("present", "absent"):
        raise ValueError(f"state must be present or absent, not {state!r}")
    if not name or re.search(r"[\s#]", name):
        raise ValueError(f"name must be one word without whitespace or '#': {name!r}")
    if state == "present":
        if not address:
            raise ValueError("address is required with state=present")
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ValueError(f"address is not an IPv4 or IPv6 address: {address!r}") from None


def name_pattern(name: str) -> re.Pattern[bytes]:
    """The lines mapping ``name``: the role's regexp ``^\\S+\\s+NAME(\\s.*)?$``."""
    return re.compile(rb"^\S+\s+" + re.escape(name.encode()) + rb"(\s.*)?$")


def split_lines(data: bytes) -> list[bytes]:
    """The lines of ``data``, each with its own ending (the last one may have none)."""
    lines = [part + b"\n" for part in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def edit(data: bytes, name: str, address: str | None, state: str) -> tuple[bytes, int]:
    """The hosts file ``data`` with ``name``'s line set (present) or removed (absent).

    Returns the new content and how many lines mapped the name. Lines are matched without
    their ending, as lineinfile matches them; a replaced line keeps its ending.
    """
    check_input(name, address, state)
    pattern = name_pattern(name)
    lines = split_lines(data)
    found = [i for i, line in enumerate(lines) if pattern.search(line.rstrip(b"\r\n"))]
    if state == "absent":
        drop = set(found)
        return b"".join(line for i, line in enumerate(lines) if i not in drop), len(found)
    assert address is not None  # check_input
    wanted = f"{address}\t{name}".encode()
    if found:
        last = lines[found[-1]]
        body = last.rstrip(b"\r\n")
        if body != wanted:
            lines[found[-1]] = wanted + last[len(body) :]
    else:
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            lines.append(b"\n")
        lines.append(wanted + b"\n")
    return b"".join(lines), len(found)


def lock_file(lock_path: str) -> str:
    """The lock file to take: ``lock_path``, or its name in /tmp when its directory is missing."""
    if os.path.isdir(os.path.dirname(lock_path) or "."):
        return lock_path
    return os.path.join(FALLBACK_LOCK_DIR, os.path.basename(lock_path))


@contextlib.contextmanager
def locked(lock_path: str) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_path`` (created if missing) for the block."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise OSError(e.errno, f"cannot open the lock {lock_path}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_in_place(path: str, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()
        f.flush()
        os.fsync(f.fileno())


def write_atomically(path: str, data: bytes, prepare: Callable[[str], None] | None = None) -> bool:
    """Write ``data`` to ``path`` through a synced temporary file renamed over it.

    The temporary file gets ``path``'s mode and owner (and whatever ``prepare`` does to it).
    Returns True when the file had to be rewritten in place instead: renaming over it failed
    with EBUSY or EXDEV (a bind-mounted file), no file could be made in its directory, or its
    owner could not be given to a new file.
    """
    st = os.stat(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".elb-hosts-", dir=directory)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        write_in_place(path, data)
        return True
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, st.st_mode & 0o7777)
        try:
            if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                os.chown(tmp, st.st_uid, st.st_gid)
        except PermissionError:
            write_in_place(path, data)
            return True
        if prepare is not None:
            prepare(tmp)
        try:
            os.replace(tmp, path)
        except OSError as e:
            if e.errno not in (errno.EBUSY, errno.EXDEV):
                raise
            write_in_place(path, data)
            return True
        with contextlib.suppress(OSError):  # the rename is durable once the directory is synced
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@dataclass
class Result:
    changed: bool
    found: int
    before: bytes
    after: bytes
    lock_path: str
    in_place: bool = False


def update(
    path: str,
    name: str,
    address: str | None,
    state: str,
    *,
    lock_path: str = DEFAULT_LOCK,
    check: bool = False,
    prepare: Callable[[str], None] | None = None,
) -> Result:
    """Set or remove ``name``'s line in the file ``path``, holding the lock from read to write.

    ``check``: compute the result and write nothing (no lock is taken). Raises ValueError for
    bad input and FileNotFoundError for a missing file with state=present.
    """
    return update_many(path, [(name, address)], state, lock_path=lock_path, check=check, prepare=prepare)


def update_many(
    path: str,
    entries: list[tuple[str, str | None]],
    state: str,
    *,
    lock_path: str = DEFAULT_LOCK,
    check: bool = False,
    prepare: Callable[[str], None] | None = None,
) -> Result:
    """``update`` for each (name, address) of ``entries`` in order, in one read and one write;
    ``found`` counts the lines that mapped any of them."""
    if not entries:
        raise ValueError("no name to edit")
    for name, address in entries:
        check_input(name, address, state)
    path = os.path.realpath(path)  # a link's target is edited, the link kept
    lock = lock_file(lock_path)
    with contextlib.nullcontext() if check else locked(lock):
        try:
            with open(path, "rb") as f:
                before = f.read()
        except FileNotFoundError:
            if state == "absent":
                return Result(False, 0, b"", b"", lock)
            raise
        after, found = before, 0
        for name, address in entries:
            after, n = edit(after, name, address, state)
            found += n
        if after == before:
            return Result(False, found, before, after, lock)
        in_place = False if check else write_atomically(path, after, prepare)
        return Result(True, found, before, after, lock, in_place)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "address": {"type": "str"},
            "lines": {"type": "dict"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path", "default": "/etc/hosts"},
            "lock_path": {"type": "path", "default": DEFAULT_LOCK},
        },
        required_one_of=[("name", "lines")],
        mutually_exclusive=[("name", "lines"), ("address", "lines")],
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    path: str = p["path"]

    def keep_selinux_context(tmp: str) -> None:
        if module.selinux_enabled():
            module.set_context_if_different(tmp, module.selinux_context(os.path.realpath(path)), False)

    try:
        entries = (
            [(str(k), None if v is None else str(v)) for k, v in p["lines"].items()]
            if p["lines"] is not None
            else [(p["name"], p["address"])]
        )
        result = update_many(
            path,
            entries,
            p["state"],
            lock_path=p["lock_path"],
            check=module.check_mode,
            prepare=keep_selinux_context,
        )
    except ValueError as e:
        module.fail_json(msg=str(e))
    except OSError as e:
        module.fail_json(msg=f"cannot edit {path}: {e}")
    out: dict[str, Any] = {
        "changed": result.changed,
        "found": result.found,
        "lock_path": result.lock_path,
        "in_place": result.in_place,
    }
    if module._diff:
        out["diff"] = {
            "before_header": path,
            "after_header": path,
            "before": result.before.decode("utf-8", "replace"),
            "after": result.after.decode("utf-8", "replace"),
        }
    module.exit_json(**out)


if __name__ == "__main__":
    main()
