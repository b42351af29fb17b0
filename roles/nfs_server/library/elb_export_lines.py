#!/usr/bin/python
"""Set or remove the exports-file lines of a batch of nodes in one run, under a lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: elb_export_lines
short_description: Set or remove the exports lines of a batch of nodes in one run, under a lock
description:
  - For each node of O(hosts) and each directory of O(exports), the line C(DIR NODE(OPTIONS)) of
    O(path), matched as the nfs_server role's lineinfile task matches it (^DIR\s+NODE\(, both
    escaped), exactly as one lineinfile run per node and directory would leave the file.
  - "present: the last matching line becomes C(DIR NODE(OPTIONS)); with none, the line is added at
    the end. absent: every matching line is removed."
  - Every other line is kept byte for byte. One read and one write for the whole batch, holding an
    exclusive C(flock) on O(lock_path) from the read to the write; the new file is written beside
    the old one and renamed over it (in place where that fails).
options:
  hosts:
    description: The nodes' names. No whitespace, no C(#), no C(().
    type: list
    elements: str
    required: true
  exports:
    description: The exported directories (absolute paths without whitespace).
    type: list
    elements: str
    required: true
  options:
    description: The export options of the present lines.
    type: str
    default: rw,sync,no_root_squash,no_subtree_check
  state:
    description: Whether the lines should exist.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The exports file (created, mode 0644, when missing with O(state=present)).
    type: path
    default: /etc/exports
  lock_path:
    description: The lock file every run takes (created if missing).
    type: path
    default: /run/lock/elb-exports.lock
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - elb developers
"""

EXAMPLES = r"""
- name: Export /home and the SGE cell's common directory to a batch of nodes
  elb_export_lines:
    hosts: [node004, node005]
    exports: [/home, /var/lib/gridengine/default/common]
"""

RETURN = r"""
lines:
  description: How many lines were added, changed or removed.
  type: int
  returned: always
  sample: 4
"""

DEFAULT_LOCK = "/run/lock/elb-exports.lock"
_WORD = re.compile(r"[^\s#()]+")


def check_input(hosts: Sequence[str], exports: Sequence[str], options: str) -> None:
    """Raise ValueError, with a message for the play, for what cannot make an exports line."""
    for host in hosts:
        if not _WORD.fullmatch(host):
            raise ValueError(f"a host name must be one word without whitespace, '#' or '(': {host!r}")
    for directory in exports:
        if not directory.startswith("/") or re.search(r"[\s#]", directory):
            raise ValueError(f"an export must be an absolute path without whitespace or '#': {directory!r}")
    if re.search(r"[\s#()]", options):
        raise ValueError(f"options must be one word without whitespace, '#' or parentheses: {options!r}")


def edit(data: bytes, hosts: Sequence[str], exports: Sequence[str], options: str, state: str) -> tuple[bytes, int]:
    """``data`` with each host's line for each export set (present) or removed (absent), in that
    order; how many lines changed."""
    lines = [part + b"\n" for part in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    changed = 0
    for host in hosts:
        for directory in exports:
            pattern = re.compile(rb"^" + re.escape(directory.encode()) + rb"\s+" + re.escape(host.encode()) + rb"\(")
            found = [i for i, line in enumerate(lines) if pattern.search(line)]
            if state == "absent":
                drop = set(found)
                lines = [line for i, line in enumerate(lines) if i not in drop]
                changed += len(found)
                continue
            wanted = f"{directory} {host}({options})".encode()
            if found:
                last = lines[found[-1]]
                body = last.rstrip(b"\r\n")
                if body != wanted:
                    lines[found[-1]] = wanted + last[len(body) :]
                    changed += 1
            else:
                if lines and not lines[-1].endswith(b"\n"):
                    lines[-1] += b"\n"
                lines.append(wanted + b"\n")
                changed += 1
    return b"".join(lines), changed


@contextlib.contextmanager
def locked(lock_path: str) -> Iterator[None]:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write(path: str, data: bytes) -> None:
    """Beside the old file and renamed over it, its mode kept; in place where that fails."""
    mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
    directory = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".elb-exports-", dir=directory)
    except OSError:
        with open(path, "wb") as f:
            f.write(data)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        with open(path, "wb") as f:
            f.write(data)


def update(
    path: str,
    hosts: Sequence[str],
    exports: Sequence[str],
    options: str,
    state: str,
    *,
    lock_path: str = DEFAULT_LOCK,
    check: bool = False,
) -> tuple[bytes, bytes, int]:
    """Read, edit and write ``path`` under the lock (``check``: no lock, no write); the content
    before and after and how many lines changed."""
    check_input(hosts, exports, options)
    path = os.path.realpath(path)
    with contextlib.nullcontext() if check else locked(lock_path):
        try:
            with open(path, "rb") as f:
                before = f.read()
        except FileNotFoundError:
            if state == "absent":
                return b"", b"", 0
            before = b""
        after, changed = edit(before, hosts, exports, options, state)
        if changed and not check:
            write(path, after)
        return before, after, changed


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "list", "elements": "str", "required": True},
            "exports": {"type": "list", "elements": "str", "required": True},
            "options": {"type": "str", "default": "rw,sync,no_root_squash,no_subtree_check"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path", "default": "/etc/exports"},
            "lock_path": {"type": "path", "default": DEFAULT_LOCK},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    try:
        before, after, changed = update(
            p["path"],
            p["hosts"],
            p["exports"],
            p["options"],
            p["state"],
            lock_path=p["lock_path"],
            check=module.check_mode,
        )
    except ValueError as e:
        module.fail_json(msg=str(e))
    except OSError as e:
        module.fail_json(msg=f"cannot edit {p['path']}: {e}")
    out: dict[str, Any] = {"changed": changed > 0, "lines": changed}
    if module._diff:
        out["diff"] = {
            "before_header": p["path"],
            "after_header": p["path"],
            "before": before.decode("utf-8", "replace"),
            "after": after.decode("utf-8", "replace"),
        }
    module.exit_json(**out)


if __name__ == "__main__":
    main()
