"""Logging set-up: plain text, JSON lines (one object per record), or journald's stream format.

Under systemd (``JOURNAL_STREAM`` names the stream stderr is connected to) the text format
drops its own timestamp, which journald adds, and starts each line with the record's syslog
priority (``<3>`` for an error), which journald reads as the entry's priority.

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


class JournalFormatter(logging.Formatter):
    """Text without a timestamp, each line prefixed with ``<priority>`` (journald's stream format).

    A multi-line record (a traceback) gets the prefix on every line, so journald keeps each
    line at the record's priority.
    """

    def __init__(self) -> None:
        super().__init__(_JOURNAL)

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in super().format(record).splitlines())


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


def setup_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif under_journald():
        handler.setFormatter(JournalFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    quiet_scheduler()
