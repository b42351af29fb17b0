"""The only module that runs SGE commands (qstat, qhost, qmod, qconf).

Every command is an argument list (never a shell), runs in a process group of its own with
``SGE_ROOT``/``SGE_CELL`` from the config and ``LC_ALL=C``, and has a timeout: past it the
whole process group is killed. Any failure raises ``SgeError`` (``SgeTimeoutError`` for a
timeout, ``SgeParseError`` for output elb cannot read) naming the command, its exit status and
the tail of its stderr. A command that times out or answers that the qmaster did not answer
(``elb.schedulers.sge.errors.TRANSIENT``) is tried again (``Retry``: 3 tries, 1.5 s then 3 s
apart, none started later than twice the time-out after the first), but ``qmod -rq``, which
must not requeue a job twice; the error that ends it says ``transient``.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from elb.core.model import Job, Snapshot
from elb.schedulers import process
from elb.schedulers.process import CommandResult, Retry, Runner
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.errors import PartialReadError, SgeError, SgeParseError, SgeTimeoutError
from elb.schedulers.sge.parse import QstatMemo, check_agree, join_snapshot, parse_qhost, parse_qstat, parse_start_times
from elb.schedulers.sge.peek import PEEK_ARGS, waiting_jobs
from elb.schedulers.sge.readcheck import Need, check_read
from elb.schedulers.sge.site import Site, build_site, parse_names

Clock = Callable[[], float]
T = TypeVar("T")
log = logging.getLogger("elb.schedulers.sge")


# qstat: every user's jobs (-u '*' is passed literally, no shell), XML, the full format with one
# block per queue instance and the jobs on it (-f), and each job's requests (-r).
QSTAT_ARGS: tuple[str, ...] = ("-u", "*", "-xml", "-r", "-f")
# qhost: XML with each host's queue instances (-q).
QHOST_ARGS: tuple[str, ...] = ("-xml", "-q")

# SGE host names as elb accepts them before passing one to a command.
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})")
_QUEUE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_PE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# Environment variables that change what qstat prints (debug dumps instead of XML).
_DROPPED_ENV = ("MORE_INFO", "SGE_QSTAT_ENV_DEBUG", "SGE_DEBUG_LEVEL", "SGE_ND")
# What qmod prints for each queue instance it changed (or found already changed).
_QMOD_OK = re.compile(r"changed state of|is already in the specified state")
# qmod -rq's answers (gridengine 8.1.9; tests/fixtures/sge/recorded/qmod-rq.txt)
_PUSHED = re.compile(r"Pushed rescheduling of (?:job ([0-9]+)|job-array task ([0-9]+)\.([0-9]+)) on host \S+")
_NOT_RESTARTABLE = re.compile(r"The job ([0-9]+) is not restartable")
_REQUEST_PART = re.compile(r"[^\s,=\"'`$;|&<>()]+")  # one name or value of a -l list
_ALTERED = re.compile(r"modified hard resource list of job [0-9]+")


@dataclass(frozen=True, slots=True)
class Rescheduled:
    """What ``qmod -rq`` did on a host: the jobs (``7``, or ``5.1`` for an array task) SGE
    requeues, and the jobs it cannot (not rerunnable: they run on, or are lost with the host)."""

    pushed: tuple[str, ...] = ()
    not_restartable: tuple[int, ...] = ()


# What qconf -sel prints (on stderr, exit status 1) when SGE has no execution host configured.
_NO_EXEC_HOST = "no execution host defined"
# The most parallel environments read_site reads (one qconf -sp each): a bound on the commands
# of one read, far above what sites define (a handful).
MAX_PES = 100


def _failed(argv: Sequence[str], result: CommandResult) -> SgeError:
    """The error of a command that exited non-zero, or that a signal ended (transient: it gave
    no answer, ``SgeError``)."""
    detail = result.stderr or result.stdout.decode("utf-8", errors="replace")
    killer = process.killed_by(result.returncode)
    if killer is not None:
        message = f"killed by {killer}"
    else:
        message = "failed" if detail.strip() else "failed without saying why"
    return SgeError(message, command=argv, returncode=result.returncode, stderr=detail)


def run_command(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
    """``elb.schedulers.process.run_command``, its failures as ``SgeError`` (``SgeTimeoutError``
    past ``timeout``)."""
    try:
        return process.run_command(argv, timeout=timeout, env=env)
    except process.CommandTimeout as err:
        raise SgeTimeoutError(err.message, command=err.command, stderr=err.stderr) from None
    except process.CommandError as err:
        raise SgeError(err.message, command=err.command) from None


def check_host(host: str) -> str:
    """``host`` if it is a plain host name; SgeError otherwise (it would reach a command line)."""
    if not isinstance(host, str) or _HOST.fullmatch(host) is None or host == "global":
        raise SgeError(f"refusing host name {host!r}: not a plain host name")
    return host


def check_pe(name: str) -> str:
    """A parallel environment's name as ``qconf -spl`` lists it, refused if it could be read as
    an option or holds characters SGE does not allow in names."""
    if not _PE_NAME.fullmatch(name):
        raise SgeError(f"refusing parallel environment name {name!r}")
    return name


def check_queue(queue: str) -> str:
    if not isinstance(queue, str) or _QUEUE.fullmatch(queue) is None:
        raise SgeError(f"refusing queue name {queue!r}: not a plain cluster queue name")
    return queue


class SgeCommands:
    """Runs SGE's commands for elb. One instance per config; safe to reuse across passes.

    ``clock`` gives the master's time (elb runs on the master); it is read once per snapshot,
    after both commands answered. ``runner`` runs a command (tests may pass their own). Each
    read of qstat remembers what its entries were made into, so the next read makes only the
    entries that changed (``elb.schedulers.sge.parse.QstatMemo``); reads of the snapshot are the pass's own,
    one at a time.
    """

    def __init__(
        self,
        config: SgeConfig | None = None,
        *,
        clock: Clock = time.time,
        runner: Runner = run_command,
        environ: Mapping[str, str] | None = None,
        retry: Retry | None = None,
    ) -> None:
        self.config = config if config is not None else SgeConfig()
        self._clock = clock
        self._runner = runner
        self._retry = retry if retry is not None else Retry()
        base = dict(os.environ if environ is None else environ)
        for key in _DROPPED_ENV:
            base.pop(key, None)
        base["SGE_ROOT"] = str(self.config.root)
        base["SGE_CELL"] = self.config.cell
        base["LC_ALL"] = "C"
        self._env = base
        self._qstat_memo = QstatMemo()  # what the last whole read of qstat was made into
        self._last_peek: tuple[bytes, frozenset[str]] = (b"", frozenset())  # the last peek's output, parsed

    # -- plumbing --------------------------------------------------------------------------
    def _executable(self, name: str) -> str:
        if self.config.bin_dir is not None:
            path = Path(self.config.bin_dir) / name
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise SgeError(f"{name} not found: {path} is not an executable file (sge.bin_dir)")
            return str(path)
        found = shutil.which(name, path=self._env.get("PATH"))
        if found is None:
            raise SgeError(f"{name} not found on PATH; set sge.bin_dir to the SGE bin directory")
        return found

    def run(self, name: str, args: Sequence[str], *, retry: bool = True) -> CommandResult:
        """Run SGE command ``name`` with ``args``; SgeError unless it exits 0. A transient error
        is tried again (``Retry``) unless ``retry`` is false."""
        argv = (self._executable(name), *args)

        def once() -> CommandResult:
            result = self._runner(argv, timeout=self.config.timeout, env=self._env)
            if result.returncode != 0:
                raise _failed(argv, result)
            return result

        if not retry:
            return once()
        return self._retry.run(once, SgeError, timeout=self.config.timeout, what=" ".join((name, *args))[:200])

    @staticmethod
    def _parsed(parse: Callable[[bytes], T], result: CommandResult) -> T:
        try:
            return parse(result.stdout)
        except SgeParseError as err:
            raise SgeParseError(
                err.message, command=result.argv, returncode=result.returncode, stderr=result.stderr
            ) from None

    # -- what the daemon needs ---------------------------------------------------------------
    def read_snapshot(self) -> Snapshot:
        """Jobs (``qstat -u '*' -xml -r -f``) and hosts (``qhost -xml -q``) with the master's clock."""
        qstat = self.run("qstat", QSTAT_ARGS)
        qhost = self.run("qhost", QHOST_ARGS)
        now = self._clock()
        jobs = self._parsed(functools.partial(parse_qstat, memo=self._qstat_memo), qstat)
        hosts = self._parsed(parse_qhost, qhost)
        try:
            check_agree(jobs, hosts)
        except SgeParseError as err:
            raise SgeParseError(err.message, command=qstat.argv, returncode=qstat.returncode) from None
        return join_snapshot(jobs, hosts, now)

    def waiting_jobs(self, timeout: float) -> frozenset[str]:
        """The numbers of the jobs waiting and eligible to run (``qstat -s p -u '*'``, plain text:
        ``elb.schedulers.sge.peek``), within ``timeout`` (at most ``sge.timeout``), tried once: a
        peek that fails is not worth a retry, the next one comes in seconds."""
        argv = (self._executable("qstat"), *PEEK_ARGS)
        result = self._runner(argv, timeout=min(timeout, self.config.timeout), env=self._env)
        if result.returncode != 0:
            raise _failed(argv, result)
        if result.stdout == self._last_peek[0]:  # nothing changed since the last peek: no parse
            return self._last_peek[1]
        found = self._parsed(waiting_jobs, result)
        self._last_peek = (result.stdout, found)
        return found

    def disable_host(self, host: str, queues: Sequence[str] | None = None) -> None:
        """``qmod -d`` the host's queue instances (all of them unless ``queues`` names some)."""
        self._qmod("-d", host, queues)

    def enable_host(self, host: str, queues: Sequence[str] | None = None) -> None:
        """``qmod -e`` the host's queue instances (all of them unless ``queues`` names some)."""
        self._qmod("-e", host, queues)

    def reschedule_host(self, host: str) -> Rescheduled:
        """``qmod -rq`` the host's queue instances: SGE requeues the rerunnable jobs running there
        (``qsub -r y``, or a queue with ``rerun TRUE``) and says which it cannot. Any answer but
        those two is an ``SgeError``."""
        check_host(host)
        result = self.run("qmod", ("-rq", f"*@{host}"), retry=False)  # twice could requeue a job twice
        text = result.stdout.decode("utf-8", errors="replace") + "\n" + result.stderr
        pushed: list[str] = []
        refused: list[int] = []
        for line in (raw.strip() for raw in text.splitlines()):
            if not line:
                continue
            if (m := _PUSHED.fullmatch(line)) is not None:
                pushed.append(m.group(1) or f"{m.group(2)}.{m.group(3)}")
            elif (m := _NOT_RESTARTABLE.fullmatch(line)) is not None:
                refused.append(int(m.group(1)))
            else:
                raise SgeError(
                    f"unexpected answer {line!r}; expected 'Pushed rescheduling of' or 'is not restartable'",
                    command=result.argv,
                    returncode=result.returncode,
                    stderr=result.stderr,
                )
        return Rescheduled(tuple(pushed), tuple(refused))

    def set_hard_requests(self, job: int, requests: Mapping[str, str]) -> None:
        """``qalter -l NAME=VALUE,... JOB``: the job's whole hard resource list becomes
        ``requests``. ``SgeError`` for a name or value SGE's list syntax cannot carry, and unless
        SGE says it modified the job."""
        if job <= 0 or not requests:
            raise SgeError(f"no job {job} or no request to set")
        for k, v in requests.items():
            if not _REQUEST_PART.fullmatch(k) or not _REQUEST_PART.fullmatch(v):
                raise SgeError(f"{k}={v!r} is not a resource request SGE can take")
        listed = ",".join(f"{k}={v}" for k, v in requests.items())
        result = self.run("qalter", ("-l", listed, str(job)))
        text = (result.stdout.decode("utf-8", errors="replace") + "\n" + result.stderr).strip()
        if not _ALTERED.search(text):
            raise SgeError(
                f"unexpected answer {text!r}; expected 'modified hard resource list of job'",
                command=result.argv,
                returncode=result.returncode,
                stderr=result.stderr,
            )

    def configured_exec_hosts(self) -> frozenset[str]:
        """The execution hosts SGE has configured (``qconf -sel``), whether they answer or not.

        A host leaves this list only when it is deregistered (``qconf -de``); an execd that died
        stays in it. With no execution host at all, SGE 8.1.9 prints ``no execution host defined``
        on stderr and exits 1: that is the empty set, any other failure an ``SgeError``.
        """
        argv = (self._executable("qconf"), "-sel")
        return self._retry.run(lambda: self._exec_hosts(argv), SgeError, timeout=self.config.timeout, what="qconf -sel")

    def _exec_hosts(self, argv: tuple[str, ...]) -> frozenset[str]:
        result = self._runner(argv, timeout=self.config.timeout, env=self._env)
        text = result.stdout.decode("utf-8", errors="replace") + "\n" + result.stderr
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines == [_NO_EXEC_HOST] and result.returncode in (0, 1):
            return frozenset()
        if result.returncode != 0:
            raise _failed(argv, result)
        # qconf can exit 0 after printing an error: every line must be a host name.
        odd = next((line for line in lines if _HOST.fullmatch(line) is None or line == "global"), None)
        if odd is not None or not lines:
            raise SgeError(
                f"unexpected answer {odd or '(no output)'!r}, expected one host name per line",
                command=result.argv,
                returncode=0,
                stderr=result.stderr,
            )
        return frozenset(lines)

    def _qmod(self, flag: str, host: str, queues: Sequence[str] | None) -> None:
        check_host(host)
        if queues is None:
            targets = [f"*@{host}"]
        else:
            if not queues:
                raise SgeError("no queue named to change")
            targets = [f"{check_queue(q)}@{host}" for q in queues]
        result = self.run("qmod", (flag, ",".join(targets)))
        text = result.stdout.decode("utf-8", errors="replace") + "\n" + result.stderr
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        # qmod exits 0 after some refusals: every line must report a changed (or unchanged) state.
        odd = next((line for line in lines if not _QMOD_OK.search(line)), None)
        if odd is not None or not lines:
            raise SgeError(
                f"unexpected answer {odd or '(no output)'!r}; expected 'changed state of'",
                command=result.argv,
                returncode=0,
                stderr=result.stderr,
            )

    # -- small reads for ``elb init`` and ``elb validate`` ----------------------------------
    def _names(self, flag: str, none_marker: str) -> tuple[str, ...]:
        """The names ``qconf FLAG`` lists, one a line (empty when SGE says it has none)."""
        try:
            result = self.run("qconf", (flag,))
        except SgeError as err:
            if none_marker in str(err):
                return ()
            raise
        text = result.stdout.decode("utf-8", errors="replace")
        return tuple(line.strip() for line in text.splitlines() if line.strip())

    def queue_names(self) -> tuple[str, ...]:
        """The cluster queues (``qconf -sql``)."""
        return self._names("-sql", "no cqueue list defined")

    def hostgroup_names(self) -> tuple[str, ...]:
        """The host groups (``qconf -shgrpl``)."""
        return self._names("-shgrpl", "no host group list defined")

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        """The ``qsub -a`` time of each job (None: it has none), from one ``qstat -xml -j`` call
        (the caller bounds how many). SgeError when it fails, e.g. a job ended meanwhile."""
        if not job_ids:
            return {}
        ids = ",".join(str(int(j)) for j in job_ids)
        return self._parsed(parse_start_times, self.run("qstat", ("-xml", "-j", ids)))

    def read_site(self) -> Site:
        """The complexes, parallel environments and global host values new nodes are matched
        against (``elb.schedulers.sge.site``): ``qconf -sc``, ``-spl``, ``-sp NAME`` each, ``-se global``.
        SgeError when any of them fails or cannot be parsed."""

        def text(*args: str) -> str:
            return self.run("qconf", args).stdout.decode("utf-8", errors="replace")

        try:
            names = parse_names("\n".join(self._names("-spl", "no parallel environment")), "qconf -spl")
            if len(names) > MAX_PES:
                raise SgeParseError(f"qconf -spl: {len(names)} parallel environments, more than elb reads ({MAX_PES})")
            pes = {name: text("-sp", check_pe(name)) for name in names}
            return build_site(text("-sc"), pes, text("-se", "global"))
        except SgeParseError as err:
            raise SgeError(f"reading the site's configuration: {err}") from err

    def answers(self) -> None:
        """Raise SgeError unless qstat answers within the timeout (``qstat -s r``: running jobs only)."""
        self.run("qstat", ("-s", "r"))


class WholeReader(Protocol):
    """What ``read_whole`` needs of an SGE client (``SgeCommands``, or a stand-in in tests)."""

    def read_snapshot(self) -> Snapshot: ...

    def configured_exec_hosts(self) -> frozenset[str]: ...


def read_whole(
    sge: WholeReader,
    *,
    known_up: frozenset[str],
    running_before: Sequence[Job] = (),
    leaving: frozenset[str] | None = None,
) -> Snapshot:
    """Read SGE, and refuse the read unless it is whole (see ``elb.schedulers.sge.readcheck``).

    Asks ``qconf -sel`` only when hosts in ``known_up`` (or the hosts of ``running_before``) are
    missing, and reads qstat and qhost a second time only when ``qconf -sel`` cannot settle it
    and the read did not lose every host elb knows to be up (a second read can be as hollow as
    the first). ``leaving``: hosts elb is taking out of SGE itself (default: ``known_up.leaving``
    of ``expected_hosts``). Returns the read to act on (the second one when there was one);
    ``PartialReadError`` with the reason when the read is partial.
    """
    first = sge.read_snapshot()
    configured: frozenset[str] | None = None
    second: Snapshot | None = None
    while True:
        verdict = check_read(
            first,
            configured_hosts=configured,
            known_up=known_up,
            running_before=running_before,
            second_read=second,
            leaving=leaving,
        )
        if verdict.ok:
            if configured is not None:
                log.info("read of SGE confirmed: %s", verdict.reason)
            return second if second is not None else first
        if verdict.need is Need.CONFIGURED_HOSTS and configured is None:
            configured = sge.configured_exec_hosts()
        elif verdict.need is Need.SECOND_READ and second is None:
            second = sge.read_snapshot()
        else:
            raise PartialReadError(verdict.reason)


__all__ = [
    "MAX_PES",
    "QHOST_ARGS",
    "QSTAT_ARGS",
    "Clock",
    "CommandResult",
    "Retry",
    "Runner",
    "SgeCommands",
    "WholeReader",
    "check_host",
    "read_whole",
    "run_command",
]
