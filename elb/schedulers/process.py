"""Running a scheduler's commands, shared by the drivers and owned by neither: an argument list
(never a shell) in a process group of its own, killed whole past its time-out
(``run_command``); and ``Retry``, how a command whose error is transient is tried again. Each
driver turns ``CommandError`` into its own error and says which of its errors are transient
(``is_transient`` over its table)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

Clock = Callable[[], float]
T = TypeVar("T")
E = TypeVar("E", bound=Exception)
log = logging.getLogger("elb.schedulers")

_KILL_GRACE = 5.0  # seconds to collect output after killing a timed-out command


class CommandError(Exception):
    """A command could not be run (``command``: its argument list)."""

    def __init__(self, message: str, *, command: Sequence[str], stderr: str = "") -> None:
        super().__init__(f"{' '.join(command)}: {message}")
        self.message = message
        self.command = tuple(command)
        self.stderr = stderr


class CommandTimeout(CommandError):
    """A command ran past its time-out and was killed with its process group."""


def is_transient(stderr: str, transient: Sequence[str], refused: Sequence[str] = ()) -> bool:
    """Whether ``stderr`` says the scheduler did not answer: it has an entry of ``transient`` and
    none of ``refused`` (any case)."""
    low = stderr.lower()
    return any(needle in low for needle in transient) and not any(r in low for r in refused)


def killed_by(returncode: int) -> str | None:
    """The signal that ended a command (a negative exit status, as ``subprocess`` gives it), by
    name ("SIGTERM"); None when the command exited. A command a signal ended gave no answer:
    the drivers take it for transient."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


@dataclass(frozen=True, slots=True)
class Retry:
    """How a command whose error is transient is tried again: after each of ``delays`` (so
    ``len(delays) + 1`` tries), and no try started later than ``budget`` times the command's
    time-out after the first (a command that timed out twice is not run a third time).
    ``sleep`` and ``clock`` (monotonic) are injected in tests."""

    delays: tuple[float, ...] = (1.5, 3.0)
    budget: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    clock: Clock = time.monotonic

    def run(self, call: Callable[[], T], error: type[E], *, timeout: float, what: str) -> T:
        """``call()``; an ``error`` whose ``transient`` is true tried again as above, the last
        one raised (any other error at once)."""
        start = self.clock()
        for delay in self.delays:
            try:
                return call()
            except error as err:
                if not getattr(err, "transient", False) or self.clock() - start + delay > self.budget * timeout:
                    raise
                log.warning("%s: %s; trying again in %g s", what, err, delay)
            self.sleep(delay)
        return call()


@dataclass(frozen=True, slots=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: str


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult: ...


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def run_command(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
    """Run ``argv`` without a shell; kill its whole process group after ``timeout`` seconds."""
    command = tuple(argv)
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,  # its own process group, so a timeout kills its children too
            close_fds=True,
        )
    except OSError as exc:
        raise CommandError(f"cannot run: {exc.strerror or exc}", command=command) from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            _, err = proc.communicate(timeout=_KILL_GRACE)
        except subprocess.TimeoutExpired:
            # Something outside the group still holds the pipes: stop waiting for it.
            err = b""
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
        raise CommandTimeout(
            f"no answer within {timeout:g} s; killed its process group",
            command=command,
            stderr=err.decode("utf-8", errors="replace"),
        ) from None
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return CommandResult(command, proc.returncode, out, err.decode("utf-8", errors="replace"))
