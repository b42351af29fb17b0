"""The test NFS client's lock requests (``elbdev.testcluster.mount_nfs``): ONC RPC and NLM v4 in XDR,
byte for byte as RFC 5531 and the NLM v4 protocol lay them out, and a lock manager answered over
a real TCP connection (a stand-in server on 127.0.0.1 that keeps one lock table, as a server's
lock manager does). The cluster test (tests/cluster/test_nfs_locks.py) takes the locks through
nfs-ganesha's lock manager."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from elbdev.testcluster import mount_nfs as m
from tests.ports import closed_port


def test_an_rpc_call_is_laid_out_as_rfc_5531_says() -> None:
    cred = m.auth_unix("node001", 2000, 2000)
    # flavor 1, body: stamp 0, machine "node001" (7 bytes + 1 pad), uid, gid, no other gids
    assert cred == struct.pack(">II", 1, 28) + struct.pack(">I", 0) + struct.pack(">I", 7) + b"node001\0" + (
        struct.pack(">III", 2000, 2000, 0)
    )
    call = m.rpc_call(7, (100021, 4, 2), cred, b"ARGS")
    assert call[:24] == struct.pack(">IIIIII", 7, 0, 2, 100021, 4, 2)
    assert call[24 : 24 + len(cred)] == cred
    assert call[24 + len(cred) :] == struct.pack(">II", 0, 0) + b"ARGS"  # AUTH_NONE verifier


def reply(xid: int, results: bytes, *, accept: int = 0, reply_stat: int = 0) -> bytes:
    return struct.pack(">IIIIII", xid, 1, reply_stat, 0, 0, accept) + results


def test_a_reply_gives_its_results_or_says_why_not() -> None:
    assert m.rpc_result(reply(9, b"RES"), 9) == b"RES"
    for bad, why in (
        (reply(8, b""), "to call 9"),
        (reply(9, b"", reply_stat=1), "denied"),
        (reply(9, b"", accept=1), "not accepted"),
        (b"\0\0", "short"),
    ):
        with pytest.raises(m.RpcError, match=why):
            m.rpc_result(bad, 9)


def test_an_nlm4_lock_and_its_answers() -> None:
    lock = m.nlm4_lock("node1", b"\x01\x02\x03", b"node1:5", 5, start=10, length=0)
    assert lock == (
        struct.pack(">I", 5) + b"node1\0\0\0"  # caller_name, padded to 4
        + struct.pack(">I", 3) + b"\x01\x02\x03\0"  # fh
        + struct.pack(">I", 7) + b"node1:5\0"  # oh
        + struct.pack(">IQQ", 5, 10, 0)  # svid, l_offset, l_len
    )  # fmt: skip
    cookie = struct.pack(">I", 3) + b"elb\0"
    assert m.nlm4_stat(cookie + struct.pack(">I", m.NLM4_DENIED)) == m.NLM4_DENIED
    holder = struct.pack(">III", 1, 42, 0) + struct.pack(">QQ", 100, 50)
    assert m.nlm4_holder(cookie + struct.pack(">I", m.NLM4_DENIED) + holder) == (True, 42, 100, 50)


@pytest.mark.parametrize(
    ("start", "length", "nlm"), [(0, 0, (0, 0)), (10, 5, (10, 5)), (10, -4, (6, 4)), (2, -5, (0, 5))]
)
def test_posix_ranges_become_nlm_ranges(start: int, length: int, nlm: tuple[int, int]) -> None:
    assert m.lock_range(start, length) == nlm


class StandIn:
    """rpcbind (GETPORT) and an NLM v4 lock manager of whole-file exclusive locks on 127.0.0.1."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.held: dict[bytes, bytes] = {}  # fh -> owner
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                call = m._recv_record(conn)
                conn.sendall(self._answer(call))

    def _answer(self, call: bytes) -> bytes:
        xid, _, _, prog, _vers, proc = struct.unpack_from(">IIIIII", call)
        (clen,) = struct.unpack_from(">I", call, 28)
        at = 32 + clen + 8  # the credentials' body, then the verifier
        if prog == m.PMAP_PROG:
            body = struct.pack(">I", self.port)
        else:
            args = call[at:]
            cookie, rest = self._opaque(args)
            if proc in (m.NLM4_LOCK, m.NLM4_TEST):
                rest = rest[8:] if proc == m.NLM4_LOCK else rest[4:]  # block, exclusive / exclusive
            _caller, rest = self._opaque(rest)
            fh, rest = self._opaque(rest)
            owner, rest = self._opaque(rest)
            status = m.NLM4_GRANTED
            if proc == m.NLM4_UNLOCK:
                if self.held.get(fh) == owner:
                    del self.held[fh]
            elif self.held.get(fh, owner) != owner:
                status = m.NLM4_DENIED
            elif proc == m.NLM4_LOCK:
                self.held[fh] = owner
            body = m._opaque(cookie) + struct.pack(">I", status)
            if proc == m.NLM4_TEST and status == m.NLM4_DENIED:
                body += struct.pack(">III", 1, 1, 0) + struct.pack(">QQ", 0, 0)
        message = reply(xid, body)
        return struct.pack(">I", 0x80000000 | len(message)) + message

    @staticmethod
    def _opaque(data: bytes) -> tuple[bytes, bytes]:
        (n,) = struct.unpack_from(">I", data)
        return data[4 : 4 + n], data[4 + n + (-n % 4) :]


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    yield s
    s.server.close()


def test_two_nodes_contend_for_one_lock(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "RPCBIND_PORT", stand_in.port)
    a, b = m.LockManager("127.0.0.1", "nodea"), m.LockManager("127.0.0.1", "nodeb")
    assert a.port() == stand_in.port
    la = m.nlm4_lock("nodea", b"FH", b"nodea:1", 1, start=0, length=0)
    lb = m.nlm4_lock("nodeb", b"FH", b"nodeb:1", 1, start=0, length=0)
    assert a.lock(la, exclusive=True, uid=2000, gid=2000) == m.NLM4_GRANTED
    assert b.lock(lb, exclusive=True, uid=2000, gid=2000) == m.NLM4_DENIED
    assert b.test(lb, exclusive=True, uid=2000, gid=2000) == (True, 1, 0, 0)
    assert a.unlock(la, uid=2000, gid=2000) == m.NLM4_GRANTED
    assert b.lock(lb, exclusive=True, uid=2000, gid=2000) == m.NLM4_GRANTED


def test_the_nfs_and_mount_ports_come_from_rpcbind_once(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "RPCBIND_PORT", stand_in.port)
    assert m.service_ports("127.0.0.1", "nodea") == {"nfs_port": stand_in.port, "mount_port": stand_in.port}


def test_without_rpcbind_each_connect_asks_for_the_ports(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(m, "RPCBIND_PORT", closed_port())
    assert m.service_ports("127.0.0.1", "nodea") == {}
    assert "did not give the NFS and MOUNT ports" in capsys.readouterr().err


def test_a_server_without_a_lock_manager_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = int(closed.getsockname()[1])
    monkeypatch.setattr(m, "RPCBIND_PORT", port)
    with pytest.raises(m.RpcError, match=r"NLM at 127\.0\.0\.1"):
        m.LockManager("127.0.0.1", "nodea").port()
