"""Local TCP ports for the tests: a free one for a listener of their own, a closed one that
nothing answers on."""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default if unreadable)."""
    try:
        lo, hi = (int(x) for x in PORT_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return lo, hi


def free_port() -> int:
    """A free local TCP port (bound then released) for a listener the test starts next."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A local TCP port nothing listens on, below the range of ephemeral ports.

    A free port from that range (what binding port 0 gives) does not stay closed: any process
    that binds port 0 for a listener (another test's server, the cluster tests beside these) may
    get it next, and a connection from 127.0.0.1 may get it as its own local port and connect to
    itself; either answers, and the connection then fails with a broken pipe instead of being
    refused. A port below the range is given to neither; only a listener bound to it by number
    takes it.
    """
    lo, _ = ephemeral_range()
    low = max(1024, lo - 10000)
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(low, max(lo, low + 1))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free local port in {low}-{lo - 1}")
