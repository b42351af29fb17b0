"""Errors of the SGE reader. Every failure of an SGE command or of its output is an ``SgeError``."""

from __future__ import annotations

from collections.abc import Sequence

STDERR_TAIL = 2000  # characters of stderr kept in an error


def tail(text: str, limit: int = STDERR_TAIL) -> str:
    """The last ``limit`` characters of ``text``, stripped, marked when cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return "..." + text[-limit:]


# What SGE prints when it refuses or cannot reach the caller, and what an admin can do about it.
_HINTS = (
    (
        ("access denied", "neither submit nor admin host", "is no admin host", "is no submit host"),
        "SGE refuses this host: run elb on the master "
        "(on the test cluster: python -m elbdev testcluster exec -- elb ...), "
        "or make this host an admin and submit host (qconf -ah HOST; qconf -as HOST)",
    ),
    (
        ("unable to contact qmaster", "can't find connection", "failed receiving gdi request"),
        "the qmaster does not answer: is it running (systemctl status gridengine-master), and are "
        "SGE_ROOT, SGE_CELL and $SGE_ROOT/$SGE_CELL/common/act_qmaster right?",
    ),
)


def hint(stderr: str) -> str | None:
    """What to do about an SGE error, from its message; None when there is nothing to add."""
    low = stderr.lower()
    for needles, text in _HINTS:
        if any(n in low for n in needles):
            return text
    return None


class SgeError(Exception):
    """An SGE command failed, timed out, or printed something elb cannot use.

    ``command`` is the argument list that ran (``None`` when no command is involved),
    ``returncode`` its exit status (``None`` when it never finished), ``stderr`` the tail
    of what it printed on standard error.
    """

    def __init__(
        self,
        message: str,
        *,
        command: Sequence[str] | None = None,
        returncode: int | None = None,
        stderr: str = "",
    ) -> None:
        self.message = message
        self.command = tuple(command) if command is not None else None
        self.returncode = returncode
        self.stderr = tail(stderr)
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.command is not None:
            parts.append(f"{' '.join(self.command)}: ")
        parts.append(self.message)
        if self.returncode is not None:
            parts.append(f" (exit status {self.returncode})")
        if self.stderr:
            parts.append(f"; stderr: {self.stderr}")
            advice = hint(self.stderr)
            if advice:
                parts.append(f" (hint: {advice})")
        return "".join(parts)


class SgeTimeoutError(SgeError):
    """An SGE command ran past its timeout and was killed (with its process group)."""


class SgeParseError(SgeError):
    """SGE printed something that is not what elb expects: names what is wrong and where."""


class PartialReadError(SgeError):
    """SGE answered, but the answer is partial (hosts elb knows vanished without being deregistered):
    nothing may be decided on it. The message names the hosts and why the read was refused."""
