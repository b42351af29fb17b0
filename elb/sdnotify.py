"""systemd's notification protocol (sd_notify(3)): readiness, watchdog keep-alives, status.

Under ``Type=notify`` systemd passes ``NOTIFY_SOCKET``, a datagram socket (a path, or an
abstract name starting with ``@``); each message is a few ``KEY=value`` lines. Without the
variable (not under systemd, or another service type) every call does nothing.

The protocol is one ``sendto`` of a short datagram, so it is written here rather than taken
from a library: the packages that wrap it (``sdnotify``, ``systemd-python``) add a
dependency, or a C extension that needs libsystemd's headers, for these few lines.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger("elb.sdnotify")


class Notifier:
    """Sends notifications to systemd when it asked for them; a no-op otherwise."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        self._address: str | bytes | None = None
        if address.startswith("@"):
            self._address = b"\0" + address[1:].encode()
        elif address.startswith("/"):
            self._address = address
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        watchdog_for_us = usec.isdigit() and (not pid or pid == str(os.getpid()))
        self.watchdog_interval: float | None = int(usec) / 1e6 if watchdog_for_us and int(usec) > 0 else None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines (keys upper-cased); True if a datagram was sent."""
        if self._address is None:
            return False
        message = "\n".join(f"{k.upper()}={v}" for k, v in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(message, self._address)
        except OSError as err:  # systemd gone, or the socket is not ours: never fatal
            log.debug("sd_notify failed: %s", err)
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send(ready=1, status=status)

    def alive(self, status: str | None = None) -> bool:
        """A watchdog keep-alive, with an optional status line for ``systemctl status``."""
        if status is None:
            return self.send(watchdog=1)
        return self.send(watchdog=1, status=status)

    def set_watchdog(self, seconds: float) -> bool:
        """Ask systemd to expect a keep-alive at least every ``seconds`` (``WATCHDOG_USEC``)."""
        ok = self.send(watchdog_usec=int(seconds * 1e6))
        if ok:
            self.watchdog_interval = seconds
        return ok

    def stopping(self) -> bool:
        return self.send(stopping=1, status="stopping: finishing the node operations under way")
