"""The test NFS client's FUSE side (``elbdev.testcluster.mount_nfs``) without FUSE or a server:
its command line, the attributes and errors it hands FUSE, and its operations
(``NfsOperations``, ``LockingNfsOperations``) on stand-ins for the ``mfusepy`` and ``nfs_rs``
modules (only in the node image) and for the server's lock manager. The cluster tests mount the
real export through it."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
from enum import Enum
from types import SimpleNamespace
from typing import Any

import pytest

from elbdev.testcluster import mount_nfs as m

CALLER = (1000, 1000, os.getpid())  # uid, gid, pid of the process FUSE serves


class FuseOSError(OSError):
    def __init__(self, code: int) -> None:
        super().__init__(code, os.strerror(code))


class Kind(Enum):
    DIRECTORY = "directory"
    FILE = "file"


def info(**changes: Any) -> SimpleNamespace:
    base = dict(type=Kind.FILE, mode=0o100644, nlink=1, uid=1000, gid=1000, size=5, fileid=42, used=513)
    return SimpleNamespace(**(base | {"atime": 1, "mtime": 2, "ctime": 3} | changes))


class File:
    def __init__(self, data: bytes, client: Client | None = None) -> None:
        self.data = data
        self.client = client

    def read_at(self, offset: int, size: int) -> bytes:
        if self.client is not None:
            self.client.fail_next("read_at")
        return self.data[offset : offset + size]

    def write_at(self, data: bytes, offset: int) -> None:
        if self.client is not None:
            self.client.fail_next("write_at")
        self.data = self.data[:offset] + data + self.data[offset + len(data) :]

    def close(self) -> None:
        pass


class Client:
    """One connection: records what it was asked; ``missing`` paths raise FileNotFoundError."""

    def __init__(self, who: tuple[int, int], calls: list[tuple[Any, ...]]) -> None:
        self.who, self.calls = who, calls
        self.missing: set[str] = set()
        self.failing: dict[str, Exception] = {}  # call -> what it raises (from now on: broken)
        self.closed = False

    def fail_next(self, call: str) -> None:
        if call in self.failing:
            raise self.failing[call]

    def _do(self, *call: object) -> None:
        self.calls.append((self.who, *call))
        self.fail_next(str(call[0]))
        if call[1] in self.missing:
            raise FileNotFoundError(call[1])

    def mkdir(self, path: str, mode: int) -> None:
        self._do("mkdir", path)

    def close(self) -> None:
        self.closed = True

    def stat(self, path: str) -> SimpleNamespace:
        self._do("stat", path)
        return info()

    def scandir(self, path: str) -> list[SimpleNamespace]:
        self._do("scandir", path)
        return [SimpleNamespace(name="lockfile", info=info(), fh=b"\x0f\x0e")]

    def utime(self, path: str, *, ns: tuple[int, int]) -> None:
        self._do("utime", path, ns)

    def truncate(self, path: str, length: int) -> None:
        self._do("truncate", path, length)

    def open(self, path: str, mode: str) -> File:
        self._do("open", path, mode)
        return File(b"hello", self)


class Nfs:
    """Stands in for the ``nfs_rs`` module: ``Client.connect`` one client per identity."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.connected: list[tuple[str, int, int]] = []
        self.clients: list[Client] = []
        self.ports: dict[str, int] = {}
        self.refused: dict[str, int] = {}  # connects to these ports fail
        self.broken_clients = 0  # how many of the next connections break at their first stat
        self.Client = SimpleNamespace(connect=self.connect)

    def connect(
        self, url: str, *, uid: int, gid: int, connect_timeout: int, operation_timeout: int, **ports: int
    ) -> Client:
        self.connected.append((url, uid, gid))
        self.ports = ports
        if ports and ports == self.refused:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "nothing listens there now")
        self.clients.append(Client((uid, gid), self.calls))
        if self.broken_clients:
            self.broken_clients -= 1
            self.clients[-1].failing["stat"] = TimeoutError("no reply")
        return self.clients[-1]


FUSE = SimpleNamespace(FuseOSError=FuseOSError, fuse_get_context=lambda: CALLER)
URL = "nfs://master/home?version=3"


def test_the_command_line_of_a_mount_helper() -> None:
    spec, where, opts, serve = m._parse_args(["master:/home", "/home", "-v", "-o", "rw,hard,,timeo=600"])
    assert (spec, where, opts, serve) == ("master:/home", "/home", {"rw": "", "hard": "", "timeo": "600"}, False)
    assert m._parse_args(["master:/home", "/home", "--serve"])[3] is True
    for bad in (["/home", "/mnt"], ["master:/home"], ["master:/home", "/home", "/other"]):
        with pytest.raises(SystemExit, match=r"usage: mount\.nfs"):
            m._parse_args(bad)


def test_attributes_as_fuse_wants_them() -> None:
    attrs = m._attrs(info(type=Kind.DIRECTORY, mode=0o40755))
    assert attrs["st_mode"] == stat.S_IFDIR | 0o755 and attrs["st_blocks"] == 2 and attrs["st_ino"] == 42
    assert m._attrs(info(type="socket"))["st_mode"] == stat.S_IFSOCK | 0o644  # a plain string names it too
    assert m._attrs(info(type="whiteout"))["st_mode"] == stat.S_IFREG | 0o644  # unknown: a file


def test_errors_become_the_errno_fuse_returns() -> None:
    assert m._errno_of(OSError(errno.ENOSPC, "full")) == errno.ENOSPC
    assert m._errno_of(RuntimeError()) == errno.EIO
    for name, code in (("NFS3ERR_NOTEMPTY", errno.ENOTEMPTY), ("NFS3ERR_NOTDIR", errno.ENOTDIR)):
        err = RuntimeError(name)
        err.code_name = name  # type: ignore[attr-defined]  # as nfs-rs's errors carry it
        assert m._errno_of(err) == code
    assert m._errno_of(FileExistsError()) == errno.EEXIST and m._errno_of(TimeoutError()) == errno.ETIMEDOUT


def test_operations_connect_once_per_identity_and_map_errors() -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    assert nfs.connected == [(URL, 0, 0)]  # at once: a wrong server or export fails the mount
    assert ops.getattr("/a/b")["st_size"] == 5
    ops.getattr("/")
    assert nfs.connected == [(URL, 0, 0), (URL, 1000, 1000)]
    assert nfs.calls == [((1000, 1000), "stat", "a/b"), ((1000, 1000), "stat", ".")]
    ops._client_for(*CALLER[:2]).missing.add("gone")
    with pytest.raises(FuseOSError) as err:
        ops.getattr("/gone")
    assert err.value.errno == errno.ENOENT


def test_utimens_keeps_what_is_omitted_and_stamps_what_is_now() -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    ops.utimens("/f", (m.UTIME_OMIT, 7))
    assert nfs.calls == [((1000, 1000), "stat", "f"), ((1000, 1000), "utime", "f", (1, 7))]
    nfs.calls.clear()
    ops.utimens("/f", (5, m.UTIME_NOW))
    ((_, what, _, (atime, mtime)),) = nfs.calls
    assert what == "utime" and atime == 5 and mtime not in (m.UTIME_NOW, m.UTIME_OMIT)


def test_open_truncates_only_for_writing_and_handles_are_its_own() -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    fh = ops.open("/f", os.O_RDONLY | os.O_TRUNC)
    assert [c[1:] for c in nfs.calls] == [("open", "f", "rb")]
    assert ops.read("/f", 3, 1, fh) == b"ell"
    nfs.calls.clear()
    other = ops.open("/f", os.O_WRONLY | os.O_TRUNC)
    assert [c[1:] for c in nfs.calls] == [("truncate", "f", 0), ("open", "f", "r+b")] and other != fh
    assert ops.write("/f", b"J", 0, other) == 1 and ops.read("/f", 5, 0, other) == b"Jello"
    assert ops.release("/f", other) == 0
    with pytest.raises(FuseOSError) as err:
        ops.read("/f", 1, 0, other)
    assert err.value.errno == errno.EBADF


class NfsRpcError(RuntimeError):
    """Named as nfs-rs's: an RPC that got no answer."""


class Recovery(RuntimeError):
    """An nfs-rs error that asks for a recovery (``recovery_action``, an enum in nfs-rs)."""

    def __init__(self, action: str) -> None:
        super().__init__(f"needs {action}")
        self.recovery_action = SimpleNamespace(value=action)


@pytest.mark.parametrize(
    ("err", "gone"),
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (NfsRpcError("portmapper lookup failed"), True),
        (Recovery("remount"), True),
        (Recovery("reopen"), True),
        (Recovery("retry"), True),
        (FileNotFoundError(), False),
        (PermissionError(), False),
    ],
)
def test_a_broken_connection_is_told_from_a_refusal(err: Exception, gone: bool) -> None:
    assert m.broken(err) is gone


def test_a_broken_connection_is_dropped_and_a_read_sent_again_on_a_new_one(capsys: pytest.CaptureFixture[str]) -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    ops.getattr("/a")
    first = nfs.clients[-1]
    first.failing["stat"] = ConnectionResetError(errno.ECONNRESET, "reset by peer")
    assert ops.getattr("/a")["st_size"] == 5  # answered on a new connection
    assert nfs.connected[1:] == [(URL, 1000, 1000), (URL, 1000, 1000)] and nfs.clients[-1] is not first
    log = capsys.readouterr().err
    assert "stat '/a' as 1000:1000 failed after" in log and "connection dropped; sent again" in log
    ops.getattr("/a")
    assert len(nfs.connected) == 3  # the new connection is kept


def test_a_read_is_sent_again_while_its_connections_keep_breaking_as_on_a_hard_mount(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(m, "RESEND_PAUSE", 0.0)
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    before = len(nfs.clients)
    nfs.broken_clients = 4  # the node cannot reach the server for a while
    assert ops.getattr("/a")["st_size"] == 5  # answered by the fifth connection
    made = nfs.clients[before:]
    assert len(made) == 5 and all(c.closed for c in made[:4]) and not made[4].closed
    assert capsys.readouterr().err.count("connection dropped; sent again") == 4


def test_a_hard_mounts_resends_end_after_hard_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "RESEND_PAUSE", 0.0)
    monkeypatch.setattr(m, "HARD_FOR", 0.0)  # only the first resend, which is always made
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    before = len(nfs.clients)
    nfs.broken_clients = 10
    with pytest.raises(FuseOSError) as err:
        ops.getattr("/a")
    assert err.value.errno == errno.ETIMEDOUT and len(nfs.clients) - before == 2


def test_a_call_that_must_not_be_sent_twice_fails_and_the_next_gets_a_new_connection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    ops.getattr("/")
    nfs.clients[-1].failing["mkdir"] = NfsRpcError("no answer")
    with pytest.raises(FuseOSError) as err:
        ops.mkdir("/d", 0o755)
    assert err.value.errno == errno.EIO and [c[1] for c in nfs.calls].count("mkdir") == 1
    assert "connection dropped" in capsys.readouterr().err
    ops.mkdir("/d", 0o755)
    assert len(nfs.connected) == 3


def test_an_open_file_whose_connection_broke_is_opened_again_and_the_write_sent_again() -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    fh = ops.open("/f", os.O_WRONLY)
    nfs.clients[-1].failing["write_at"] = TimeoutError("no reply")
    assert ops.write("/f", b"J", 0, fh) == 1
    assert [c[1:] for c in nfs.calls] == [("open", "f", "r+b"), ("open", "f", "r+b")]
    assert nfs.clients[1] is not nfs.clients[2] and ops.read("/f", 5, 0, fh) == b"Jello"


def test_the_ports_found_at_the_mount_are_given_to_every_connect() -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None, {"nfs_port": 2049, "mount_port": 20048})
    assert nfs.ports == {"nfs_port": 2049, "mount_port": 20048}
    nfs.ports = {}
    ops.getattr("/a")  # the caller's own connection, made now
    assert len(nfs.connected) == 2 and nfs.ports == {"nfs_port": 2049, "mount_port": 20048}


def test_ports_that_no_longer_answer_give_way_to_rpcbinds(capsys: pytest.CaptureFixture[str]) -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None, {"nfs_port": 2049, "mount_port": 20048})
    nfs.refused = {"nfs_port": 2049, "mount_port": 20048}  # the server came back on other ports
    assert ops.getattr("/a")["st_size"] == 5
    assert nfs.connected[1:] == [(URL, 1000, 1000), (URL, 1000, 1000)] and nfs.ports == {}
    assert "asking rpcbind" in capsys.readouterr().err


def test_a_refusal_keeps_the_connection_and_is_not_logged(capsys: pytest.CaptureFixture[str]) -> None:
    nfs = Nfs()
    ops = m.NfsOperations(FUSE, nfs, URL, None)
    ops._client_for(*CALLER[:2]).missing.add("gone")
    for _ in range(2):
        with pytest.raises(FuseOSError):
            ops.getattr("/gone")
    assert len(nfs.connected) == 2 and capsys.readouterr().err == ""


class Locks:
    """Stands in for the server's lock manager: answers each ask with the next of ``answers``."""

    caller = "node001"

    def __init__(self, *answers: int) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, bytes, dict[str, object]]] = []
        self.holder: tuple[bool, int, int, int] | None = None

    def port(self) -> int:
        return 4045

    def lock(self, lock: bytes, **kw: object) -> int:
        self.asked.append(("lock", lock, kw))
        return self.answers.pop(0)

    def unlock(self, lock: bytes, **kw: object) -> int:
        self.asked.append(("unlock", lock, kw))
        return m.NLM4_GRANTED

    def test(self, lock: bytes, **kw: object) -> tuple[bool, int, int, int] | None:
        self.asked.append(("test", lock, kw))
        return self.holder


def locking(locks: Locks) -> m.LockingNfsOperations:
    return m.LockingNfsOperations(FUSE, Nfs(), URL, locks)  # type: ignore[arg-type]


def test_flock_asks_the_servers_lock_manager_for_the_whole_file() -> None:
    locks = Locks(m.NLM4_DENIED, m.NLM4_GRANTED)
    ops = locking(locks)
    assert ops.flock("/dir/lockfile", 77, fcntl.LOCK_EX) == 0  # waits: asks again after a denial
    whole = m.nlm4_lock("node001", b"\x0f\x0e", b"node001:77", 77, start=0, length=0)
    assert locks.asked == [("lock", whole, {"exclusive": True, "uid": 1000, "gid": 1000})] * 2
    locks.answers = [m.NLM4_DENIED]
    with pytest.raises(FuseOSError) as err:
        ops.flock("/dir/lockfile", 77, fcntl.LOCK_SH | fcntl.LOCK_NB)
    assert err.value.errno == errno.EAGAIN
    assert ops.flock("/dir/lockfile", 77, fcntl.LOCK_UN) == 0 and locks.asked[-1][0] == "unlock"
    with pytest.raises(FuseOSError) as err:
        ops.flock("/dir/nofile", 77, fcntl.LOCK_EX)  # the server has no handle for it
    assert err.value.errno == errno.ENOLCK


class Flock(ctypes.Structure):
    _fields_ = [
        ("l_type", ctypes.c_short),
        ("l_whence", ctypes.c_short),
        ("l_start", ctypes.c_longlong),
        ("l_len", ctypes.c_longlong),
        ("l_pid", ctypes.c_int),
    ]


def test_f_getlk_reports_the_servers_holder() -> None:
    locks = Locks()
    ops = locking(locks)
    fl = Flock(l_type=fcntl.F_WRLCK, l_start=10, l_len=5)
    assert ops.lock("/dir/lockfile", 3, fcntl.F_GETLK, ctypes.pointer(fl)) == 0
    assert fl.l_type == fcntl.F_UNLCK  # no one holds it
    locks.holder = (False, 9, 0, 100)
    fl = Flock(l_type=fcntl.F_WRLCK, l_start=10, l_len=5)
    ops.lock("/dir/lockfile", 3, fcntl.F_GETLK, ctypes.pointer(fl))
    assert (fl.l_type, fl.l_whence, fl.l_start, fl.l_len, fl.l_pid) == (fcntl.F_RDLCK, os.SEEK_SET, 0, 100, 0)
    assert [a[0] for a in locks.asked] == ["test", "test"] and locks.asked[0][2]["exclusive"] is True
