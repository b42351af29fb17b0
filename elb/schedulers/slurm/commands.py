"""The only module that runs Slurm's commands (``squeue``, ``sinfo``, ``scontrol``).

Each command is an argument list (never a shell) run by ``elb.schedulers.sge.commands.run_command`` (its
own process group, killed past the timeout), with ``SLURM_CONF`` from the config and
``LC_ALL=C``. Node names are checked before they reach a command line. Any failure raises
``SlurmError`` naming the command, its exit status and the tail of its stderr.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elb.core.config import SlurmConfig
from elb.schedulers.sge.commands import CommandResult, run_command
from elb.schedulers.sge.errors import SgeError
from elb.schedulers.slurm.parse import (
    SINFO_ARGV,
    SQUEUE_ARGV,
    SlurmJob,
    SlurmNode,
    SlurmParseError,
    compress,
    parse_sinfo,
    parse_squeue,
)

_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_ADDRESS = re.compile(r"[0-9A-Fa-f.:]{2,45}")
_JOB = re.compile(r"[0-9]{1,12}(?:_[0-9]{1,9})?")
_REASON = re.compile(r"[A-Za-z0-9 _.,:;=()/+-]{1,200}")
# Environment variables that change what squeue and sinfo print.
_DROPPED_ENV = ("SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SINFO_FORMAT", "SQUEUE_SORT", "SINFO_SORT", "SLURM_TIME_FORMAT")


class SlurmError(Exception):
    """A Slurm command failed, timed out, or printed something elb cannot use."""


@dataclass(frozen=True, slots=True)
class SlurmRead:
    """What one read of Slurm showed: its jobs and its nodes."""

    jobs: tuple[SlurmJob, ...]
    nodes: tuple[SlurmNode, ...]

    def node(self, name: str) -> SlurmNode | None:
        for n in self.nodes:
            if n.name == name:
                return n
        return None

    def jobs_on(self, name: str) -> tuple[SlurmJob, ...]:
        """Jobs holding the node: running, configuring, completing, just allocated."""
        return tuple(j for j in self.jobs if name in j.nodelist)


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

    def __init__(self, config: SlurmConfig, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        base = dict(os.environ if environ is None else environ)
        for name in _DROPPED_ENV:
            base.pop(name, None)
        base["LC_ALL"] = "C"
        if config.conf is not None:
            base["SLURM_CONF"] = str(config.conf)
        self.env = base

    def _executable(self, name: str) -> str:
        if self.config.bin_dir is not None:
            return str(self.config.bin_dir / name)
        return shutil.which(name, path=self.env.get("PATH")) or name

    def run(self, argv: Sequence[str]) -> CommandResult:
        command = [self._executable(argv[0]), *argv[1:]]
        try:
            result = run_command(command, timeout=self.config.timeout, env=self.env)
        except SgeError as err:
            raise SlurmError(f"{argv[0]}: {err}") from None
        if result.returncode != 0:
            tail = result.stderr.strip().splitlines()[-3:]
            raise SlurmError(f"{' '.join(argv[:3])}: exit status {result.returncode}: {' / '.join(tail)}")
        return result

    def _text(self, argv: Sequence[str]) -> str:
        out = self.run(argv).stdout
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SlurmError(f"{argv[0]}: output is not UTF-8: {err}") from None

    def read(self) -> SlurmRead:
        """Nodes, then jobs (a job that lands meanwhile is seen on its node by the jobs' read)."""
        try:
            nodes = parse_sinfo(self._text(SINFO_ARGV))
            jobs = parse_squeue(self._text(SQUEUE_ARGV))
        except SlurmParseError as err:
            raise SlurmError(str(err)) from None
        if not nodes:
            raise SlurmError("sinfo listed no node: a hollow read (is the controller up, is PrivateData=cloud set?)")
        return SlurmRead(tuple(jobs), tuple(nodes))

    def update(self, names: Sequence[str], **fields: str) -> None:
        """``scontrol update nodename=<hostlist> key=value ...`` (each value checked by the caller)."""
        hosts = compress([check_node(n) for n in names])
        self.run(["scontrol", "update", f"nodename={hosts}", *(f"{k}={v}" for k, v in fields.items())])

    def set_address(self, name: str, address: str) -> None:
        """Tell Slurm where the node's slurmd is (a cloud node has no address until elb gives it one)."""
        if _ADDRESS.fullmatch(address) is None:
            raise SlurmError(f"refusing address {address!r} for {name}")
        self.update([name], nodeaddr=address, nodehostname=check_node(name))

    def drain(self, name: str, reason: str) -> None:
        self.update([name], state="DRAIN", reason=_check_reason(reason))

    def undrain(self, names: Sequence[str]) -> None:
        self.update(names, state="UNDRAIN")

    def power_down(self, names: Sequence[str], reason: str, *, force: bool = False) -> None:
        """Power nodes down: ``POWER_DOWN_ASAP`` (after their jobs) or, with ``force``,
        ``POWER_DOWN_FORCE`` (their jobs are requeued: for a node that never came up). Never
        ``DOWN``, which keeps a cloud node out of service for good."""
        state = "POWER_DOWN_FORCE" if force else "POWER_DOWN_ASAP"
        self.update(names, state=state, reason=_check_reason(reason))

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue JOB``: the job goes back to wait (Slurm refuses one submitted
        ``--no-requeue``)."""
        if _JOB.fullmatch(job_id) is None:
            raise SlurmError(f"refusing job id {job_id!r}")
        self.run(["scontrol", "requeue", job_id])

    def set_partitions(self, job: int, partitions: Sequence[str]) -> None:
        """``scontrol update jobid=JOB partition=P1,P2``: the job may run only there."""
        if job <= 0 or not partitions or any(_NODE.fullmatch(p) is None for p in partitions):
            raise SlurmError(f"refusing job {job} or partitions {list(partitions)!r}")
        self.run(["scontrol", "update", f"jobid={job}", f"partition={','.join(partitions)}"])

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


__all__: Sequence[str] = ("SlurmCommands", "SlurmError", "SlurmRead", "check_node")
