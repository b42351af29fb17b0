"""Slurm as elb's scheduler driver (``elb.core.scheduler.Scheduler``), behind Slurm's power saving.

Slurm decides *which* nodes its jobs need and asks for them by name: its ``ResumeProgram``,
``SuspendProgram`` and ``ResumeFailProgram`` (elb's ``elb-slurm-*`` programs) leave request
files that ``take_requests`` journals, one ask a node, the latest word for each node
(``Journal.add_asks``). Each read joins the open asks with what Slurm shows now
(``asks_now``, pure):

- a resume is a ``WANT`` while Slurm still has the node powering up (or elb has the node alive);
  one Slurm no longer wants (it shows the node powered down, up without elb, or does not know
  it), or older than Slurm's ``ResumeTimeout`` with no node of elb's behind it, is dropped with
  why and never acted on;
- a suspend is a ``RELEASE``, a resume-fail a ``RESET`` (take the node out if elb has it, and give
  it back to Slurm so it is not left down); a reset of a node elb has alive that Slurm shows
  running a job is dropped (answered once, the node kept: its slurmd registered late);
- a node of elb's Slurm shows powered down is ``gone``: removed like a release.

The neutral snapshot (``elb.schedulers.slurm.view``) has the nodes Slurm has up as hosts, a partition a
queue, the CPUs the slots. The drain is ``DRAIN``, a fresh read, the remove play, then
``POWER_DOWN_FORCE`` (and ``UNDRAIN``: the node can be asked for again); giving a node back is
``POWER_DOWN_FORCE`` (a job waiting for it is requeued, never killed: it had not started). Both
park the node (``nodeaddr=255.255.255.255``, ``commands.NO_INSTANCE``): no instance is behind it,
and slurmctld's messages to it fail at once. A spot interruption requeues the node's jobs
(``scontrol requeue``); a job bound to on-demand nodes is moved to the on-demand groups'
partitions.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from elb.core import yamlfile
from elb.core.attribution import JobUse
from elb.core.checks import Check
from elb.core.config import Config, parse_config
from elb.core.demand import DemandSplit, NotDemand
from elb.core.drivers import InitDraft, NodePlays, cloud_settings
from elb.core.gcpause import paused
from elb.core.groups import NodeGroups
from elb.core.interfaces import NodeSpec
from elb.core.model import ALIVE_STATES, Node, NodeState, Snapshot
from elb.core.planner import idle_kept
from elb.core.scheduler import (
    Ask,
    AskKind,
    DrainCheck,
    Dropped,
    NamePool,
    Peek,
    PoolName,
    Requeued,
    SchedulerError,
    SchedulerRead,
)
from elb.core.state import started_among
from elb.schedulers.slurm import conf as slurm_conf
from elb.schedulers.slurm import requests as slurm_requests
from elb.schedulers.slurm.commands import SlurmCommands, SlurmError, SlurmRead
from elb.schedulers.slurm.config import SlurmConfig, slurm_settings
from elb.schedulers.slurm.held import Columns, carried_columns, held_answers, line_reason
from elb.schedulers.slurm.parse import SlurmNode, compress, expand
from elb.schedulers.slurm.requests import RequestKind
from elb.schedulers.slurm.usage import read_slurm
from elb.schedulers.slurm.view import HostsMemo, jobs_of, node_up, snapshot
from elb.schedulers.waiting import WAIT_CAP, wait_until_up

log = logging.getLogger("elb.schedulers.slurm")

REGISTER_POLL = 1.0  # seconds between two reads of Slurm while a new node's slurmd registers
_KIND = {RequestKind.RESUME: AskKind.WANT, RequestKind.SUSPEND: AskKind.RELEASE, RequestKind.RESUME_FAIL: AskKind.RESET}
_REASON_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 _.,:;=()/+-")
# How long the programs wait for the daemon to take their requests before they fail, in polls
# (never less than a minute).
HEARTBEAT_POLLS = 3
# The variables of its own roles that a node's boot document carries (slurm_node_boot.yml runs
# slurm_node and munge). Of munge's only the path of the node's key: the key itself reaches the
# node over SSH from the master (slurm_admit_nodes.yml), never through the boot document.
BOOT_VARS = ("slurm_node_", "munge_key_path")


_REASON_LIMIT = 200  # the longest reason elb writes


def slurm_reason(text: str) -> str:
    """``text`` as a reason ``scontrol`` takes (letters, digits, spaces and ``_.,:;=()/+-``)."""
    cleaned = "".join(c if c in _REASON_CHARS else " " for c in f"elb: {text}").strip()
    return cleaned[:_REASON_LIMIT] or "elb"


HELD = "elb: held"  # how the reason of a name elb holds from Slurm's asks starts (``name_pool``)


def _held_reason(shown: str) -> str | None:
    """What a hold's reason says after ``HELD`` (None: Slurm shows it cut at elb's limit)."""
    if len(shown) >= _REASON_LIMIT:
        return None
    return shown.removeprefix(HELD).removeprefix(":").strip()


def name_pool(read: SlurmRead, records: Sequence[Node], partition_groups: Mapping[str, str]) -> NamePool:
    """The cloud nodes Slurm may power up for its next jobs: powered down and idle, no node of
    elb's behind them, or on their way down (``settling``: Slurm may pick one the moment it is
    down, and slurmctld drains a powering-down node, but an undrain of one makes it ask the node
    for its registration, so a held one is reopened only once down); ``held``: those elb
    drained with a reason that starts with ``HELD``; and
    ``held_alive``: elb's nodes drained with that reason (Slurm put a job on one as elb held it);
    while it holds any, ``wanted``: the names pending jobs wait for by name; ``pending``: the
    cloud nodes Slurm powers up with no node of elb's behind them (their asks may come later).
    A node drained for another reason (an admin's) is in none: elb never undrains it.

    An open name Slurm shows powered down and not responding is held (no reason of elb's) while
    a pending job waits for nodes (``_waiting_on_nodes``): slurmctld 22.05, restarted, brings back each
    powered-down cloud node drained and undrained since its last power-down so, and puts no job
    on it until an update touches it; room reopens it (an undrain, which does). The flag stays
    until the node powers up, so without a job waiting so it is left open as it is. Pure."""
    alive = {n.name for n in records if n.state in ALIVE_STATES}
    open_: list[PoolName] = []
    held: list[PoolName] = []
    held_alive: list[str] = []
    pending: list[str] = []
    settling: list[str] = []
    unusable: list[PoolName] = []  # open, powered down and not responding (see the docstring)
    for sn in read.nodes:
        if sn.name in alive:  # (most nodes: each test below but this one is of a node elb has not alive)
            if sn.reason.startswith(HELD) and sn.drain:
                held_alive.append(sn.name)
            continue
        if "cloud" not in sn.flags:
            continue
        if _coming_up(sn):
            pending.append(sn.name)
        if not (sn.powered_down or sn.powering_down) or sn.powering_up:
            continue
        name = PoolName(sn.name, partition_groups.get(sn.partitions[0]) if sn.partitions else None)
        if not sn.drain and sn.state == "idle":
            open_.append(name)
            if sn.powered_down and "not_responding" in sn.flags:
                unusable.append(name)
        elif sn.drain and sn.reason.startswith(HELD):
            held.append(PoolName(name.name, name.group, _held_reason(sn.reason)))
        else:
            continue
        if not sn.powered_down:
            settling.append(sn.name)
    if unusable and _waiting_on_nodes(read):
        stuck = set(unusable)
        open_ = [p for p in open_ if p not in stuck]
        held += unusable
    wanted = _named_by_jobs(read) if held else ()
    return NamePool(tuple(open_), tuple(held), tuple(held_alive), wanted, tuple(pending), tuple(settling))


def _coming_up(sn: SlurmNode) -> bool:
    """Slurm brings the node up for a job: asked to power up, powering up, or given a job while
    still shown powered down (the power up not yet begun)."""
    if sn.powering_down:
        return False
    if sn.powering_up or "power_up" in sn.flags:
        return True
    return sn.powered_down and sn.state in ("allocated", "mixed", "completing")


_UNAVAILABLE = "ReqNodeNotAvail, UnavailableNodes:"
# What squeue gives a pending job that waits for nodes: the ones it could run on are not
# available (by name, or for a job that names none), or too few of them are free.
_WAITING_ON_NODES = (_UNAVAILABLE, "Nodes required for job are DOWN, DRAINED or reserved", "Resources")


def _waiting_on_nodes(read: SlurmRead) -> bool:
    """Whether a pending job waits for nodes: Slurm shows the nodes it could run on unavailable,
    or too few free (``Resources``: a name Slurm will not use counts among those it lacks)."""
    return any(line[2] is not None and line_reason(line).startswith(_WAITING_ON_NODES) for line in read.lines)


def _named_by_jobs(read: SlurmRead) -> tuple[str, ...]:
    """The nodes pending jobs wait for by name that Slurm shows unavailable: a job submitted with
    ``-w`` to a node elb holds has the reason ``ReqNodeNotAvail, UnavailableNodes:node003``
    (slurmctld 22.05; a job that names no node waits with ``Nodes required for job are DOWN,
    DRAINED or reserved ...`` instead). Read only while elb holds names: one look at each
    squeue line's reason."""
    names: set[str] = set()
    for line in read.lines:
        if line[2] is None or (isinstance(line[0], str) and _UNAVAILABLE not in line[0]):
            continue  # not pending, or a pending line's text that names no node
        reason = line_reason(line)
        if reason.startswith(_UNAVAILABLE):
            try:
                names.update(expand(reason[len(_UNAVAILABLE) :]))
            except ValueError:
                continue  # a reason that names no hostlist: nothing to keep open for it
    return tuple(sorted(names))


def asks_now(
    asks: Sequence[Ask],
    read: SlurmRead,
    records: Sequence[Node],
    *,
    resume_timeout: float | None,
    register_wait: float,
    partition_groups: Mapping[str, str],
    now: float,
) -> tuple[tuple[Ask, ...], tuple[Dropped, ...], dict[str, str]]:
    """The open asks as elb acts on them, the ones dropped (with why), and the nodes of elb's
    Slurm has gone from (see the module's description). A want's deadline is when Slurm gives up
    on it (asked + ResumeTimeout) less ``register_wait``, the driver's own wait for the slurmd of
    a node just provisioned: by then elb must have the node provisioned. Pure."""
    by_name = {n.name: n for n in read.nodes}
    alive = {n.name: n for n in records if n.state in ALIVE_STATES}
    kept: list[Ask] = []
    dropped: list[Dropped] = []
    for a in asks:
        sn = by_name.get(a.node)
        if sn is None:
            dropped.append(Dropped(a, f"Slurm does not know node {a.node}"))
            continue
        group = partition_groups.get(sn.partitions[0]) if sn.partitions else None
        wants = a.kind is AskKind.WANT
        deadline = a.since + resume_timeout - register_wait if wants and resume_timeout is not None else None
        ask = Ask(a.node, a.kind, a.since, a.detail, group, a.attempts, a.retry_at, deadline)
        why = _why_dropped(ask, sn, read, alive=a.node in alive, resume_timeout=resume_timeout, now=now)
        if why is None:
            kept.append(ask)
        else:
            dropped.append(Dropped(ask, why))
    return tuple(kept), tuple(dropped), _gone_from_slurm(alive, by_name)


def _why_dropped(
    ask: Ask, sn: SlurmNode, read: SlurmRead, *, alive: bool, resume_timeout: float | None, now: float
) -> str | None:
    """Why elb drops an ask Slurm's node ``sn`` is known for, or None to act on it: a reset of a
    node that runs a job after all; a want Slurm gave up on or no longer has (``alive``: elb's
    node for it is up)."""
    # (The jobs on the node are looked for only for a reset: a scan of every job.)
    running = (
        [j.job_id for j in read.jobs_on(ask.node) if not j.pending and not j.configuring]
        if ask.kind is AskKind.RESET
        else []
    )
    if alive and running:
        # Its slurmd registered after all and a job runs there: taking it out would drain it,
        # find the job, undrain it, and again each pass the ask stays open.
        return f"Slurm shows it running job {', '.join(running)}: kept, not taken out"
    if ask.kind is not AskKind.WANT or alive:
        return None
    age = now - ask.since
    if resume_timeout is not None and age > resume_timeout:
        return f"asked {age:.0f} s ago, past Slurm's ResumeTimeout ({resume_timeout:.0f} s): Slurm gave up on it"
    if not sn.powering_up:
        return f"Slurm no longer wants it (it shows {sn.shown})"
    return None


def _gone_from_slurm(alive: Mapping[str, Node], by_name: Mapping[str, SlurmNode]) -> dict[str, str]:
    """elb's nodes, booted, that Slurm has powered down (or is powering down while elb drains
    them), each with what Slurm shows."""
    gone: dict[str, str] = {}
    for name, n in alive.items():
        sn = by_name.get(name)
        if sn is None:
            continue
        if (sn.powered_down or (n.state is NodeState.DRAINING and sn.powering_down)) and not n.state.booting:
            gone[name] = f"Slurm has it {sn.shown}"
    return gone


class RequestJournal(Protocol):
    """What the driver keeps in the journal (``elb.service.journal.Journal``): Slurm's requests
    and each node's latest ask."""

    def add_slurm_request(self, kind: str, nodes: str, asked_at: float, source: str, now: float) -> bool: ...

    def add_asks(self, kind: AskKind, nodes: Sequence[str], since: float, detail: str, now: float) -> int: ...

    def asks(self, *, open_only: bool = True) -> list[Ask]: ...


class SlurmClient(Protocol):
    """What ``Slurm`` needs of a Slurm client (``SlurmCommands``, or a stand-in in tests)."""

    def read(self, *, mine: object = None) -> SlurmRead: ...

    def set_address(self, name: str, address: str) -> None: ...

    def set_addresses(self, pairs: Sequence[tuple[str, str]]) -> None: ...

    def drain(self, name: str, reason: str) -> None: ...

    def drain_all(self, names: Sequence[str], reason: str) -> None: ...

    def undrain(self, names: Sequence[str]) -> None: ...

    def power_down(self, names: Sequence[str], reason: str, *, force: bool = False, park: bool = False) -> None: ...

    def park(self, names: Sequence[str]) -> None: ...

    def requeue(self, job_id: str) -> None: ...

    def set_partitions(self, job: int, partitions: Sequence[str]) -> None: ...

    def resume_timeout(self) -> float: ...


class Slurm:
    """Slurm through ``SlurmCommands`` (``sinfo``, ``squeue``, ``scontrol``) and the request
    directory its power saving programs write."""

    name = "Slurm"

    def __init__(self, config: Config, journal: RequestJournal, commands: SlurmClient | None = None) -> None:
        self.config = config
        self.journal = journal
        settings = slurm_settings(config)
        self.slurm: SlurmClient = commands if commands is not None else SlurmCommands(settings)
        self.add_playbook = settings.add_playbook
        self.remove_playbook = settings.remove_playbook
        # provision.mode boot: the master's part of adding nodes that configure themselves at boot.
        self.admit_playbook: str | None = settings.admit_playbook
        self._resume_timeout: float | None = None
        self._resume_timeout_read = False
        self._last: tuple[Snapshot, Columns] | None = None  # the last snapshot, its read's lines' columns
        self._due_since: dict[str, float] = {}  # when each job was first read due (``held_answers``)
        self._hosts = HostsMemo()  # the last snapshot's hosts, by their nodes

    # -- reads -------------------------------------------------------------------------------
    def take_requests(self, now: float) -> tuple[str, ...]:
        """Journal the request files (each node's ask; the request kept in ``slurm_requests``),
        remove them, and touch the heartbeat the resume program checks."""
        directory = slurm_settings(self.config).requests
        found = slurm_requests.pending(directory)
        lines: list[str] = []
        for r in found.requests:
            hostlist = compress(r.nodes)
            if self.journal.add_slurm_request(r.kind.value, hostlist, r.time, r.source, now):
                self.journal.add_asks(_KIND[r.kind], r.nodes, r.time, r.detail, now)
                lines.append(f"Slurm asks to {r.kind.value} {hostlist}{f' ({r.detail})' if r.detail else ''}")
            slurm_requests.done(directory, r)
        lines += [f"a request file elb cannot read was set aside: {bad}" for bad in found.bad]
        stale_after = max(60.0, HEARTBEAT_POLLS * self.config.poll_interval)
        slurm_requests.touch_heartbeat(directory, now, stale_after)
        return tuple(lines)

    def peek(self, timeout: float) -> Peek:
        """The request files Slurm's power saving left (``requests.waiting``): a new one is a new
        ask, and the pass takes it. Not ``squeue -t PD``: elb brings up the nodes Slurm asks for,
        so a job that waits without a request is none of its business, and a listing of a local
        directory runs no command (``timeout`` bounds nothing here)."""
        directory = slurm_settings(self.config).requests
        try:
            return Peek(slurm_requests.waiting(directory))
        except OSError as err:
            raise SchedulerError(f"listing {directory}: {err.strerror or err}") from err

    def read(self, records: Sequence[Node], now: float) -> SchedulerRead:
        # The last read's lines handed back for this read to change into its own: the last read is
        # forgotten first (a read that fails leaves none, not one whose lines changed).
        last, self._last = self._last[1] if self._last is not None else None, None
        with paused(keep=True):  # the read's and the snapshot's jobs kept at once (``elb.core.gcpause``)
            read = self._read(mine=last.lines if last is not None else None)
            parts = carried_columns(read.lines, read.splice, last)
            snap = snapshot((), read.nodes, now, neutral=parts.jobs, hosts=self._hosts)
            started_among(snap.jobs, parts.not_pending())  # (the pass's busy hosts and joins scan no pending job)
            self._last = snap, parts
        partition_groups = slurm_settings(self.config).partition_groups
        kept, dropped, gone = asks_now(
            self.journal.asks(),
            read,
            records,
            resume_timeout=self.resume_timeout(),
            register_wait=self._register_wait(),
            partition_groups=partition_groups,
            now=now,
        )
        names = name_pool(read, records, partition_groups)
        change = parts.change if parts.change is not None and parts.change.after is snap.jobs else None
        return SchedulerRead(snap, kept, dropped, gone, names, change)

    def resume_timeout(self) -> float | None:
        """Slurm's ``ResumeTimeout``, read once (None: it could not be read; no ask is dropped for its age)."""
        if not self._resume_timeout_read:
            self._resume_timeout_read = True
            try:
                self._resume_timeout = self.slurm.resume_timeout()
            except SlurmError as err:
                log.warning("cannot read Slurm's ResumeTimeout (asks are not dropped for their age): %s", err)
        return self._resume_timeout

    def demand(self, read: SchedulerRead, records: Sequence[Node], slots: int | None) -> DemandSplit:
        """Slurm's pending jobs waiting for nodes (its others left out, with Slurm's reason:
        ``elb.schedulers.slurm.held``; of a snapshot another driver read, "held by Slurm": its
        squeue lines are not here); Slurm names the nodes, so no job is matched against the groups."""
        snap = read.snapshot
        if self._last is None or self._last[0] is not snap:  # another driver's read: no squeue line to read
            return DemandSplit(snap, tuple(NotDemand(job, "held by Slurm", held=True) for job in snap.held))
        with paused(keep=True):  # the answers kept with the demand; the lists as long as the queue gone by the end
            return DemandSplit(snap, held_answers(self._last[1], snap.now, self._due_since))

    # -- the drain and the bring-up ----------------------------------------------------------
    def _read(self, *, mine: object = None) -> SlurmRead:
        try:
            return self.slurm.read(mine=mine)
        except SlurmError as err:
            raise SchedulerError(str(err), transient=err.transient) from err

    def disable_host(self, host: str, reason: str) -> None:
        self._scontrol(lambda: self.slurm.drain(host, slurm_reason(reason)))

    def enable_host(self, host: str) -> None:
        self._scontrol(lambda: self.slurm.undrain([host]))

    def drain_checks(self, hosts: Sequence[str]) -> dict[str, DrainCheck]:
        read = self._read()
        out = {}
        for host in hosts:
            sn = read.node(host)
            if sn is None:
                continue
            jobs = tuple(j for job in read.jobs_on(host) for j in jobs_of(job) if j.host == host)
            out[host] = DrainCheck(jobs, 0 if jobs else sn.cpus_allocated)
        return out

    def listed(self, hosts: Sequence[str]) -> frozenset[str]:
        read = self._read()
        return frozenset(h for h in hosts if (sn := read.node(h)) is not None and node_up(sn))

    def prepare(self, nodes: Sequence[NodeSpec]) -> dict[str, SchedulerError]:
        """Each node's address, a hundred nodes a command (``set_addresses``). A batch Slurm did
        not answer fails no node (each gets the transient error); one Slurm refused is tried a
        node at a time, so that only the nodes Slurm refuses fail."""
        try:
            self.slurm.set_addresses([(n.name, n.private_ip) for n in nodes])
            return {}
        except SlurmError as err:
            if err.transient or len(nodes) == 1:
                return {n.name: SchedulerError(str(err), transient=err.transient) for n in nodes}
        errors: dict[str, SchedulerError] = {}
        for n in nodes:
            try:
                self.slurm.set_address(n.name, n.private_ip)
            except SlurmError as err:
                errors[n.name] = SchedulerError(str(err), transient=err.transient)
        return errors

    def _register_wait(self) -> float:
        """How long ``await_registered`` waits for a node's slurmd: ``slurm.register_timeout``
        after the add play, ``provision.boot.timeout`` after the admit play (``provision.mode:
        boot``)."""
        if self.config.provision.mode == "boot":
            return self.config.provision.boot.timeout
        return slurm_settings(self.config).register_timeout

    def await_registered(self, names: Sequence[str], stopping: threading.Event) -> dict[str, str] | None:
        """Wait until Slurm has each node up (its slurmd registered), for at most
        ``slurm.register_timeout`` after the add play, or ``provision.boot.timeout`` after the
        admit play of nodes that configure themselves at boot (``provision.mode: boot``): a slurmd
        that never registers would hold its node, and the job waiting for it, until Slurm's
        ResumeTimeout. The timeout counts the time Slurm answered in (``wait_until_up``): a busy
        slurmctld delays a registration, which slurmd retries by itself; a wait that ends with
        nodes not up while Slurm did not answer for a good part of it raises the transient
        ``SchedulerError``, for the caller to wait again later."""
        boot = self.config.provision.mode == "boot"
        timeout = self._register_wait()

        def up_of(waiting: set[str], seen: dict[str, str]) -> list[str]:
            try:
                read = self.slurm.read()
            except SlurmError as err:
                raise SchedulerError(f"reading Slurm: {err}", transient=err.transient) from err
            return self._up_in(read, waiting, seen)

        return wait_until_up(
            names,
            up_of,
            timeout=timeout,
            poll=REGISTER_POLL,
            stopping=stopping,
            log=log,
            since="its admission" if boot else "its play",
            failed=lambda shown: (
                f"it did not configure itself within {timeout:g} s of its admission (Slurm: {shown}; "
                "its boot's output is /var/log/elb-boot.log on the node)"
                if boot
                else f"its slurmd did not register within {timeout:g} s of its play (Slurm: {shown})"
            ),
        )

    @staticmethod
    def _up_in(read: SlurmRead, names: set[str], seen: dict[str, str]) -> list[str]:
        """The ``names`` Slurm has up in ``read`` (their slurmd registered); what it shows of
        the others goes into ``seen``."""
        by_name = {n.name: n for n in read.nodes}
        up = []
        for name in sorted(names):
            sn = by_name.get(name)
            if sn is not None and node_up(sn):
                up.append(name)
            else:
                seen[name] = "not in Slurm" if sn is None else sn.shown
        return up

    def out_of_service(self, reasons: Mapping[str, str]) -> None:
        """Power the nodes down in Slurm unless Slurm does already: a cloud node powered down can
        be asked for again. One read, then one ``scontrol`` for the power down; a power down that
        fails leaves them drained (no job lands on a node whose remove play went through). The
        power down parks each node (``nodeaddr=NO_INSTANCE nodehostname=NAME``), and so does one
        ``scontrol`` for the ones Slurm powers down already: slurmctld keeps no address of an
        instance that is gone (another machine's, later) to send its messages to, and resolves no
        name (whose hosts line the remove play took) to reach it.

        The nodes powered down here are not undrained: Slurm clears their drain when it suspends
        them (``SlurmctldParameters=idle_on_node_suspend``, which ``elb validate`` requires), and
        an undrain of a node that is powering down makes slurmctld ask the node for its
        registration. Only a drained node Slurm had powered down before (its suspend, and the
        drain's clearing, came first) is undrained, one ``scontrol`` for them. Slurm keeps the
        reason of a node alone, or of nodes that share it; nodes with reasons of their own share
        one that points at ``elb history`` (a command per reason would make a batch slow when
        ``scontrol`` is)."""
        read = self._read()
        shown = [(host, sn) for host in reasons if (sn := read.node(host)) is not None]
        down = [host for host, sn in shown if not (sn.powered_down or sn.powering_down)]
        going = [host for host, sn in shown if sn.powered_down or sn.powering_down]
        drained = [host for host, sn in shown if sn.drain and sn.powered_down and not sn.powering_down]
        whys = {reasons[h] for h in down}
        why = whys.pop() if len(whys) == 1 else f"{len(down)} nodes out of service; why: elb history NODE"
        if down:
            self._scontrol(lambda: self.slurm.power_down(down, slurm_reason(why), force=True, park=True))
        if going:
            self._scontrol(lambda: self.slurm.park(going))
        if drained:
            self._scontrol(lambda: self.slurm.undrain(drained))

    def before_launch(self, names: Sequence[str]) -> None:
        """Park the nodes elb is about to launch (``ParksNodes``): a give-back of the same pass
        requeues a job Slurm put on them too, and its kill reaches them before their instances
        have an address in Slurm (``prepare`` sets it)."""
        self._scontrol(lambda: self.slurm.park(list(names)))

    def resumed(self, host: str) -> None:
        return None  # its slurmd registers by itself when the instance starts

    def release(self, hosts: Sequence[str], reason: str) -> None:
        """Give back nodes elb did not bring up: park them all, then ``POWER_DOWN_FORCE`` (the jobs
        waiting for them are requeued) with the reason. The requeue of a job makes slurmctld send
        its kill (``REQUEST_TERMINATE_JOB``) to every node of the job at once; parked, the send to
        these fails at once, where each node's name (its address until elb sets one) would be
        looked up, for 10 s a name on Debian's slurmctld, which answers no command meanwhile. All
        are parked first: the power down of the first hundred would requeue a job that has nodes
        in the next hundred too."""
        names = list(hosts)
        self._scontrol(lambda: self.slurm.park(names))
        self._scontrol(lambda: self.slurm.power_down(names, slurm_reason(reason), force=True))

    def hold(self, names: Sequence[str], reason: str) -> None:
        """Drain powered-down nodes (``HoldsNames``): Slurm puts no job on a drained node, so it
        asks for none of them; the reason starts with ``HELD`` (``name_pool`` reads them back)."""
        why = slurm_reason(f"held: {reason}")
        self._scontrol(lambda: self.slurm.drain_all(list(names), why))

    def reopen(self, names: Sequence[str]) -> None:
        """Undrain nodes elb held (``HoldsNames``): Slurm may power them up for its jobs again."""
        self._scontrol(lambda: self.slurm.undrain(list(names)))

    def requeue(self, host: str) -> Requeued:
        read = self._read()
        pushed: list[str] = []
        refused: list[int] = []
        for job in read.jobs_on(host):
            if job.pending:
                continue
            try:
                self.slurm.requeue(job.job_id)
            except SlurmError as err:
                log.warning("%s: job %s not requeued: %s", host, job.job_id, err)
                refused.append(int(job.job_id.split("_", 1)[0]))
            else:
                pushed.append(job.job_id.replace("_", "."))
        return Requeued(tuple(pushed), tuple(refused))

    def bind_on_demand(self, job: int, hard_requests: Mapping[str, str], groups: NodeGroups) -> str:
        """Move the job to the partitions of the on-demand groups (``slurm.partition_groups``):
        the partition list is the binding, ``hard_requests`` is not used."""
        on_demand = {g.name for g in groups.groups if g.market == "on-demand"}
        partitions = sorted(p for p, g in slurm_settings(self.config).partition_groups.items() if g in on_demand)
        if not partitions:
            raise SchedulerError("no partition of an on-demand node group (slurm.partition_groups)")
        self._scontrol(lambda: self.slurm.set_partitions(job, partitions))
        return f"it now runs only in {', '.join(partitions)}, the partitions of the on-demand node groups"

    @staticmethod
    def _scontrol(call: Callable[[], None]) -> None:
        try:
            call()
        except SlurmError as err:
            raise SchedulerError(str(err), transient=err.transient) from err


def node_plays(cfg: Config) -> NodePlays:
    """What Slurm's nodes need from the provisioner: ``slurm.boot_playbook`` and its roles'
    variables there, the master's plays (``slurm.*_playbook``). Its plays take no settings of
    elb's under their roles' names, nor a node's from its group: those of ``slurm`` are the
    driver's own (the playbooks' names, the controller's commands)."""
    slurm = slurm_settings(cfg)
    return NodePlays(
        boot_playbook=slurm.boot_playbook,
        boot_vars=BOOT_VARS,
        master_playbooks=(slurm.add_playbook, slurm.remove_playbook),
        admit_playbooks=(slurm.admit_playbook,),
    )


def command_timeout(cfg: Config) -> tuple[float, str]:
    """The time-out of one Slurm command, and its config key."""
    return slurm_settings(cfg).timeout, "slurm.timeout"


def job_uses(cfg: Config, since: float, until: float, accounting: Path | None = None) -> list[JobUse]:
    """The job uses in [since, until) that ``sacct`` reports (``accounting``: Grid Engine's file,
    not read here)."""
    return read_slurm(cfg, since, until)


def accounting_note(cfg: Config, accounting: Path | None = None) -> str | None:
    """``sacct`` answers for a new cluster too: nothing to say."""
    return None


def checks(cfg: Config) -> Iterator[Check]:
    """``elb validate``'s checks of Slurm: squeue and sinfo answer (sinfo lists nodes), slurm.conf
    as the controller has it (``conf_checks``), elb can read Slurm's request directory. (Its
    playbooks are ``node_plays``'s, which validate's playbook check looks for.)"""
    commands = SlurmCommands(slurm_settings(cfg))
    try:
        read = commands.read()
    except SlurmError as err:
        yield Check("Slurm", False, str(err), "set slurm.conf and slurm.bin_dir for this cluster")
    else:
        cloud = sum(1 for n in read.nodes if "cloud" in n.flags)
        yield Check("Slurm", True, f"sinfo lists {len(read.nodes)} node(s), {cloud} of them cloud nodes")
        try:
            facts = slurm_conf.read_facts(commands)
        except SlurmError as err:
            yield Check(
                "slurm.conf",
                False,
                f"cannot be read: {err}",
                "make scontrol show config, partition and node answer (slurm.conf, slurm.bin_dir)",
            )
        else:
            yield from conf_checks(cfg, facts)
    requests = slurm_settings(cfg).requests
    if not requests.is_dir():
        yield Check(
            "Slurm requests",
            False,
            f"{requests} is not a directory",
            "create it (owner root, group of SlurmUser, mode 2770): see docs/slurm.md",
        )
    else:
        yield Check("Slurm requests", True, str(requests))


# slurm.conf's program keys and the elb program each must run (pyproject's scripts).
PROGRAM_KEYS = {
    "ResumeProgram": "elb-slurm-resume",
    "SuspendProgram": "elb-slurm-suspend",
    "ResumeFailProgram": "elb-slurm-resume-fail",
}
PROGRAM_DIR = Path("/usr/local/bin")  # where the fixes say the programs are when elb's are not found
SCRIPT_BYTES = 65536  # the most of a wrapper script read to find the program it runs
SUSPEND_TIME = 86400  # what docs/slurm.md recommends: Slurm's idle rule only as a safety net


def _runs(text: str, program: str) -> bool:
    """Whether a wrapper script's ``text`` runs elb's ``program`` (``elb-slurm-resume``, ``elb slurm
    resume``, or the module ``elb.schedulers.slurm.programs resume``)."""
    kind = program.removeprefix("elb-slurm-")
    pattern = rf"(elb-slurm-{kind}|elb\s+slurm\s+{kind}|elb\.schedulers\.slurm\.programs\s+{kind})(?![-\w])"
    return re.search(pattern, text) is not None


def read_script(path: str) -> str | None:
    """The start of the file slurm.conf names (a wrapper script), or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(SCRIPT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def program_path(name: str) -> str:
    """Where elb's program ``name`` is: on PATH, beside this Python, else ``PROGRAM_DIR``."""
    beside = Path(sys.executable).parent / name
    return shutil.which(name) or (str(beside) if beside.is_file() else str(PROGRAM_DIR / name))


def _group_sizes(cfg: Config) -> dict[str, tuple[int | None, str | None, int]]:
    """Each node group's slots, memory and max_nodes (without ``node_groups``: the one group,
    ``default``, of ``policy.slots_per_node``)."""
    if cfg.node_groups is None:
        return {"default": (cfg.policy.slots_per_node, None, cfg.policy.max_nodes)}
    return {g.name: (g.slots, g.memory, g.max_nodes) for g in cfg.node_groups}


def node_group(cfg: Config, facts: slurm_conf.SlurmFacts, node: slurm_conf.NodeConf) -> str:
    """The node group of a cloud node: its first partition's in ``slurm.partition_groups``, else the first group."""
    first = cfg.node_groups[0].name if cfg.node_groups else "default"
    partitions = node.partitions or tuple(p.name for p in facts.partitions if node.name in p.nodes)
    groups = slurm_settings(cfg).partition_groups
    for p in partitions:
        if p in groups:
            return groups[p]
    return first


def conf_checks(
    cfg: Config, facts: slurm_conf.SlurmFacts, *, script: Callable[[str], str | None] = read_script
) -> Iterator[Check]:
    """slurm.conf's facts against this config, each a ``Check`` whose fix is the slurm.conf line
    to add or change (``script``: a wrapper's text, for a program not named like elb's)."""
    c = facts.config
    yield from _check_programs(c, script)
    yield _check_resume_timeout(cfg, c)
    yield _check_suspend_time(cfg, c)
    yield _check_list(c, "PrivateData", "cloud", "sinfo and scontrol show the powered-down cloud nodes")
    yield _check_list(
        c, "SlurmctldParameters", "idle_on_node_suspend", "a node Slurm powers down is idle, not down, when it returns"
    )
    yield from _check_node_count(cfg, facts)
    yield from _check_node_sizes(cfg, facts)


def _check_programs(c: Mapping[str, str], script: Callable[[str], str | None]) -> Iterator[Check]:
    wrong = []
    for key, program in PROGRAM_KEYS.items():
        value = c.get(key, "").strip()
        if value in ("", "(null)"):
            wrong.append((key, program, "not set"))
            continue
        if Path(value).name == program:
            continue
        text = script(value)
        if text is None or not _runs(text, program):
            why = "cannot be read" if text is None else f"runs no {program}"
            wrong.append((key, program, f"{value} ({why})"))
    if not wrong:
        yield Check("Slurm programs", True, ", ".join(f"{k}={c[k]}" for k in PROGRAM_KEYS))
        return
    for key, program, why in wrong:
        yield Check("Slurm programs", False, f"{key}: {why}", f"{key}={program_path(program)}")


def _seconds(c: Mapping[str, str], key: str) -> tuple[float | None, str | None]:
    """A time of ``scontrol show config`` and, when it is not one, why."""
    try:
        return slurm_conf.seconds(c.get(key)), None
    except SlurmError as err:
        return None, str(err)


def _check_resume_timeout(cfg: Config, c: Mapping[str, str]) -> Check:
    """Above the launch, the play and the wait for the slurmd: ``slurm.register_timeout`` after
    the add play, ``provision.boot.timeout`` after the admit play of nodes that configure
    themselves at boot. That wait counts only the time Slurm answered, up to ``WAIT_CAP`` times
    its timeout on the clock (``elb.schedulers.waiting``), while ResumeTimeout runs on the clock:
    below boot + play + that cap, a slow slurmctld may have Slurm give up on a node (and run
    ResumeFailProgram) that elb still waits for, a warning; below the plain sum, a failure. The
    fix is above the cap."""
    boot, play = cloud_settings(cfg).boot_timeout, cfg.provision.timeout
    if cfg.provision.mode == "boot":
        register, waited = cfg.provision.boot.timeout, "provision.boot.timeout"
    else:
        register, waited = slurm_settings(cfg).register_timeout, "slurm.register_timeout"
    need, longest = boot + play + register, boot + play + WAIT_CAP * register
    parts = f"boot_timeout {boot:g} s + provision.timeout {play:g} s + {waited} {register:g} s"
    value, bad = _seconds(c, "ResumeTimeout")
    line = f"ResumeTimeout={int(-(-(longest + 60) // 60) * 60)}"
    if bad is not None or value is None:
        return Check("Slurm ResumeTimeout", False, bad or "not set", line)
    if play == 0:
        return Check(
            "Slurm ResumeTimeout",
            True,
            f"{value:g} s; provision.timeout is 0 (no limit): a play may outlast it",
            "set provision.timeout, then ResumeTimeout above boot, play and registration",
            warning=True,
        )
    if value <= need:
        return Check(
            "Slurm ResumeTimeout",
            False,
            f"{value:g} s is not above {need:g} s ({parts}): Slurm gives up on a node elb still brings up",
            line,
        )
    if value <= longest:
        return Check(
            "Slurm ResumeTimeout",
            True,
            f"{value:g} s is above {need:g} s ({parts}) but not above {longest:g} s (the same with {WAIT_CAP:g} x "
            f"{waited} {register:g} s): while slurmctld answers slowly elb waits that long for a registration, and "
            "Slurm may give up first (ResumeFailProgram for a node elb still waits for)",
            line,
            warning=True,
        )
    return Check(
        "Slurm ResumeTimeout",
        True,
        f"{value:g} s, above {longest:g} s ({parts}, the wait up to {WAIT_CAP:g} x while slurmctld answers slowly)",
    )


def _check_suspend_time(cfg: Config, c: Mapping[str, str]) -> Check:
    kept = idle_kept(cfg) + cfg.poll_interval
    value, bad = _seconds(c, "SuspendTime")
    line = f"SuspendTime={max(SUSPEND_TIME, int(kept) + 60)}"
    if bad is not None:
        return Check("Slurm SuspendTime", False, bad, line)
    if value is None:
        return Check("Slurm SuspendTime", False, "INFINITE: power saving is off, Slurm asks elb for no node", line)
    if value <= kept:
        return Check(
            "Slurm SuspendTime",
            False,
            f"{value:g} s: Slurm powers an idle node down before elb's own rule ({kept:g} s with a poll) decides",
            line,
        )
    return Check(
        "Slurm SuspendTime", True, f"{value:g} s, longer than elb keeps an idle node ({kept:g} s): elb decides"
    )


def _check_list(c: Mapping[str, str], key: str, word: str, why: str) -> Check:
    have = c.get(key, "")
    found = slurm_conf.words(have)
    if word in found:
        return Check(f"Slurm {key}", True, f"{have}")
    line = f"{key}={','.join([*sorted(found), word])}"
    return Check(f"Slurm {key}", False, f"{word} not in {have or 'it'} (so that {why})", line)


def _check_node_count(cfg: Config, facts: slurm_conf.SlurmFacts) -> Iterator[Check]:
    nodes = facts.cloud_nodes()
    total = cfg.policy.max_nodes
    line = f"NodeName={cfg.cluster.node_prefix}[001-{total:03d}] State=CLOUD CPUs=... RealMemory=..."
    hidden = "" if "cloud" in slurm_conf.words(facts.config.get("PrivateData")) else " (without PrivateData=cloud "
    hidden += "Slurm shows no powered-down cloud node)" if hidden else ""
    if len(nodes) < total:
        yield Check(
            "Slurm cloud nodes",
            False,
            f"{len(nodes)} State=CLOUD node(s) for policy.max_nodes {total}: Slurm never asks for more{hidden}",
            f"{line} (or lower policy.max_nodes to {len(nodes)})",
        )
    elif len(nodes) > total:
        yield Check(
            "Slurm cloud nodes",
            True,
            f"{len(nodes)} State=CLOUD nodes for policy.max_nodes {total}: elb drains the powered-down ones past "
            f"its room (reason {HELD!r}...), so Slurm puts no job on a node elb would give back",
        )
    else:
        yield Check("Slurm cloud nodes", True, f"{len(nodes)} State=CLOUD nodes, policy.max_nodes {total}")
    if cfg.node_groups is None:
        return
    counts: dict[str, int] = {}
    for n in nodes:
        group = node_group(cfg, facts, n)
        counts[group] = counts.get(group, 0) + 1
    for g in cfg.node_groups:
        if counts.get(g.name, 0) < g.max_nodes:
            yield Check(
                "Slurm cloud nodes",
                False,
                f"group {g.name}: {counts.get(g.name, 0)} cloud node(s) in its partitions, max_nodes {g.max_nodes}",
                "more State=CLOUD nodes in its partitions (slurm.partition_groups), or lower its max_nodes",
            )


def _check_node_sizes(cfg: Config, facts: slurm_conf.SlurmFacts) -> Iterator[Check]:
    sizes = _group_sizes(cfg)
    too_many: dict[tuple[str, int], list[str]] = {}
    too_much: dict[tuple[str, int], list[str]] = {}
    unknown = []
    for n in facts.cloud_nodes():
        group = node_group(cfg, facts, n)
        slots, memory, _ = sizes.get(group, (None, None, 0))
        if slots is None:
            unknown.append(n.name)
        elif n.cpus is not None and n.cpus > slots:
            too_many.setdefault((group, slots), []).append(n.name)
        if memory is not None and n.memory_mb is not None:
            mib = int(slurm_conf.memory_bytes(memory) // 2**20)
            if n.memory_mb > mib:
                too_much.setdefault((group, mib), []).append(n.name)
    for (group, slots), names in too_many.items():
        yield Check(
            "Slurm node sizes",
            False,
            f"{compress(names)}: Slurm counts more CPUs than a node of group {group} has ({slots} slots): "
            "a job sized to them never runs there",
            f"NodeName={compress(names)} CPUs={slots}",
        )
    for (group, mib), names in too_much.items():
        yield Check(
            "Slurm node sizes",
            False,
            f"{compress(names)}: RealMemory above what a node of group {group} has (memory {mib} MiB)",
            f"NodeName={compress(names)} RealMemory={mib}",
        )
    if unknown and not too_many and not too_much:
        yield Check(
            "Slurm node sizes",
            True,
            f"{compress(unknown)}: not checked: policy.slots_per_node is not set",
            "set policy.slots_per_node (or node_groups) to the CPUs of the instance type",
            warning=True,
        )
    elif not too_many and not too_much:
        yield Check("Slurm node sizes", True, "no cloud node larger in CPUs or memory than its group's nodes")


def conf_missing(text: str, facts: slurm_conf.SlurmFacts) -> list[Check]:
    """The checks of slurm.conf that fail with the config ``text`` (``elb init``'s): the lines the
    cluster still lacks."""
    cfg = parse_config(yamlfile.load(text).data, "the written config")
    return [c for c in conf_checks(cfg, facts) if not c.ok]


TITLE = "Slurm"
# Slurm's own settings: the config file's ``slurm:``.
CONFIG_SECTION = SlurmConfig


def _init_config(options: Any) -> SlurmConfig:
    return SlurmConfig(conf=options.slurm_conf, bin_dir=options.slurm_bin_dir, timeout=10)


def init_answers(options: Any) -> str | None:
    """Whether ``scontrol`` answers here (``--slurm-conf``, ``--slurm-bin-dir``)."""
    from elb.schedulers.slurm.init import read_slurm  # noqa: PLC0415 (elb init's only)

    facts, _ = read_slurm(_init_config(options))
    return None if facts is None else "Slurm's scontrol answers"


def init(options: Any, cloud: Sequence[str], tail: Sequence[str]) -> InitDraft:
    """``elb init``'s Slurm config (``elb.schedulers.slurm.init``), what could not be read, and the
    slurm.conf lines the cluster still lacks."""
    from elb.schedulers.slurm.init import gather, render  # noqa: PLC0415 (elb init's only)

    facts = gather(slurm_config=_init_config(options))
    text = render(facts, cloud, tail)
    notes = (f"Slurm: {facts.slurm_problem}",) if facts.slurm_problem else ()
    after: list[str] = []
    if facts.slurm is not None:
        lacking = conf_missing(text, facts.slurm)
        if lacking:
            after.append("slurm.conf still needs (then scontrol reconfigure, or restart slurmctld):")
            after += [f"  {check.fix}    # {' '.join(check.detail.split())}" for check in lacking]
        else:
            after.append("slurm.conf has what elb needs")
    return InitDraft(text, notes, tuple(after))


__all__: Sequence[str] = (
    "HEARTBEAT_POLLS",
    "Slurm",
    "asks_now",
    "checks",
    "conf_checks",
    "conf_missing",
    "init",
    "init_answers",
    "slurm_reason",
)


def make(cfg: Config, journal: RequestJournal) -> Slurm:
    """The Slurm driver of ``cfg`` (``elb.core.registry.SchedulerModule``), its asks kept in ``journal``."""
    return Slurm(cfg, journal)
