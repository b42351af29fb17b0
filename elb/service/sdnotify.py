"""systemd's notification protocol (sd_notify(3)): readiness, watchdog keep-alives, status; and
``KeepAlive``, the thread that sends the keep-alives while the passes go on.

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
import threading
import time
from collections.abc import Callable, Mapping

from apscheduler.events import EVENT_JOB_SUBMITTED, SchedulerEvent
from apscheduler.schedulers.base import BaseScheduler

from elb.core.durations import minutes

log = logging.getLogger("elb.service.sdnotify")

# A pass that has not started for this many poll intervals (or for WatchdogSec, when longer) is
# hung: the keep-alives stop, and systemd restarts elb WatchdogSec later.
HUNG_POLLS = 3


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


def hung_after(poll_interval: float, watchdog: float) -> float:
    """How long after a pass started, with no other started since, elb counts as hung: three
    poll intervals, or ``watchdog`` (WatchdogSec) when longer, so a slow pass has at least that."""
    return max(HUNG_POLLS * poll_interval, watchdog)


class KeepAlive:
    """systemd's watchdog keep-alives, sent from a thread of their own every WatchdogSec/2
    (``WATCHDOG_USEC``), whatever the poll interval, while the daemon is alive: its scheduler
    running (``running``) and a pass started less than ``hung_after`` ago (``pass_started``).

    A pass that hangs starts no other: ``hung_after`` later the keep-alives stop, and systemd
    restarts elb WatchdogSec after the last one. A process that hangs whole (no thread runs) sends
    none either. ``tick`` is one look, with the time from ``clock``.
    """

    def __init__(
        self,
        notifier: Notifier,
        poll_interval: float,
        *,
        running: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.notifier = notifier
        watchdog = notifier.watchdog_interval
        self.period = None if watchdog is None else watchdog / 2
        self.hung_after = hung_after(poll_interval, watchdog or 0.0)
        self._running = running
        self._clock = clock
        self._last_start = clock()  # the first pass starts at once
        self._withheld = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pass_started(self) -> None:
        self._last_start = self._clock()

    def tick(self) -> bool:
        """Send a keep-alive if the daemon is alive; True when one was sent."""
        if not self._running():
            return False
        quiet = self._clock() - self._last_start
        if quiet >= self.hung_after:
            if not self._withheld:
                log.error(
                    "no pass has started for %s (hung after %s): keep-alives stop, systemd restarts elb",
                    minutes(quiet),
                    minutes(self.hung_after),
                )
                self._withheld = True
            return False
        self._withheld = False
        return self.notifier.send(watchdog=1)

    def _run(self) -> None:
        assert self.period is not None
        while not self._stop.wait(self.period):
            self.tick()

    def start(self) -> KeepAlive:
        """Start the thread (not when systemd asked for no keep-alives)."""
        if self.period is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="elb-keepalive", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @classmethod
    def watch(cls, scheduler: BaseScheduler, notifier: Notifier, poll_interval: float) -> KeepAlive:
        """Keep-alives for the passes ``scheduler`` runs: each pass it starts (submits) counts,
        and none go while it is not running. Started at once; a no-op without ``WATCHDOG_USEC``."""
        keepalive = cls(notifier, poll_interval, running=lambda: scheduler.running)

        def started(_event: SchedulerEvent) -> None:
            keepalive.pass_started()

        scheduler.add_listener(started, EVENT_JOB_SUBMITTED)
        return keepalive.start()
