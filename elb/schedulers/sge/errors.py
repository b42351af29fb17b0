"""Errors of the SGE reader. Every failure of an SGE command or of its output is an ``SgeError``."""

from __future__ import annotations

from collections.abc import Sequence

from elb.schedulers import process

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


# What Grid Engine prints when the qmaster did not answer this once (busy, restarting, the network):
# worth trying again; any other failure is an answer. A refusal is an answer even when commlib
# reports it ("commlib error: access denied").
TRANSIENT = ("unable to contact qmaster", "commlib error", "can't find connection", "failed receiving gdi request")
REFUSED = ("access denied", "permission denied", "no admin host", "no submit host", "neither submit nor admin host")


def is_transient(stderr: str) -> bool:
    """Whether ``stderr`` says the qmaster did not answer: an entry of ``TRANSIENT`` and none of
    ``REFUSED`` (any case)."""
    return process.is_transient(stderr, TRANSIENT, REFUSED)


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
    of what it printed on standard error. ``transient``: the qmaster did not answer (a time-out,
    a command a signal ended, its exit status negative, or an entry of ``TRANSIENT`` in its
    stderr, not a refusal): trying again may work.
    """

    # None: transient when its stderr says so; True: always (a time-out); False: never (an
    # answer elb cannot use is an answer).
    always_transient: bool | None = None

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
        kind = self.always_transient
        killed = returncode is not None and process.killed_by(returncode) is not None  # (no answer)
        self.transient = (killed or is_transient(stderr)) if kind is None else kind
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

    always_transient = True


class SgeParseError(SgeError):
    """SGE printed something that is not what elb expects: names what is wrong and where."""

    always_transient = False


class PartialReadError(SgeError):
    """SGE answered, but the answer is partial (hosts elb knows vanished without being deregistered):
    nothing may be decided on it. The message names the hosts and why the read was refused."""

    always_transient = False
