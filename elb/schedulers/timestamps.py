"""The time stamps the schedulers print (``2026-11-22T04:05:06``, in the master's local time), read
once for both drivers."""

from __future__ import annotations

import re
import time

TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?")


def parse_timestamp(text: str) -> float:
    """``2026-11-22T04:05:06`` in the master's local time -> POSIX seconds."""
    m = TIMESTAMP.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 61):
        raise ValueError(f"timestamp {text!r} is out of range")
    try:
        seconds = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError) as err:
        raise ValueError(f"timestamp {text!r}: {err}") from None
    if m.group(7):
        seconds += float("0." + m.group(7))
    return seconds
