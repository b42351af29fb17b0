"""Durations: read from the config and the command line (``90``, ``90s``, ``15m``, ``2h``, ``1d``,
``4w``), and said in the plain words elb's reasons and reports use.

``parse`` is the one reader of a duration written as text; the config's times (``Seconds``,
``PositiveSeconds``) and the command line's (``argument``, for argparse) both use it. The config
also takes a plain number of seconds, as YAML writes it (``90``, ``2.5``).
"""

from __future__ import annotations

import argparse
import math
import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import PlainValidator

# A year: longer than any sensible time setting, and far inside what datetime arithmetic (the
# scheduler adds poll_interval to the clock) and subprocess time-outs can take.
MAX_SECONDS = 365 * 24 * 3600.0

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
ACCEPTED = "seconds (90) or a number with a unit s, m, h, d or w (90s, 15m, 2h, 1d)"

_TEXT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*")


def parse(text: str) -> float:
    """Seconds in ``text``: ``90``, ``1.5h``, ``15m``, ``1d`` (s, m, h, d, w; no unit: seconds).

    ``ValueError`` says what is accepted and never repeats ``text`` (a config value may be a
    secret written in the wrong place): callers that may show it add it themselves.
    """
    m = _TEXT.fullmatch(text)
    if m is None:
        raise ValueError(f"not a duration: write {ACCEPTED}")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


def argument(text: str) -> float:
    """``parse`` for argparse (``--last 90m``): a duration longer than 0."""
    try:
        seconds = parse(text)
    except ValueError:
        seconds = 0.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90m, 12h, 7d)")
    return seconds


def _config_seconds(minimum: float, why: str, *, zero: bool = True) -> PlainValidator:
    """A config time: a number of seconds, or text ``parse`` reads; finite, at most a year, at
    least ``minimum`` (``why``: why), and 0 only when ``zero``."""

    def check(value: object) -> float:
        if isinstance(value, str):
            seconds = parse(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            raise ValueError(f"not a duration: write {ACCEPTED}")
        if math.isnan(seconds) or seconds < 0:
            raise ValueError(f"not a duration (never negative): write {ACCEPTED}")
        if seconds > MAX_SECONDS:
            raise ValueError(f"at most a year ({MAX_SECONDS:.0f} s)")
        if seconds < minimum:
            raise ValueError(f"at least {minimum:g} s ({why})")
        if seconds == 0 and not zero:
            raise ValueError(f"more than 0 s ({why})")
        return seconds

    return PlainValidator(check, json_schema_input_type=float | str)


# A time where 0 means something (no wait, no limit: each key says): 0 or more.
Seconds = Annotated[float, _config_seconds(0.0, "")]
# A time that must be some time: a time-out, a length. More than 0.
PositiveSeconds = Annotated[float, _config_seconds(0.0, "0 is no time at all", zero=False)]
# A time that paces what elb does: the poll, the launch back-off, the boot time the policy plans
# with. 1 s or more: a smaller value is 0 in all but name and turns off what it paces (a poll
# without pause, a back-off that never waits, idle nodes removed at once).
PacingSeconds = Annotated[float, _config_seconds(1.0, "less would turn off what it paces")]


def minutes(seconds: float) -> str:
    """Human duration for reasons: '45 s', '17 min', '2.5 h'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def utc_minute(t: float) -> str:
    """An instant to the minute in UTC, for lines an admin reads: '2027-01-15 08:00 UTC'."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
