#!/usr/bin/python
"""Set or remove the exports-file lines of a batch of nodes and apply them, in one run, under a lock.

Applying is part of the run (the kernel's ``exportfs -ra``, or nfs-ganesha's include file
generated from the exports and ganesha told to reread it) because each module run is a new
Python process on the master and a fork of the controller: about half a second each on a busy
2-core master, on the path of every node's bring-up and removal. Done as separate tasks, the
look for ganesha's file, the converter's install and its run took three more runs a play."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
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
    exclusive C(flock) on O(lock_path) from the read to the write and through applying; the new
    file is written beside the old one and renamed over it (in place where that fails).
  - "O(apply): none leaves the file as written. kernel runs C(exportfs -ra) when a line changed.
    ganesha makes nfs-ganesha serve what the file says: its EXPORT blocks are written into
    O(ganesha_exports) (the file C(ganesha.conf) includes; names resolved as the master resolves
    them, since ganesha matches clients by address) and, when that file changed, the process of
    O(ganesha_pidfile) gets C(SIGHUP) to reread it; it is done on every run, so an edit of the
    exports file made by hand is applied too. auto is ganesha when O(ganesha_exports) exists,
    kernel otherwise."
  - When applying fails the lines stay as written and the run fails, saying what failed.
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
    apply: auto
"""

RETURN = r"""
lines:
  description: How many lines were added, changed or removed.
  type: int
  returned: always
  sample: 4
applied:
  description: How the exports are applied (none, kernel or ganesha: O(apply) with auto resolved).
  type: str
  returned: always
  sample: ganesha
reloaded:
  description: Whether the NFS server was told of new exports (exportfs run, or ganesha signalled).
  type: bool
  returned: always
  sample: true
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


class ApplyError(Exception):
    """Applying the exports failed; the message says what and why."""


GANESHA_HEADER = "# Generated from /etc/exports by elb's nfs_server role (elb_export_lines): do not edit.\n"
_EXPORT_LINE = re.compile(r"^(/\S*)\s+(.*)$")
_CLIENT = re.compile(r"([^\s(]+)\(([^)]*)\)")


def parse_exports(text: str) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Each exported directory's clients and their options, in the file's order (an exports
    file's ``DIR HOST(OPTIONS) [HOST(OPTIONS)...]`` lines; comments and blank lines skipped)."""
    found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _EXPORT_LINE.match(line)
        if not m:
            raise ApplyError(f"cannot read exports line: {raw!r}")
        directory, rest = m.groups()
        for host, opts in _CLIENT.findall(rest):
            found.setdefault(directory, []).append((host, tuple(o.strip() for o in opts.split(",") if o.strip())))
    return found


def address(host: str) -> str:
    """The host's address as the master resolves it (its hosts file first), or the name as it is."""
    try:
        return str(socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0])
    except OSError:
        return host


def ganesha_exports(exports: dict[str, list[tuple[str, tuple[str, ...]]]], resolve: Callable[[str], str]) -> str:
    """nfs-ganesha's EXPORT blocks for ``exports`` (NFSv3 over TCP): one block per directory, its
    clients grouped by their options, each client by ``resolve``'s address."""
    out = [GANESHA_HEADER]
    for directory in sorted(exports):
        out.append("EXPORT {\n")
        out.append(f"    Export_Id = {zlib.crc32(directory.encode()) % 60000 + 2};\n")
        out.append(f'    Path = "{directory}";\n')
        out.append(f'    Pseudo = "{directory}";\n')
        out.append("    Protocols = 3;\n    Transports = TCP;\n    SecType = sys;\n")
        out.append("    FSAL { Name = VFS; }\n")
        by_opts: dict[tuple[str, ...], list[str]] = {}
        for host, opts in exports[directory]:
            by_opts.setdefault(opts, []).append(host)
        for opts, hosts in sorted(by_opts.items()):
            access = "RO" if "ro" in opts else "RW"
            squash = "No_Root_Squash" if "no_root_squash" in opts else "Root_Squash"
            out.append("    CLIENT {\n")
            out.append(f"        Clients = {', '.join(sorted({resolve(h) for h in hosts}))};\n")
            out.append(f"        Access_Type = {access};\n        Squash = {squash};\n")
            out.append("    }\n")
        out.append("}\n")
    return "".join(out)


def apply_ganesha(exports_text: bytes, output: str, pidfile: str, *, check: bool = False) -> bool:
    """Write ganesha's include file for ``exports_text`` and signal ganesha, only when the file's
    text changes; whether it did (would, in ``check``)."""
    text = ganesha_exports(parse_exports(exports_text.decode("utf-8", "replace")), address)
    try:
        with open(output, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    except OSError as e:
        raise ApplyError(f"cannot read {output}: {e}") from e
    if check:
        return True
    try:
        write(output, text.encode())
    except OSError as e:
        raise ApplyError(f"cannot write {output}: {e}") from e
    try:
        with open(pidfile, encoding="utf-8") as f:
            os.kill(int(f.read().split()[0]), signal.SIGHUP)
    except (OSError, ValueError, IndexError) as e:
        raise ApplyError(f"wrote {output} but cannot signal nfs-ganesha (pid file {pidfile}): {e}") from e
    return True


def kind_of(apply: str, ganesha_output: str) -> str:
    """The way of applying that ``apply`` names (auto: ganesha when its include file exists)."""
    if apply != "auto":
        return apply
    return "ganesha" if os.path.exists(ganesha_output) else "kernel"


def update(
    path: str,
    hosts: Sequence[str],
    exports: Sequence[str],
    options: str,
    state: str,
    *,
    lock_path: str = DEFAULT_LOCK,
    check: bool = False,
    apply: Callable[[bytes, int], bool] | None = None,
) -> tuple[bytes, bytes, int, bool]:
    """Read, edit and write ``path`` under the lock (``check``: no lock, no write), then, still
    holding it, ``apply`` the file's new content and how many lines changed; the content before
    and after, how many lines changed and whether ``apply`` said the server was told."""
    check_input(hosts, exports, options)
    path = os.path.realpath(path)
    with contextlib.nullcontext() if check else locked(lock_path):
        try:
            with open(path, "rb") as f:
                before = f.read()
        except FileNotFoundError:
            before = b""
        after, changed = edit(before, hosts, exports, options, state)
        if changed and not check:
            write(path, after)
        reloaded = apply(after, changed) if apply is not None else False
        return before, after, changed, reloaded


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "list", "elements": "str", "required": True},
            "exports": {"type": "list", "elements": "str", "required": True},
            "options": {"type": "str", "default": "rw,sync,no_root_squash,no_subtree_check"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path", "default": "/etc/exports"},
            "lock_path": {"type": "path", "default": DEFAULT_LOCK},
            "apply": {"type": "str", "choices": ["none", "auto", "kernel", "ganesha"], "default": "none"},
            "ganesha_exports": {"type": "path", "default": "/etc/ganesha/elb-exports.conf"},
            "ganesha_pidfile": {"type": "path", "default": "/run/ganesha/ganesha.pid"},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    kind = kind_of(p["apply"], p["ganesha_exports"])

    def apply(content: bytes, changed: int) -> bool:
        if kind == "ganesha":
            return apply_ganesha(content, p["ganesha_exports"], p["ganesha_pidfile"], check=module.check_mode)
        if kind == "kernel" and changed:
            if not module.check_mode:
                rc, out, err = module.run_command(["exportfs", "-ra"])
                if rc != 0:
                    raise ApplyError(f"exportfs -ra failed (exit {rc}): {(err or out).strip()}")
            return True
        return False

    try:
        before, after, changed, reloaded = update(
            p["path"],
            p["hosts"],
            p["exports"],
            p["options"],
            p["state"],
            lock_path=p["lock_path"],
            check=module.check_mode,
            apply=None if kind == "none" else apply,
        )
    except ValueError as e:
        module.fail_json(msg=str(e))
    except ApplyError as e:
        module.fail_json(msg=f"the exports lines of {p['path']} are written; applying them failed: {e}")
    except OSError as e:
        module.fail_json(msg=f"cannot edit {p['path']}: {e}")
    out: dict[str, Any] = {
        "changed": changed > 0 or reloaded,  # (the kernel's reload follows a changed line; ganesha's its file)
        "lines": changed,
        "applied": kind,
        "reloaded": reloaded,
    }
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
