"""Test-only NFSv3 client for the elb test cluster's nodes: a FUSE filesystem over nfs-rs, with
real locks through the server's lock manager (NLM).

The kernel of the machine running the test cluster has no NFS client, so the node image
diverts ``/sbin/mount.nfs`` to a wrapper that runs this file. ``mount -t nfs master:/home
/home`` (and ``mount /home`` from fstab, as the nfs_client role runs it) works unchanged:
this program starts the filesystem in its own session (``setsid``) in the foreground, waits
until the mount point appears in ``/proc/self/mounts`` and returns, as mount helpers do.

Every request is made with the caller's identity: one NFS connection per (uid, gid) taken
from the FUSE context, so the server's permission checks and file ownership are those of
the user on the node. The NFS and MOUNT ports are asked of the server's rpcbind once, at the
mount, and given to every connect (``service_ports``; rpcbind is asked again only if they no
longer answer). A connection, one per identity, is opened at its first use and kept until
an operation finds it broken (a connection or RPC error, a time-out, or nfs-rs asking for a
retry, a reopen or a remount): it is dropped, the next operation opens another, and an operation
that can be sent twice without harm (reads, and writes of the same thing again) is sent again on
a new one, as a ``hard`` mount of the kernel's client retransmits: at once, then every
``RESEND_PAUSE`` seconds for as long as its connections keep breaking, up to ``HARD_FOR`` seconds
(a new node has been seen unable to reach the master for over half a minute under load: a job's
``stat`` then waits, as it would on a hard mount, instead of failing). Each broken connection,
each failure the server did not answer with an NFS error and each operation slower than
``SLOW_OP`` is written, with the time, to the mount's log
(``/var/log/elb-mountnfs/<mount point>.log``). Not for production use: no caching.

Locks are the server's, as the kernel's NFSv3 client takes them: ``fcntl``/``lockf`` byte-range
locks (FUSE's ``lock``) and ``flock`` (FUSE's ``flock``, a whole-file lock, as the kernel client
sends it) go to the master's lock manager (NLM version 4, ONC RPC over TCP, its port from the
master's rpcbind), so a lock taken on one node holds against every node. The lock owner is the
node and FUSE's lock owner (one per process for fcntl locks, one per open file for flock). A
lock that must wait (``F_SETLKW``, ``flock`` without ``LOCK_NB``) is asked for again every
``LOCK_RETRY`` seconds while the process that waits lives: the server's call back when a lock
is freed (``NLM_GRANTED``) would need a lock manager on the node, which this client does not
run. The mount option ``nolock`` keeps locks on the node, as the kernel client does.

Runs with the node's own Python (3.11) and the ``nfs-rs`` and ``mfusepy`` wheels from PyPI
installed under ``/opt/elb-mountnfs``; it does not import elb.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import itertools
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

MOUNT_WAIT = 20.0
SLOW_OP = 5.0  # seconds: an operation that takes longer is logged
SLOW_CONNECT = 1.0  # seconds: a connect that takes longer is logged
HARD_FOR = 120.0  # seconds a RESENDABLE call is sent again while its connections keep breaking
RESEND_PAUSE = 1.0  # seconds between two sends of it after the first resend
# nfs-rs calls that may be sent again on a new connection when theirs broke: they read, or
# set again what they set (``touch`` is called with exist_ok, ``read_at``/``write_at`` at offsets).
RESENDABLE = frozenset(
    {"stat", "scandir", "fs_stat", "readlink", "chmod", "chown", "utime", "truncate", "touch", "open"}
    | {"read_at", "write_at"}
)
LOCK_RETRY = 0.2  # seconds between two asks for a lock that must wait
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


def _log(message: str) -> None:
    """A line of the mount's log (the serving process's stderr), with the time."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
    sys.stderr.write(f"{stamp} mount.nfs[{os.getpid()}]: {message}\n")
    sys.stderr.flush()


def broken(err: BaseException) -> bool:
    """Whether ``err`` says the connection is no longer usable, rather than the server refusing
    the operation (nfs-rs's errors: ConnectionError, TimeoutError, an RPC error, a closed client,
    or a recovery that asks for the call again, the file reopened or the export mounted again)."""
    if isinstance(err, (ConnectionError, TimeoutError)):
        return True
    if type(err).__name__ in ("NfsRpcError", "NfsClientClosedError"):
        return True
    action = getattr(err, "recovery_action", None)
    return str(getattr(action, "value", action) or "") in ("retry", "reopen", "remount")


def describe(err: BaseException) -> str:
    """An nfs-rs error for the log: its class, NFS code and recovery, and its message."""
    extra = [
        f"{k}={getattr(v, 'value', v)}"
        for k in ("code_name", "recovery_action", "outcome")
        if (v := getattr(err, k, None)) is not None
    ]
    return f"{type(err).__name__}({', '.join(extra)}): {err}" if extra else f"{type(err).__name__}: {err}"


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


class _Handle:
    """An open file: its path and mode, to open it again on a new connection when its own broke,
    the identity it was opened with, and the file on the connection it is open on."""

    def __init__(self, path: str, mode: str, key: tuple[int, int]) -> None:
        self.path, self.mode, self.key = path, mode, key
        self.file: Any = None
        self.client: Any = None


def _close_quietly(client: Any) -> None:
    with contextlib.suppress(Exception):  # a broken connection may not close cleanly
        client.close()


class NfsOperations:
    """FUSE's operations on one NFS export, each made with the caller's identity (one connection
    per (uid, gid), opened at its first use). ``_serve`` mixes it into mfusepy's ``Operations``:
    ``fuse`` and ``nfs`` are the ``mfusepy`` and ``nfs_rs`` modules, only in the node image.
    ``locks``: the server's lock manager, if there is one (asked for its port now)."""

    use_ns = True

    def __init__(
        self, fuse: Any, nfs: Any, url: str, locks: LockManager | None, ports: Mapping[str, int] | None = None
    ) -> None:
        self._fuse = fuse
        self._nfs = nfs
        self._url = url
        self._locks = locks
        self._ports = dict(ports or {})  # nfs_port and mount_port for every connect (service_ports)
        self._clients: dict[tuple[int, int], Any] = {}
        self._lock = threading.Lock()
        self._files: dict[int, _Handle] = {}
        self._next_fh = 1
        # Fail now, not at the first access, if the server or export is wrong.
        self._client_for(0, 0)
        if locks is not None:
            locks.port()  # and if its lock manager cannot be found

    # ---- connections, one per identity
    def _client_for(self, uid: int, gid: int) -> Any:
        key = (uid, gid)
        with self._lock:
            c = self._clients.get(key)
        if c is None:
            started = time.monotonic()
            c = self._connect(uid, gid)
            took = time.monotonic() - started
            if took > SLOW_CONNECT:
                _log(f"connecting as {uid}:{gid} took {took:.1f} s")
            with self._lock:
                self._clients[key] = c
        return c

    def _connect(self, uid: int, gid: int) -> Any:
        """A new connection as (uid, gid), to the ports found at the mount; if that fails (the
        server was restarted on other ports), to those rpcbind gives now."""
        connect = functools.partial(
            self._nfs.Client.connect, self._url, uid=uid, gid=gid, connect_timeout=10, operation_timeout=60
        )
        try:
            return connect(**self._ports)
        except Exception as e:
            if not self._ports:
                raise
            _log(f"connecting as {uid}:{gid} to {self._ports} failed ({describe(e)}): asking rpcbind")
        return connect()

    def _drop(self, key: tuple[int, int], client: Any) -> None:
        """Forget a broken connection (the next operation of its identity opens another) and
        close it aside: closing waits for what it still owns."""
        with self._lock:
            if self._clients.get(key) is client:
                del self._clients[key]
        threading.Thread(target=_close_quietly, args=(client,), daemon=True).start()

    def _op(self, name: str, path: str, fn: Any) -> Any:
        """``fn(client)`` on the caller's connection (``name`` and ``path`` for the log)."""
        uid, gid, _pid = self._fuse.fuse_get_context()
        return self._run(name, path, (uid, gid), fn, None)

    def _file_op(self, name: str, fh: int, fn: Any) -> Any:
        """``fn(file)`` on an open file, opened again on a new connection if its own broke."""
        handle = self._files.get(fh)
        if handle is None:
            raise self._fuse.FuseOSError(errno.EBADF)
        return self._run(name, handle.path, handle.key, fn, handle)

    def _run(self, name: str, path: str, key: tuple[int, int], fn: Any, handle: _Handle | None) -> Any:
        """Run ``fn`` on the connection of ``key`` (or on ``handle``'s file). A broken connection
        is dropped, and a RESENDABLE call is sent again on a new one (at once, then every
        RESEND_PAUSE while ``HARD_FOR`` has not passed); every error becomes the errno FUSE returns."""
        first = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            if attempt > 2:
                time.sleep(RESEND_PAUSE)
            started = time.monotonic()
            client = None
            try:
                client = self._client_for(*key)
                if handle is not None and handle.client is not client:
                    handle.file, handle.client = client.open(self._rel(handle.path), handle.mode), client
                result = fn(client if handle is None else handle.file)
            except self._fuse.FuseOSError:
                raise
            except Exception as e:
                gone = broken(e)
                again = gone and name in RESENDABLE and (attempt == 1 or time.monotonic() - first < HARD_FOR)
                if gone or _errno_of(e) in (errno.EIO, errno.ETIMEDOUT):
                    took = time.monotonic() - started
                    what = f"{name} {path!r} as {key[0]}:{key[1]} failed after {took:.1f} s: {describe(e)}"
                    _log(what + ("; connection dropped" if gone else "") + ("; sent again" if again else ""))
                if gone and client is not None:
                    self._drop(key, client)
                if not again:
                    raise self._fuse.FuseOSError(_errno_of(e)) from e
                continue
            took = time.monotonic() - started
            if took > SLOW_OP:
                _log(f"{name} {path!r} as {key[0]}:{key[1]} took {took:.1f} s")
            return result

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._fuse.FuseOSError:
            raise
        except Exception as e:
            raise self._fuse.FuseOSError(_errno_of(e)) from e

    @staticmethod
    def _rel(path: str) -> str:
        return path.lstrip("/") or "."

    # ---- metadata
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        return _attrs(self._op("stat", path, lambda c: c.stat(self._rel(path))))

    def readdir(self, path: str, fh: int) -> list[Any]:
        entries = self._op("scandir", path, lambda c: list(c.scandir(self._rel(path))))
        out: list[Any] = [".", ".."]
        out += [(e.name, _attrs(e.info), 0) for e in entries]
        return out

    def statfs(self, path: str) -> dict[str, int]:
        fs = self._op("fs_stat", path, lambda c: c.fs_stat())
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
        self._op("chmod", path, lambda c: c.chmod(self._rel(path), stat.S_IMODE(mode)))
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        self._op("chown", path, lambda c: c.chown(self._rel(path), uid, gid))
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        now = time.time_ns()
        if times is None:
            atime, mtime = now, now
        else:
            atime, mtime = times
        if UTIME_OMIT in (atime, mtime):
            info = self._op("stat", path, lambda c: c.stat(self._rel(path)))
            atime = info.atime if atime == UTIME_OMIT else atime
            mtime = info.mtime if mtime == UTIME_OMIT else mtime
        atime = now if atime == UTIME_NOW else atime
        mtime = now if mtime == UTIME_NOW else mtime
        self._op("utime", path, lambda c: c.utime(self._rel(path), ns=(atime, mtime)))
        return 0

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        self._op("truncate", path, lambda c: c.truncate(self._rel(path), length))
        return 0

    # ---- namespace
    def mkdir(self, path: str, mode: int) -> int:
        self._op("mkdir", path, lambda c: c.mkdir(self._rel(path), mode=stat.S_IMODE(mode)))
        return 0

    def rmdir(self, path: str) -> int:
        self._op("rmdir", path, lambda c: c.rmdir(self._rel(path)))
        return 0

    def unlink(self, path: str) -> int:
        self._op("unlink", path, lambda c: c.unlink(self._rel(path)))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._op("rename", old, lambda c: c.rename(self._rel(old), self._rel(new)))
        return 0

    def symlink(self, target: str, source: str) -> int:
        # mfusepy passes (link path, link target)
        self._op("symlink", target, lambda c: c.symlink(source, self._rel(target)))
        return 0

    def readlink(self, path: str) -> str:
        return str(self._op("readlink", path, lambda c: c.readlink(self._rel(path))))

    def link(self, target: str, source: str) -> int:
        self._op("link", target, lambda c: c.link(self._rel(source), self._rel(target)))
        return 0

    # ---- files
    def _register(self, path: str, mode: str) -> int:
        """Open ``path`` on the caller's connection; its FUSE file handle."""
        uid, gid, _pid = self._fuse.fuse_get_context()
        handle = _Handle(path, mode, (uid, gid))
        self._run("open", path, handle.key, lambda f: f, handle)
        with self._lock:
            fh = self._next_fh
            self._next_fh += 1
            self._files[fh] = handle
        return fh

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        self._op("touch", path, lambda c: c.touch(self._rel(path), exist_ok=True))
        self._op("chmod", path, lambda c: c.chmod(self._rel(path), stat.S_IMODE(mode)))
        return self._register(path, "r+b")

    def open(self, path: str, flags: int) -> int:
        acc = flags & os.O_ACCMODE
        if flags & os.O_TRUNC and acc != os.O_RDONLY:
            self._op("truncate", path, lambda c: c.truncate(self._rel(path), 0))
        return self._register(path, "rb" if acc == os.O_RDONLY else "r+b")

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return bytes(self._file_op("read_at", fh, lambda f: f.read_at(offset, size)))

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._file_op("write_at", fh, lambda f: f.write_at(data, offset))
        return len(data)

    def release(self, path: str, fh: int) -> int:
        with self._lock:
            handle = self._files.pop(fh, None)
        if handle is not None and handle.file is not None:
            with contextlib.suppress(Exception):  # closing a finished file cannot be reported
                handle.file.close()
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        return 0


class LockingNfsOperations(NfsOperations):
    """NfsOperations with the server's locks (NLM); ``owner``: FUSE's lock owner (see LockingFuse).
    Without them (``nolock``) FUSE keeps the locks on this node."""

    def _fh_of(self, path: str) -> bytes:
        parent, name = os.path.split(path.rstrip("/"))
        where = parent or "/"
        for entry in self._op("scandir", where, lambda c: list(c.scandir(self._rel(where)))):
            if entry.name == name and entry.fh:
                return bytes(entry.fh)
        raise self._fuse.FuseOSError(errno.ENOLCK)

    def _nlm_lock(self, path: str, owner: int, start: int, length: int) -> bytes:
        locks = self._locks
        assert locks is not None
        offset, count = lock_range(start, length)
        who = f"{locks.caller}:{owner}".encode()
        return nlm4_lock(locks.caller, self._fh_of(path), who, owner & 0x7FFFFFFF, start=offset, length=count)

    def _take(self, path: str, owner: int, start: int, length: int, *, exclusive: bool, wait: bool) -> int:
        """Take a lock from the server; while ``wait``, ask again until it is granted or the
        process that waits is gone."""
        locks = self._locks
        assert locks is not None
        uid, gid, pid = self._fuse.fuse_get_context()
        lock = self._nlm_lock(path, owner, start, length)
        while True:
            status = self._call(locks.lock, lock, exclusive=exclusive, uid=uid, gid=gid)
            if status == NLM4_GRANTED:
                return 0
            if not wait or status not in (NLM4_DENIED, NLM4_BLOCKED, NLM4_DENIED_GRACE_PERIOD):
                raise self._fuse.FuseOSError(_NLM_ERRNO.get(status, errno.ENOLCK))
            if pid and not os.path.exists(f"/proc/{pid}"):
                raise self._fuse.FuseOSError(errno.EINTR)
            time.sleep(LOCK_RETRY)

    def _release(self, path: str, owner: int, start: int, length: int) -> int:
        locks = self._locks
        assert locks is not None
        uid, gid, _pid = self._fuse.fuse_get_context()
        status = self._call(locks.unlock, self._nlm_lock(path, owner, start, length), uid=uid, gid=gid)
        if status != NLM4_GRANTED:
            raise self._fuse.FuseOSError(_NLM_ERRNO.get(status, errno.ENOLCK))
        return 0

    def lock(self, path: str, owner: int, cmd: int, lock: Any) -> int:
        """fcntl locks (``F_GETLK``, ``F_SETLK``, ``F_SETLKW``) as the server holds them."""
        fl = lock.contents
        if cmd == fcntl.F_GETLK:
            locks = self._locks
            assert locks is not None
            uid, gid, _pid = self._fuse.fuse_get_context()
            want = self._nlm_lock(path, owner, fl.l_start, fl.l_len)
            holder = self._call(locks.test, want, exclusive=fl.l_type == fcntl.F_WRLCK, uid=uid, gid=gid)
            if holder is None:
                fl.l_type = fcntl.F_UNLCK
            else:
                excl, _svid, start, length = holder
                fl.l_type = fcntl.F_WRLCK if excl else fcntl.F_RDLCK
                fl.l_whence, fl.l_start, fl.l_len, fl.l_pid = os.SEEK_SET, start, length, 0
            return 0
        if fl.l_type == fcntl.F_UNLCK:
            return self._release(path, owner, fl.l_start, fl.l_len)
        exclusive = fl.l_type == fcntl.F_WRLCK
        return self._take(path, owner, fl.l_start, fl.l_len, exclusive=exclusive, wait=cmd == fcntl.F_SETLKW)

    def flock(self, path: str, owner: int, op: int) -> int:
        """flock(2) as a lock of the whole file, as the kernel's NFS client sends it."""
        if op & fcntl.LOCK_UN:
            return self._release(path, owner, 0, 0)
        exclusive = bool(op & fcntl.LOCK_EX)
        return self._take(path, owner, 0, 0, exclusive=exclusive, wait=not op & fcntl.LOCK_NB)


def _serve(spec: str, mountpoint: str, opts: dict[str, str]) -> int:
    # Only in the node image (/opt/elb-mountnfs), not in elb's environment.
    import mfusepy  # type: ignore[import-not-found]  # noqa: PLC0415
    import nfs_rs  # type: ignore[import-not-found]  # noqa: PLC0415

    server, _, export = spec.partition(":")
    url = f"nfs://{server}{export}?version=3"
    ro = "ro" in opts
    locks = None if "nolock" in opts else LockManager(server, os.uname().nodename)

    class NfsFs(NfsOperations, mfusepy.Operations):  # type: ignore[misc]
        pass

    class LockingNfsFs(LockingNfsOperations, mfusepy.Operations):  # type: ignore[misc]
        pass

    class LockingFuse(mfusepy.FUSE):  # type: ignore[misc]
        """mfusepy's FUSE, handing the lock operations FUSE's lock owner instead of a file handle."""

        def lock(self, path: bytes | None, fip: Any, cmd: int, lock: Any) -> int:
            owner = fip.contents.lock_owner if fip else 0
            return int(self.operations.lock(path.decode() if path else "", owner, cmd, lock))

        def flock(self, path: bytes, fip: Any, op: int) -> int:
            return int(self.operations.flock(path.decode(), fip.contents.lock_owner, op))

        def release(self, path: bytes | None, fip: Any) -> int:
            # libfuse leaves a flock of the file being closed for the last time to release().
            if path is not None and fip and fip.contents.flock_release and hasattr(self.operations, "flock"):
                try:
                    self.operations.flock(path.decode(), fip.contents.lock_owner, fcntl.LOCK_UN)
                except Exception as err:  # the close itself cannot fail for it
                    _log(f"could not release the flock of {path.decode()}: {err}")
            return int(super().release(path, fip))

    ports = service_ports(server, os.uname().nodename)
    fs = (
        NfsFs(mfusepy, nfs_rs, url, locks, ports) if locks is None else LockingNfsFs(mfusepy, nfs_rs, url, locks, ports)
    )
    how = ", ".join([f"{k} {v}" for k, v in ports.items()] + ["no locks" if locks is None else "locks from the server"])
    _log(f"serving {spec} on {mountpoint} ({how})")
    LockingFuse(
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


# --------------------------------------------------------------------------- locks: NLM v4

PMAP_PROG, PMAP_VERS, PMAP_GETPORT = 100000, 2, 3
NLM_PROG, NLM_VERS = 100021, 4
NFS_PROG, MOUNT_PROG = 100003, 100005  # both version 3
NLM4_TEST, NLM4_LOCK, NLM4_UNLOCK = 1, 2, 4
NLM4_GRANTED, NLM4_DENIED, NLM4_DENIED_NOLOCKS, NLM4_BLOCKED, NLM4_DENIED_GRACE_PERIOD = 0, 1, 2, 3, 4
NLM4_DEADLCK, NLM4_ROFS, NLM4_STALE_FH, NLM4_FBIG, NLM4_FAILED = 5, 6, 7, 8, 9
_NLM_ERRNO = {
    NLM4_DENIED: errno.EAGAIN,
    NLM4_DENIED_NOLOCKS: errno.ENOLCK,
    NLM4_BLOCKED: errno.EAGAIN,
    NLM4_DENIED_GRACE_PERIOD: errno.EAGAIN,
    NLM4_DEADLCK: errno.EDEADLK,
    NLM4_ROFS: errno.EROFS,
    NLM4_STALE_FH: errno.ESTALE,
    NLM4_FBIG: errno.EFBIG,
    NLM4_FAILED: errno.ENOLCK,
}
AUTH_NONE, AUTH_UNIX = 0, 1
IPPROTO_TCP = 6
RPC_TIMEOUT = 10.0
RPCBIND_PORT = 111
Proc = tuple[int, int, int]  # an RPC procedure: program, version, number


class RpcError(OSError):
    """An ONC RPC call that got no usable answer."""


def _u32(n: int) -> bytes:
    return struct.pack(">I", n & 0xFFFFFFFF)


def _u64(n: int) -> bytes:
    return struct.pack(">Q", n & 0xFFFFFFFFFFFFFFFF)


def _opaque(data: bytes) -> bytes:
    return _u32(len(data)) + data + b"\0" * (-len(data) % 4)


def _string(text: str) -> bytes:
    return _opaque(text.encode())


def auth_unix(machine: str, uid: int, gid: int) -> bytes:
    """AUTH_UNIX credentials (RFC 5531): the caller's uid and gid, no other groups."""
    return _u32(AUTH_UNIX) + _opaque(_u32(0) + _string(machine) + _u32(uid) + _u32(gid) + _u32(0))


def rpc_call(xid: int, proc: Proc, cred: bytes, args: bytes) -> bytes:
    """One RPC call message (RFC 5531) of ``proc`` (program, version, procedure), without TCP's
    record mark."""
    prog, vers, number = proc
    head = _u32(xid) + _u32(0) + _u32(2) + _u32(prog) + _u32(vers) + _u32(number)
    return head + cred + _u32(AUTH_NONE) + _u32(0) + args


def rpc_result(reply: bytes, xid: int) -> bytes:
    """The results of an accepted, successful reply to call ``xid``; RpcError otherwise."""
    try:
        rxid, mtype, stat_ = struct.unpack_from(">III", reply, 0)
        if rxid != xid or mtype != 1:
            raise RpcError(errno.EPROTO, f"RPC reply {rxid} ({mtype}) to call {xid}")
        if stat_ != 0:
            raise RpcError(errno.EACCES, "RPC call denied")
        _flavor, vlen = struct.unpack_from(">II", reply, 12)
        at = 20 + vlen + (-vlen % 4)
        (accept,) = struct.unpack_from(">I", reply, at)
    except struct.error as err:
        raise RpcError(errno.EPROTO, f"short RPC reply: {err}") from None
    if accept != 0:
        raise RpcError(errno.EPROTO, f"RPC call not accepted (accept_stat {accept})")
    return reply[at + 4 :]


def nlm4_lock(caller: str, fh: bytes, owner: bytes, svid: int, *, start: int, length: int) -> bytes:
    """An ``nlm4_lock``: who holds what (``length`` 0: to the end of the file)."""
    return _string(caller) + _opaque(fh) + _opaque(owner) + _u32(svid) + _u64(start) + _u64(length)


def nlm4_stat(result: bytes) -> int:
    """The ``nlm4_stats`` of an ``nlm4_res`` or ``nlm4_testres`` (after its cookie)."""
    try:
        (clen,) = struct.unpack_from(">I", result, 0)
        (status,) = struct.unpack_from(">I", result, 4 + clen + (-clen % 4))
    except struct.error as err:
        raise RpcError(errno.EPROTO, f"short NLM reply: {err}") from None
    return int(status)


def nlm4_holder(result: bytes) -> tuple[bool, int, int, int]:
    """(exclusive, svid, start, length) of the holder an ``nlm4_testres`` DENIED names."""
    (clen,) = struct.unpack_from(">I", result, 0)
    at = 4 + clen + (-clen % 4) + 4
    exclusive, svid, olen = struct.unpack_from(">III", result, at)
    at += 12 + olen + (-olen % 4)
    start, length = struct.unpack_from(">QQ", result, at)
    return bool(exclusive), svid, start, length


def _recv_record(sock: socket.socket) -> bytes:
    """One RPC record from a TCP stream (its fragments joined)."""
    out = b""
    while True:
        (mark,) = struct.unpack(">I", _recv_exact(sock, 4))
        out += _recv_exact(sock, mark & 0x7FFFFFFF)
        if mark & 0x80000000:
            return out


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RpcError(errno.ECONNRESET, "the server closed the connection")
        data += chunk
    return data


class LockManager:
    """The server's NLM v4, called over TCP (a connection per call). ``caller``: this node's name."""

    def __init__(self, server: str, caller: str) -> None:
        self.server = server
        self.caller = caller
        self._xids = itertools.count(int.from_bytes(os.urandom(3), "big") << 8)
        self._port: int | None = None
        self._lock = threading.Lock()

    def _call(self, port: int, proc: Proc, args: bytes, *, uid: int = 0, gid: int = 0) -> bytes:
        with self._lock:
            xid = next(self._xids) & 0xFFFFFFFF
        message = rpc_call(xid, proc, auth_unix(self.caller, uid, gid), args)
        try:
            with socket.create_connection((self.server, port), timeout=RPC_TIMEOUT) as sock:
                sock.sendall(_u32(0x80000000 | len(message)) + message)
                return rpc_result(_recv_record(sock), xid)
        except OSError as err:
            if isinstance(err, RpcError):
                raise
            raise RpcError(err.errno or errno.EIO, f"NLM at {self.server}:{port}: {err}") from None

    def getport(self, prog: int, vers: int) -> int:
        """The TCP port of RPC program ``prog`` version ``vers`` on the server, from its rpcbind
        (0: not registered)."""
        args = _u32(prog) + _u32(vers) + _u32(IPPROTO_TCP) + _u32(0)
        (port,) = struct.unpack(">I", self._call(RPCBIND_PORT, (PMAP_PROG, PMAP_VERS, PMAP_GETPORT), args)[:4])
        return int(port)

    def port(self) -> int:
        """The lock manager's TCP port, from the server's rpcbind."""
        if self._port is None:
            port = self.getport(NLM_PROG, NLM_VERS)
            if port == 0:
                raise RpcError(errno.ENOLCK, f"{self.server} runs no NLM v4 lock manager (rpcbind)")
            self._port = port
        return self._port

    def lock(self, lock: bytes, *, exclusive: bool, uid: int, gid: int) -> int:
        """NLM4_LOCK without waiting (the caller asks again); its ``nlm4_stats``."""
        args = _opaque(b"elb") + _u32(0) + _u32(int(exclusive)) + lock + _u32(0) + _u32(0)
        return nlm4_stat(self._call(self.port(), (NLM_PROG, NLM_VERS, NLM4_LOCK), args, uid=uid, gid=gid))

    def unlock(self, lock: bytes, *, uid: int, gid: int) -> int:
        args = _opaque(b"elb") + lock
        return nlm4_stat(self._call(self.port(), (NLM_PROG, NLM_VERS, NLM4_UNLOCK), args, uid=uid, gid=gid))

    def test(self, lock: bytes, *, exclusive: bool, uid: int, gid: int) -> tuple[bool, int, int, int] | None:
        """NLM4_TEST: the conflicting holder (exclusive, svid, start, length), or None."""
        args = _opaque(b"elb") + _u32(int(exclusive)) + lock
        result = self._call(self.port(), (NLM_PROG, NLM_VERS, NLM4_TEST), args, uid=uid, gid=gid)
        status = nlm4_stat(result)
        if status == NLM4_GRANTED:
            return None
        if status != NLM4_DENIED:
            raise RpcError(_NLM_ERRNO.get(status, errno.ENOLCK), f"NLM4_TEST: status {status}")
        return nlm4_holder(result)


def service_ports(server: str, caller: str) -> dict[str, int]:
    """The server's NFS and MOUNT (v3, TCP) ports, from its rpcbind, as nfs-rs's ``connect``
    takes them: asked once at the mount, so the connections of each identity made later do not
    each ask rpcbind again (an rpcbind that does not answer for a while then fails only the mount).
    Empty when rpcbind cannot say: nfs-rs then asks at each connect."""
    rpcbind = LockManager(server, caller)
    try:
        ports = {"nfs_port": rpcbind.getport(NFS_PROG, 3), "mount_port": rpcbind.getport(MOUNT_PROG, 3)}
    except (RpcError, struct.error) as err:
        _log(f"rpcbind at {server} did not give the NFS and MOUNT ports ({err}): asked at each connect")
        return {}
    return ports if all(ports.values()) else {}


def lock_range(start: int, length: int) -> tuple[int, int]:
    """A POSIX range (``l_start``, ``l_len``; length 0: to the end, negative: before start) as
    NLM's (offset, length)."""
    if length < 0:
        start, length = start + length, -length
    return max(start, 0), length


def main(argv: list[str]) -> int:
    spec, mountpoint, opts, serve = _parse_args(argv)
    if serve:
        return _serve(spec, mountpoint, opts)
    return _start(spec, mountpoint, opts)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
