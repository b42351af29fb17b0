"""Time under a test's control, for code that takes its clock as an argument."""

from __future__ import annotations


class Clock:
    """A clock that stands still until the test moves it (``clock.t += 60``)."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
