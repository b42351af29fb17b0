"""The only module that runs Slurm's commands (``squeue``, ``sinfo``, ``scontrol``).

Each command is an argument list (never a shell) run by ``elb.schedulers.process.run_command`` (its
own process group, killed past the timeout), with ``SLURM_CONF`` from the config and
``LC_ALL=C``. Node names are checked before they reach a command line. Any failure raises
``SlurmError`` naming the command, its exit status and the tail of its stderr.

A read has ``slurm.timeout`` (30 s), a change ``slurm.update_timeout`` (60 s). A command that
times out, or that Slurm answers with one of ``TRANSIENT`` (slurmctld did not answer this once),
is tried again (``elb.schedulers.process.Retry``: 3 tries, 1.5 s then 3 s apart, none
started later than twice the time-out after the first), but ``scontrol requeue`` (twice could
requeue a job its first try already requeued and that started again); the ``SlurmError`` that
ends it says ``transient``. ``scontrol update`` names at most ``UPDATE_BATCH`` nodes at a time.
A node with no instance behind it is parked: its address set to ``NO_INSTANCE``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elb.schedulers.process import (
    CommandError,
    CommandResult,
    CommandTimeout,
    Retry,
    is_transient,
    killed_by,
    run_command,
)
from elb.schedulers.slurm.config import SlurmConfig
from elb.schedulers.slurm.held import Line, line_of, pending_line
from elb.schedulers.slurm.held import jobs as jobs_of_lines
from elb.schedulers.slurm.parse import (
    SINFO_ARGV,
    SQUEUE_ARGV,
    SinfoMemo,
    SlurmJob,
    SlurmNode,
    SlurmParseError,
    Splice,
    SqueueMemo,
    compress,
    parse_sinfo,
    read_entries,
)

_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_ADDRESS = re.compile(r"[0-9A-Fa-f.:]{2,45}")
_JOB = re.compile(r"[0-9]{1,12}(?:_[0-9]{1,9})?")
_REASON = re.compile(r"[A-Za-z0-9 _.,:;=()/+-]{1,200}")
# Environment variables that change what squeue and sinfo print.
_DROPPED_ENV = ("SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SINFO_FORMAT", "SQUEUE_SORT", "SINFO_SORT", "SLURM_TIME_FORMAT")
# What Slurm's commands print when slurmctld did not answer this once (busy, restarting, its
# agents stalled, the network): worth trying again. Any other failure is an answer.
TRANSIENT = (
    "socket timed out on send/recv operation",
    "unable to contact slurm controller",
    "zero bytes were transmitted or received",
    "transport endpoint is not connected",
    "connection refused",
)
UPDATE_BATCH = 100  # the most nodes one ``scontrol update`` names
# The address of a node with no instance behind it (never launched, or gone): the limited
# broadcast address. No host has it, and Linux refuses a TCP connection to it (ENETUNREACH)
# before any packet leaves, so slurmctld's message to such a node fails at once. The node's name
# would be looked up first (10 s a name on Debian's slurmctld, answering no command meanwhile);
# an address of no one that the network routes costs slurmctld a time-out a try, one that refuses
# a second a try (about ten tries), and one of a real host (the master's) may reach a slurmd.
NO_INSTANCE = "255.255.255.255"


SHOWN_ARG = 60  # the most of an argument an error or a log line shows


def shown(argv: Sequence[str]) -> str:
    """A command as errors and logs name it: its first three arguments, each cut to ``SHOWN_ARG``
    characters (a batch's list of names or addresses is hundreds)."""
    return " ".join(a if len(a) <= SHOWN_ARG else f"{a[: SHOWN_ARG - 3]}..." for a in argv[:3])


class SlurmError(Exception):
    """A Slurm command failed, timed out, or printed something elb cannot use. ``transient``:
    slurmctld did not answer (a time-out, or one of ``TRANSIENT``), after the retries."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class SlurmRead:
    """What one read of Slurm showed: its nodes, and each squeue line's ``Line``
    (``elb.schedulers.slurm.held.line_of``: its job, its neutral jobs, its held job's answer; a
    pending line's text in place of its job, ``held.pending_line``), in squeue's order (``of``: a
    read of jobs and nodes). The jobs alone are picked out when asked for (a node's jobs are
    those of the lines that are not pending)."""

    nodes: tuple[SlurmNode, ...]
    lines: Sequence[Line]
    # How ``lines`` were taken from the read before's (``SqueueMemo.splice``; None: not known).
    splice: Splice[Line] | None = None

    @classmethod
    def of(cls, jobs: Sequence[SlurmJob], nodes: Sequence[SlurmNode]) -> SlurmRead:
        """The read of these ``jobs`` (each line made anew) and ``nodes``."""
        return cls(tuple(nodes), list(map(line_of, jobs)))

    @functools.cached_property
    def jobs(self) -> tuple[SlurmJob, ...]:
        """Each line's job (``held.squeue_job``: a line kept as its text read again)."""
        return jobs_of_lines(self.lines)

    def node(self, name: str) -> SlurmNode | None:
        for n in self.nodes:
            if n.name == name:
                return n
        return None

    def jobs_on(self, name: str) -> tuple[SlurmJob, ...]:
        """Jobs holding the node: running, configuring, completing, just allocated (a line kept
        as its text holds none: a pending one of no node list, ``held.pending_line``)."""
        return tuple(j for line in self.lines if not isinstance(j := line[0], str) and name in j.nodelist)


def check_node(name: str) -> str:
    if not isinstance(name, str) or _NODE.fullmatch(name) is None:
        raise SlurmError(f"refusing node name {name!r}: not a plain host name")
    return name


def _check_reason(reason: str) -> str:
    if _REASON.fullmatch(reason) is None:
        raise SlurmError(f"refusing reason {reason!r}: letters, digits, spaces and .,:;=()/+- only")
    return reason


class SlurmCommands:
    """Reads Slurm and changes its nodes' states, as root on the controller's host."""

    def __init__(
        self, config: SlurmConfig, environ: Mapping[str, str] | None = None, *, retry: Retry | None = None
    ) -> None:
        self.config = config
        self.retry = retry if retry is not None else Retry()
        base = dict(os.environ if environ is None else environ)
        for name in _DROPPED_ENV:
            base.pop(name, None)
        base["LC_ALL"] = "C"
        if config.conf is not None:
            base["SLURM_CONF"] = str(config.conf)
        self.env = base
        # Each squeue line's ``Line`` (a pending one's of its fields, its job not made), for the next read.
        self._squeue_memo = SqueueMemo(line_of, pending_line)
        self._sinfo_memo = SinfoMemo()  # each sinfo line's node, for the next read

    def _executable(self, name: str) -> str:
        if self.config.bin_dir is not None:
            return str(self.config.bin_dir / name)
        return shutil.which(name, path=self.env.get("PATH")) or name

    def run(self, argv: Sequence[str], *, change: bool = False, retry: bool = True) -> CommandResult:
        """Run ``argv`` with the time-out of a read (of a change with ``change``); a transient
        error tried again unless ``retry`` is false."""
        timeout = self.config.update_timeout if change else self.config.timeout
        if not retry:
            return self._once(argv, timeout)
        return self.retry.run(lambda: self._once(argv, timeout), SlurmError, timeout=timeout, what=shown(argv))

    def _once(self, argv: Sequence[str], timeout: float) -> CommandResult:
        command = [self._executable(argv[0]), *argv[1:]]
        try:
            result = run_command(command, timeout=timeout, env=self.env)
        except CommandError as err:
            raise SlurmError(f"{argv[0]}: {err}", transient=isinstance(err, CommandTimeout)) from None
        if result.returncode != 0:
            killer = killed_by(result.returncode)  # (ended by a signal: no answer, transient)
            tail = result.stderr.strip().splitlines()[-3:]
            said = f"killed by {killer}" if killer is not None else f"exit status {result.returncode}"
            raise SlurmError(
                f"{shown(argv)}: {said}: {' / '.join(tail)}",
                transient=killer is not None or is_transient(result.stderr, TRANSIENT),
            )
        return result

    def _text(self, argv: Sequence[str]) -> str:
        out = self.run(argv).stdout
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SlurmError(f"{argv[0]}: output is not UTF-8: {err}") from None

    def read(self, *, mine: object = None) -> SlurmRead:
        """Nodes, then jobs (a job that lands meanwhile is seen on its node by the jobs' read).
        ``mine``: the lines of the caller's read before, which this read may change into its own
        (``read_entries``): the caller reads them no more."""
        try:
            nodes = parse_sinfo(self._text(SINFO_ARGV), memo=self._sinfo_memo)
            lines = read_entries(self._text(SQUEUE_ARGV), self._squeue_memo, mine=mine)
        except SlurmParseError as err:
            raise SlurmError(str(err)) from None
        finally:
            # The read's splice goes with the read (the memo would keep the read before's lines alive).
            splice, self._squeue_memo.splice = self._squeue_memo.splice, None
        if not nodes:
            raise SlurmError("sinfo listed no node: a hollow read (is the controller up, is PrivateData=cloud set?)")
        return SlurmRead(tuple(nodes), lines, splice)

    def update(self, names: Sequence[str], *, park: bool = False, **fields: str) -> None:
        """``scontrol update nodename=<hostlist> key=value ...`` (each value checked by the caller),
        one command for each ``UPDATE_BATCH`` names. ``park``: each node's address set to
        ``NO_INSTANCE`` and its host name to its own name (``nodeaddr=NO_INSTANCE,...
        nodehostname=<hostlist>``, an address for each name: slurmctld pairs the lists), so
        slurmctld keeps no address of an instance that is gone and resolves no name to reach it."""
        checked = [check_node(n) for n in names]
        for start in range(0, len(checked), UPDATE_BATCH):
            batch = checked[start : start + UPDATE_BATCH]
            hosts = compress(batch)
            parked = {"nodeaddr": ",".join([NO_INSTANCE] * len(batch)), "nodehostname": hosts} if park else {}
            pairs = {**parked, **fields}
            self.run(["scontrol", "update", f"nodename={hosts}", *(f"{k}={v}" for k, v in pairs.items())], change=True)

    def set_address(self, name: str, address: str) -> None:
        """Tell Slurm where the node's slurmd is (a cloud node has no address until elb gives it one)."""
        self.set_addresses([(name, address)])

    def set_addresses(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Tell Slurm where each node's slurmd is: one ``scontrol update`` for each
        ``UPDATE_BATCH`` nodes, ``nodename=a,b nodeaddr=ADDR_A,ADDR_B nodehostname=a,b`` (slurmctld
        pairs the lists in their order and refuses lists of unequal length). Every name and
        address is checked before any command runs."""
        checked = []
        for name, address in pairs:
            if _ADDRESS.fullmatch(address) is None:
                raise SlurmError(f"refusing address {address!r} for {name}")
            checked.append((check_node(name), address))
        for start in range(0, len(checked), UPDATE_BATCH):
            batch = checked[start : start + UPDATE_BATCH]
            names = ",".join(n for n, _ in batch)
            addresses = ",".join(a for _, a in batch)
            self.run(
                ["scontrol", "update", f"nodename={names}", f"nodeaddr={addresses}", f"nodehostname={names}"],
                change=True,
            )

    def park(self, names: Sequence[str]) -> None:
        """Set each node's address to ``NO_INSTANCE`` and its host name to its name (no instance
        is behind it)."""
        self.update(names, park=True)

    def drain(self, name: str, reason: str) -> None:
        self.drain_all([name], reason)

    def drain_all(self, names: Sequence[str], reason: str) -> None:
        """``scontrol update nodename=<hostlist> state=DRAIN reason=...``, a hundred names a command."""
        self.update(names, state="DRAIN", reason=_check_reason(reason))

    def undrain(self, names: Sequence[str]) -> None:
        self.update(names, state="UNDRAIN")

    def power_down(self, names: Sequence[str], reason: str, *, force: bool = False, park: bool = False) -> None:
        """Power nodes down: ``POWER_DOWN_ASAP`` (after their jobs) or, with ``force``,
        ``POWER_DOWN_FORCE`` (their jobs are requeued: for a node that never came up). Never
        ``DOWN``, which keeps a cloud node out of service for good. ``park``: their addresses
        set to ``NO_INSTANCE`` in the same command, which slurmctld applies before the state
        (nodes with no instance behind them: the kill of a job it requeues goes nowhere at once)."""
        state = "POWER_DOWN_FORCE" if force else "POWER_DOWN_ASAP"
        self.update(names, park=park, state=state, reason=_check_reason(reason))

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue JOB``: the job goes back to wait (Slurm refuses one submitted
        ``--no-requeue``)."""
        if _JOB.fullmatch(job_id) is None:
            raise SlurmError(f"refusing job id {job_id!r}")
        self.run(["scontrol", "requeue", job_id], change=True, retry=False)

    def set_partitions(self, job: int, partitions: Sequence[str]) -> None:
        """``scontrol update jobid=JOB partition=P1,P2``: the job may run only there."""
        if job <= 0 or not partitions or any(_NODE.fullmatch(p) is None for p in partitions):
            raise SlurmError(f"refusing job {job} or partitions {list(partitions)!r}")
        self.run(["scontrol", "update", f"jobid={job}", f"partition={','.join(partitions)}"], change=True)

    def resume_timeout(self) -> float:
        """Slurm's ``ResumeTimeout`` in seconds (``scontrol show config``)."""
        for line in self._text(["scontrol", "show", "config"]).splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "ResumeTimeout":
                number = value.strip().split()[0] if value.strip() else ""
                if number.isascii() and number.isdigit():
                    return float(number)
                raise SlurmError(f"scontrol show config: ResumeTimeout {value.strip()!r} is not a number of seconds")
        raise SlurmError("scontrol show config: no ResumeTimeout")


__all__: Sequence[str] = (
    "NO_INSTANCE",
    "TRANSIENT",
    "UPDATE_BATCH",
    "SlurmCommands",
    "SlurmError",
    "SlurmRead",
    "check_node",
)
