"""Logging set-up: plain text, JSON lines (one object per record), or journald's stream format;
and ``Alarms``, which says an ALARM once per change rather than once per pass.

Under systemd (``JOURNAL_STREAM`` names the stream stderr is connected to) every line starts
with the record's syslog priority (``<3>`` for an error, ``<4>`` a warning, ``<6>`` info, ``<7>``
debug), which journald reads as the entry's priority (``journalctl -p warning`` finds it), and
the text format drops its own timestamp, which journald adds. JSON lines keep theirs.

The level is the config's ``log_level`` (``setup_logging``'s ``level``), or debug whatever it says
after ``elb -v`` (``set_verbose``).

APScheduler, which runs the polling loop, logs two INFO lines per pass and a WARNING each
time a pass overruns its interval; its loggers keep WARNING and above only, and the
overrun warning is shown at most every 10 minutes with the number of runs it stands for.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Final, TextIO

from elb.core.durations import minutes

# Python's levels to syslog priorities (sd-daemon(3)): error 3, warning 4, info 6, debug 7.
_PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_JOURNAL = "%(levelname)s %(name)s: %(message)s"


def syslog_priority(levelno: int) -> int:
    """The syslog priority of a Python log level (levels between two map to the more severe)."""
    for level in sorted(_PRIORITY, reverse=True):
        if levelno >= level:
            return _PRIORITY[level]
    return 7


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class PriorityFormatter(logging.Formatter):
    """Another formatter's lines, each prefixed with ``<priority>`` (journald's stream format).

    A multi-line record (a traceback in text) gets the prefix on every line, so journald keeps
    each line at the record's priority.
    """

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in self.inner.format(record).splitlines())


class JournalFormatter(PriorityFormatter):
    """Text without a timestamp (journald adds its own), each line prefixed with ``<priority>``."""

    def __init__(self) -> None:
        super().__init__(logging.Formatter(_JOURNAL))


def under_journald(environ: dict[str, str] | None = None, stream: object = None) -> bool:
    """True when ``stream`` (stderr) is the journal stream systemd gave this process.

    systemd sets ``JOURNAL_STREAM=<device>:<inode>`` of the stream it connected; it is only
    trusted when stderr really is that file (a child with redirected stderr inherits the
    variable too).
    """
    env = os.environ if environ is None else environ
    value = env.get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    fileno = getattr(stream if stream is not None else sys.stderr, "fileno", None)
    if fileno is None:
        return False
    try:
        st = os.fstat(fileno())
    except (OSError, ValueError):
        return False
    return st.st_dev == int(dev) and st.st_ino == int(ino)


class _OverrunThrottle(logging.Filter):
    """Let APScheduler's "skipped: maximum number of running instances reached" through at most
    once per ``every`` seconds, with the number of skipped runs it stands for: a pass longer than
    the interval is worth a line now and then, not one per interval."""

    def __init__(self, every: float = 600.0) -> None:
        super().__init__()
        self.every = every
        self._last: float | None = None
        self._skipped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "maximum number of running instances" not in record.getMessage():
            return True
        self._skipped += 1
        if self._last is not None and record.created - self._last < self.every:
            return False
        self._last = record.created
        if self._skipped > 1:
            record.msg = f"{record.getMessage()} ({self._skipped} runs skipped since the last such line)"
            record.args = ()
        self._skipped = 0
        return True


def quiet_scheduler() -> None:
    """APScheduler's loggers keep warnings and errors only; overruns at most every 10 minutes."""
    for name in ("apscheduler", "apscheduler.scheduler", "apscheduler.executors.default"):
        logging.getLogger(name).setLevel(logging.WARNING)
    sched = logging.getLogger("apscheduler.scheduler")
    if not any(isinstance(f, _OverrunThrottle) for f in sched.filters):
        sched.addFilter(_OverrunThrottle())


def formatter(fmt: str, journald: bool) -> logging.Formatter:
    """The formatter of ``log_format`` ``fmt`` (``text`` or ``json``), with journald's priority
    prefix when stderr is the journal."""
    if fmt == "json":
        return PriorityFormatter(JsonFormatter()) if journald else JsonFormatter()
    return JournalFormatter() if journald else logging.Formatter(_TEXT)


LEVELS: Final = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _Verbosity:
    """Whether ``elb -v`` asked for debug lines (set once by ``elb.cli.main`` before the command runs)."""

    debug = False


def set_verbose(on: bool) -> None:
    """``elb -v``/``--verbose``: every later ``setup_logging`` logs at debug, whatever its level."""
    _Verbosity.debug = on


def setup_logging(
    fmt: str = "text",
    level: int | str = logging.INFO,
    *,
    stream: TextIO | None = None,
    environ: dict[str, str] | None = None,
) -> None:
    """Log to ``stream`` (stderr) in ``fmt`` from ``level`` (a number, or a ``log_level`` name)
    up; debug after ``elb -v``."""
    out = sys.stderr if stream is None else stream
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter(fmt, under_journald(environ, out)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if _Verbosity.debug else LEVELS[level] if isinstance(level, str) else level)
    quiet_scheduler()


# -- alarms ------------------------------------------------------------------------------------

# While an ALARM lasts unchanged it is said again this often (seconds), so that a reader of the
# last lines still sees it.
REMIND_EVERY = 600.0

_MESSAGE: Final = object()  # ``Alarms.alarm``'s default: the alarm changes when its message does


@dataclass
class _On:
    message: str
    changes_with: object
    since: float
    said_at: float


class Alarms:
    """ALARM lines, said at ERROR once when a condition starts or changes, again every
    ``remind_every`` seconds while it lasts (with how long it has), and said over (INFO) at
    the first good pass that does not raise it.

    Each pass that finds the condition calls ``alarm`` (the key names the condition); the end of
    every pass calls ``pass_ended``. Time is passed in; nothing here reads a clock.
    """

    def __init__(self, logger: logging.Logger | None = None, remind_every: float = REMIND_EVERY) -> None:
        self.log = logger or logging.getLogger("elb")
        self.remind_every = remind_every
        self._on: dict[str, _On] = {}
        self._raised: set[str] = set()  # keys raised since the last pass_ended

    def alarm(self, key: str, message: str, now: float, *, changes_with: object = _MESSAGE) -> bool:
        """The condition ``key`` holds at ``now``; True when a line was logged. It is new, and said
        at once, when it was not on or ``changes_with`` differs from what it was when last said
        (default: the message; a message with a count or a countdown passes what matters)."""
        self._raised.add(key)
        changes = message if changes_with is _MESSAGE else changes_with
        on = self._on.get(key)
        if on is None or on.changes_with != changes:
            self._on[key] = _On(message, changes, since=now if on is None else on.since, said_at=now)
            self.log.error("ALARM: %s", message)
            return True
        on.message = message
        if now - on.said_at < self.remind_every:
            return False
        self.log.error("ALARM (still, for %s): %s", minutes(now - on.since), message)
        on.said_at = now
        return True

    def log_at(self, level: int, key: str, message: str, now: float, *, changes_with: object = _MESSAGE) -> bool:
        """``message`` at ``level``: an ``alarm`` at ERROR and above, else a plain line each time."""
        if level >= logging.ERROR:
            return self.alarm(key, message, now, changes_with=changes_with)
        self.log.log(level, "%s", message)
        return True

    def pass_ended(self, now: float, ok: bool = True) -> list[str]:
        """After each pass: a good pass (``ok``) that raised no alarm ``key`` ends it (said at INFO);
        a failed pass ends none (it could not look). The keys that ended."""
        ended = [] if not ok else [k for k in self._on if k not in self._raised]
        for key in ended:
            on = self._on.pop(key)
            self.log.info("ALARM over after %s: %s", minutes(now - on.since), on.message)
        self._raised.clear()
        return ended

    @property
    def on(self) -> tuple[str, ...]:
        """The keys of the alarms that are on."""
        return tuple(self._on)
