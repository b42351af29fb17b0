"""Test-only NFSv3 client for the elb test cluster's nodes: a FUSE filesystem over nfs-rs.

The kernel of the machine running the test cluster has no NFS client, so the node image
diverts ``/sbin/mount.nfs`` to a wrapper that runs this file. ``mount -t nfs master:/home
/home`` (and ``mount /home`` from fstab, as the nfs_client role runs it) works unchanged:
this program starts the filesystem in its own session (``setsid``) in the foreground, waits
until the mount point appears in ``/proc/self/mounts`` and returns, as mount helpers do.

Every request is made with the caller's identity: one NFS connection per (uid, gid) taken
from the FUSE context, so the server's permission checks and file ownership are those of
the user on the node. Not for production use: no locking, no caching, no reconnect (a
connection, one per identity, is opened at its first use and kept, failed or not).

Runs with the node's own Python (3.11) and the ``nfs-rs`` and ``mfusepy`` wheels from PyPI
installed under ``/opt/elb-mountnfs``; it does not import elb.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
import sys
import threading
import time
from typing import Any

MOUNT_WAIT = 20.0
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
LOG_DIR = "/var/log/elb-mountnfs"


def _parse_args(argv: list[str]) -> tuple[str, str, dict[str, str], bool]:
    """``mount.nfs SPEC DIR [-sfnvrw] [-o OPTS]`` -> (spec, dir, options, serve)."""
    positional: list[str] = []
    opts: dict[str, str] = {}
    serve = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-o" and i + 1 < len(argv):
            for item in argv[i + 1].split(","):
                if item:
                    k, _, v = item.partition("=")
                    opts[k] = v
            i += 2
            continue
        if a == "--serve":
            serve = True
        elif a.startswith("-"):
            pass  # -s -f -n -v -r -w: accepted and ignored
        else:
            positional.append(a)
        i += 1
    if len(positional) != 2 or ":" not in positional[0]:
        raise SystemExit("usage: mount.nfs SERVER:/EXPORT DIR [-o OPTIONS]")
    return positional[0], positional[1], opts, serve


def _mounted(mountpoint: str) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[1] == target and fields[2].startswith("fuse"):
                return True
    return False


def _start(spec: str, mountpoint: str, opts: dict[str, str]) -> int:
    if _mounted(mountpoint):
        print(f"mount.nfs: {spec} is already mounted on {mountpoint}", file=sys.stderr)
        return 32
    os.makedirs(LOG_DIR, exist_ok=True)
    log_path = os.path.join(LOG_DIR, mountpoint.strip("/").replace("/", "_") or "root") + ".log"
    optstr = ",".join(f"{k}={v}" if v else k for k, v in opts.items())
    argv = [sys.executable, os.path.abspath(__file__), spec, mountpoint, "--serve"]
    if optstr:
        argv += ["-o", optstr]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    deadline = time.monotonic() + MOUNT_WAIT
    while time.monotonic() < deadline:
        if _mounted(mountpoint):
            return 0
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-1500:]
    except OSError:
        tail = ""
    print(f"mount.nfs: mounting {spec} on {mountpoint} failed\n{tail}", file=sys.stderr)
    return 32


def _serve(spec: str, mountpoint: str, opts: dict[str, str]) -> int:
    # Only in the node image (/opt/elb-mountnfs), not in elb's environment.
    import mfusepy  # type: ignore[import-not-found]  # noqa: PLC0415
    import nfs_rs  # type: ignore[import-not-found]  # noqa: PLC0415

    server, _, export = spec.partition(":")
    url = f"nfs://{server}{export}?version=3"
    ro = "ro" in opts

    class NfsFs(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def __init__(self) -> None:
            self._clients: dict[tuple[int, int], Any] = {}
            self._lock = threading.Lock()
            self._files: dict[int, Any] = {}
            self._next_fh = 1
            # Fail now, not at the first access, if the server or export is wrong.
            self._client_for(0, 0)

        # ---- connections, one per identity
        def _client_for(self, uid: int, gid: int) -> Any:
            key = (uid, gid)
            with self._lock:
                c = self._clients.get(key)
            if c is None:
                c = nfs_rs.Client.connect(url, uid=uid, gid=gid, connect_timeout=10, operation_timeout=60)
                with self._lock:
                    self._clients[key] = c
            return c

        def _client(self) -> Any:
            uid, gid, _pid = mfusepy.fuse_get_context()
            return self._client_for(uid, gid)

        def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except mfusepy.FuseOSError:
                raise
            except Exception as e:
                raise mfusepy.FuseOSError(_errno_of(e)) from e

        @staticmethod
        def _rel(path: str) -> str:
            return path.lstrip("/") or "."

        # ---- metadata
        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            info = self._call(self._client().stat, self._rel(path))
            return _attrs(info)

        def readdir(self, path: str, fh: int) -> list[Any]:
            entries = self._call(lambda: list(self._client().scandir(self._rel(path))))
            out: list[Any] = [".", ".."]
            out += [(e.name, _attrs(e.info), 0) for e in entries]
            return out

        def statfs(self, path: str) -> dict[str, int]:
            fs = self._call(self._client().fs_stat)
            bsize = 4096
            return {
                "f_bsize": bsize,
                "f_frsize": bsize,
                "f_blocks": fs.total_bytes // bsize,
                "f_bfree": fs.free_bytes // bsize,
                "f_bavail": fs.available_bytes // bsize,
                "f_files": fs.total_files,
                "f_ffree": fs.free_files,
                "f_favail": fs.available_files,
                "f_namemax": 255,
            }

        def chmod(self, path: str, mode: int) -> int:
            self._call(self._client().chmod, self._rel(path), stat.S_IMODE(mode))
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            self._call(self._client().chown, self._rel(path), uid, gid)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            now = time.time_ns()
            if times is None:
                atime, mtime = now, now
            else:
                atime, mtime = times
            if UTIME_OMIT in (atime, mtime):
                info = self._call(self._client().stat, self._rel(path))
                atime = info.atime if atime == UTIME_OMIT else atime
                mtime = info.mtime if mtime == UTIME_OMIT else mtime
            atime = now if atime == UTIME_NOW else atime
            mtime = now if mtime == UTIME_NOW else mtime
            self._call(self._client().utime, self._rel(path), ns=(atime, mtime))
            return 0

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            self._call(self._client().truncate, self._rel(path), length)
            return 0

        # ---- namespace
        def mkdir(self, path: str, mode: int) -> int:
            self._call(self._client().mkdir, self._rel(path), mode=stat.S_IMODE(mode))
            return 0

        def rmdir(self, path: str) -> int:
            self._call(self._client().rmdir, self._rel(path))
            return 0

        def unlink(self, path: str) -> int:
            self._call(self._client().unlink, self._rel(path))
            return 0

        def rename(self, old: str, new: str) -> int:
            self._call(self._client().rename, self._rel(old), self._rel(new))
            return 0

        def symlink(self, target: str, source: str) -> int:
            # mfusepy passes (link path, link target)
            self._call(self._client().symlink, source, self._rel(target))
            return 0

        def readlink(self, path: str) -> str:
            return str(self._call(self._client().readlink, self._rel(path)))

        def link(self, target: str, source: str) -> int:
            self._call(self._client().link, self._rel(source), self._rel(target))
            return 0

        # ---- files
        def _register(self, f: Any) -> int:
            with self._lock:
                fh = self._next_fh
                self._next_fh += 1
                self._files[fh] = f
            return fh

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            c = self._client()
            self._call(c.touch, self._rel(path), exist_ok=True)
            self._call(c.chmod, self._rel(path), stat.S_IMODE(mode))
            return self._register(self._call(c.open, self._rel(path), "r+b"))

        def open(self, path: str, flags: int) -> int:
            c = self._client()
            acc = flags & os.O_ACCMODE
            if flags & os.O_TRUNC and acc != os.O_RDONLY:
                self._call(c.truncate, self._rel(path), 0)
            mode = "rb" if acc == os.O_RDONLY else "r+b"
            return self._register(self._call(c.open, self._rel(path), mode))

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            f = self._files.get(fh)
            if f is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            return bytes(self._call(f.read_at, offset, size))

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            f = self._files.get(fh)
            if f is None:
                raise mfusepy.FuseOSError(errno.EBADF)
            self._call(f.write_at, data, offset)
            return len(data)

        def release(self, path: str, fh: int) -> int:
            with self._lock:
                f = self._files.pop(fh, None)
            if f is not None:
                with contextlib.suppress(Exception):  # closing a finished file cannot be reported
                    f.close()
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            return 0

    fs = NfsFs()
    mfusepy.FUSE(
        fs,
        mountpoint,
        foreground=True,
        allow_other=True,
        fsname=spec,
        subtype="nfs",
        ro=ro,
        attr_timeout=1,
        entry_timeout=1,
    )
    return 0


_TYPE_BITS = {
    "file": stat.S_IFREG,
    "directory": stat.S_IFDIR,
    "symlink": stat.S_IFLNK,
    "block_device": stat.S_IFBLK,
    "character_device": stat.S_IFCHR,
    "fifo": stat.S_IFIFO,
    "socket": stat.S_IFSOCK,
}


def _attrs(info: Any) -> dict[str, Any]:
    kind = getattr(info.type, "value", str(info.type))
    return {
        "st_mode": _TYPE_BITS.get(kind, stat.S_IFREG) | stat.S_IMODE(info.mode),
        "st_nlink": info.nlink,
        "st_uid": info.uid,
        "st_gid": info.gid,
        "st_size": info.size,
        "st_ino": info.fileid,
        "st_blocks": (info.used + 511) // 512,
        "st_atime": info.atime,
        "st_mtime": info.mtime,
        "st_ctime": info.ctime,
    }


def _errno_of(e: BaseException) -> int:
    n = getattr(e, "errno", None)
    if isinstance(n, int) and n > 0:
        return n
    name = str(getattr(e, "code_name", "") or "").upper()
    for key, value in (
        ("NOTEMPTY", errno.ENOTEMPTY),
        ("NOENT", errno.ENOENT),
        ("EXIST", errno.EEXIST),
        ("ACCES", errno.EACCES),
        ("PERM", errno.EPERM),
        ("NOTDIR", errno.ENOTDIR),
        ("ISDIR", errno.EISDIR),
        ("NOSPC", errno.ENOSPC),
        ("ROFS", errno.EROFS),
        ("NAMETOOLONG", errno.ENAMETOOLONG),
        ("STALE", errno.ESTALE),
        ("INVAL", errno.EINVAL),
    ):
        if key in name:
            return value
    for cls, value in (
        (FileNotFoundError, errno.ENOENT),
        (FileExistsError, errno.EEXIST),
        (PermissionError, errno.EACCES),
        (IsADirectoryError, errno.EISDIR),
        (NotADirectoryError, errno.ENOTDIR),
        (TimeoutError, errno.ETIMEDOUT),
        (NotImplementedError, errno.ENOSYS),
    ):
        if isinstance(e, cls):
            return value
    return errno.EIO


def main(argv: list[str]) -> int:
    spec, mountpoint, opts, serve = _parse_args(argv)
    if serve:
        return _serve(spec, mountpoint, opts)
    return _start(spec, mountpoint, opts)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
