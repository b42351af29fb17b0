"""closed_port: a port a connection is refused on, never one it can take as its own."""

from __future__ import annotations

import socket

import pytest

from tests.ports import closed_port, ephemeral_range


def test_a_closed_port_is_below_the_ephemeral_range() -> None:
    lo, _ = ephemeral_range()
    for _ in range(50):
        assert closed_port() < lo


def test_a_connection_to_a_closed_port_is_refused() -> None:
    port = closed_port()
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))
