"""Grid Engine as elb's scheduler driver (``elb.core.scheduler.Scheduler``).

Grid Engine never names the nodes it wants: elb sizes the demand from the waiting jobs
(``elb.schedulers.sge.servable``: each job matched against what a new node of each group offers) and names the
nodes it launches. A read is refused unless it is whole (``elb.schedulers.sge.readcheck``); the drain is
``qmod -d``, a fresh ``qstat`` of the host, then ``remove_node.yml``; a spot interruption
requeues the host's rerunnable jobs (``qmod -rq``); a job bound to on-demand nodes gets a hard
request only they offer (``qalter -l``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from elb.core.attribution import JobUse
from elb.core.checks import Check
from elb.core.config import Config
from elb.core.demand import DemandSplit
from elb.core.drivers import InitDraft, NodePlays
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.interfaces import NodeSpec
from elb.core.model import Job, Node, Snapshot
from elb.core.scheduler import DrainCheck, Peek, Requeued, SchedulerError, SchedulerRead
from elb.schedulers.sge.commands import Rescheduled, SgeCommands, WholeReader, read_whole
from elb.schedulers.sge.config import SgeConfig, sge_settings
from elb.schedulers.sge.demand import Placements
from elb.schedulers.sge.errors import SgeError, SgeTimeoutError, hint
from elb.schedulers.sge.groupoptions import SgeGroupOptions, sge_options
from elb.schedulers.sge.ondemand import NO_REQUEST, on_demand_request, with_request
from elb.schedulers.sge.readcheck import expected_hosts, running_jobs
from elb.schedulers.sge.servable import SiteCache, SiteReader, demand_of
from elb.schedulers.sge.starttimes import StartTimeReader, StartTimes
from elb.schedulers.sge.usage import accounting_path, read_sge, unwritten
from elb.schedulers.waiting import wait_until_up

log = logging.getLogger("elb.schedulers.sge")

ADD_PLAYBOOK = "add_node.yml"
REMOVE_PLAYBOOK = "remove_node.yml"
ADMIT_PLAYBOOK = "admit_nodes.yml"  # the master's part for nodes that configure themselves at boot
BOOT_PLAYBOOK = "node_boot.yml"  # what a node that configures itself at boot runs on itself
BOOT_VARS = ("sge_exec_",)  # the variables of its own role there (sge_exec), in its boot document
UP_POLL = 2.0  # seconds between the qhost reads that wait for nodes configuring themselves


class SgeClient(WholeReader, SiteReader, StartTimeReader, Protocol):
    """What ``GridEngine`` needs of an SGE client (``SgeCommands``, or a stand-in in tests)."""

    def disable_host(self, host: str) -> None: ...

    def enable_host(self, host: str) -> None: ...

    def reschedule_host(self, host: str) -> Rescheduled: ...

    def set_hard_requests(self, job: int, requests: Mapping[str, str]) -> None: ...


@runtime_checkable
class WaitingReader(Protocol):
    """An SGE client that can peek (``SgeCommands``; a stand-in in tests may not): without it,
    ``GridEngine.peek`` fails and the daemon polls."""

    def waiting_jobs(self, timeout: float) -> frozenset[str]: ...


class GridEngine:
    """Grid Engine through ``SgeCommands`` (``qstat``, ``qhost``, ``qmod``, ``qconf``, ``qalter``)."""

    name = "SGE"
    add_playbook = ADD_PLAYBOOK
    remove_playbook = REMOVE_PLAYBOOK
    admit_playbook = ADMIT_PLAYBOOK

    def __init__(self, config: Config, commands: SgeClient | None = None) -> None:
        self.config = config
        self.sge: SgeClient = commands if commands is not None else SgeCommands(sge_settings(config))
        self._site = SiteCache()  # the site's complexes and PEs, read again every SITE_TTL seconds
        self._start_times = StartTimes()  # qsub -a times of waiting jobs, in bounded batches
        self._placements = Placements()  # each shape of waiting job's answer, from the pass before
        self._last_whole: Snapshot | None = None  # the last read found whole

    def take_requests(self, now: float) -> tuple[str, ...]:
        return ()  # Grid Engine asks for nothing: elb reads its queue

    def read(self, records: Sequence[Node], now: float) -> SchedulerRead:
        """qstat and qhost, refused unless whole: hosts elb knows (its records, the hosts of jobs
        the last whole read saw running) that vanished without being deregistered must be
        confirmed gone (``read_whole``)."""
        known = expected_hosts(records, self._last_whole)
        try:
            snap = read_whole(self.sge, known_up=known, running_before=running_jobs(self._last_whole))
        except Exception as err:  # any failure to read, or a partial read
            raise SchedulerError(str(err), transient=getattr(err, "transient", False)) from err
        self._last_whole = snap
        return SchedulerRead(snap)

    def peek(self, timeout: float) -> Peek:
        """The numbers of the jobs waiting and eligible to run, from ``qstat -s p -u '*'``
        (``elb.schedulers.sge.peek`` argues the choice), within ``timeout``."""
        client = self.sge
        if not isinstance(client, WaitingReader):
            raise SchedulerError("this SGE client cannot peek")
        return Peek(_sge(lambda: client.waiting_jobs(timeout)))

    def demand(self, read: SchedulerRead, records: Sequence[Node], slots: int | None) -> DemandSplit:
        snap = read.snapshot
        if not snap.pending:
            return DemandSplit(snap)
        try:
            site = self._site.get(self.sge, snap.now)
        except Exception as err:
            raise SchedulerError(f"reading the site's complexes and parallel environments: {err}") from err
        starts = self._start_times.update(self.sge, snap.pending)
        unread = self._start_times.unread  # qstat -j failed for these: not demand this pass
        return demand_of(
            snap, records, self.config, site, slots, start_times=starts, unread=unread, keep=self._placements
        )

    def disable_host(self, host: str, reason: str) -> None:
        _sge(lambda: self.sge.disable_host(host))

    def enable_host(self, host: str) -> None:
        _sge(lambda: self.sge.enable_host(host))

    def drain_checks(self, hosts: Sequence[str]) -> dict[str, DrainCheck]:
        """One ``qstat``/``qhost`` read (refused when the two disagree): each host's jobs, one
        entry per queue instance (a parallel job's other hosts too), and its reserved slots."""
        snap = _sge(self.sge.read_snapshot)
        jobs: dict[str, list[Job]] = {h: [] for h in hosts}
        for j in snap.jobs:
            if j.host in jobs:
                jobs[j.host].append(j)
        return {h.name: DrainCheck(tuple(jobs[h.name]), h.slots_reserved) for h in snap.hosts if h.name in jobs}

    def listed(self, hosts: Sequence[str]) -> frozenset[str]:
        shown = {h.name for h in _sge(self.sge.read_snapshot).hosts}
        return frozenset(h for h in hosts if h in shown)

    def prepare(self, nodes: Sequence[NodeSpec]) -> dict[str, SchedulerError]:
        return {}  # the add play makes the exec host

    def await_registered(self, names: Sequence[str], stopping: threading.Event) -> dict[str, str] | None:
        """The add play ends with the execd registered. Nodes that configure themselves at boot
        (``provision.mode: boot``) are waited for: until qhost shows each up (its execd reports),
        for at most ``provision.boot.timeout`` of qhost answering (``wait_until_up``), a read every
        ``UP_POLL`` seconds; a transient ``SchedulerError`` when Grid Engine did not answer for a
        good part of the wait."""
        if self.config.provision.mode != "boot":
            return {}
        timeout = self.config.provision.boot.timeout
        return wait_until_up(
            names,
            self._up_of,
            timeout=timeout,
            poll=UP_POLL,
            stopping=stopping,
            log=log,
            since="its admission",
            failed=lambda shown: (
                f"it did not configure itself within {timeout:g} s of its admission (SGE: {shown}; "
                "its boot's output is /var/log/elb-boot.log on the node)"
            ),
        )

    def _up_of(self, names: set[str], seen: dict[str, str]) -> list[str]:
        """The ``names`` qhost shows up now; what it shows of the others goes into ``seen``."""
        try:
            snap = self.sge.read_snapshot()
        except SgeError as err:
            raise SchedulerError(f"reading qhost: {err}", transient=err.transient) from err
        except Exception as err:  # what it failed with is noted; the wait reads again at the next poll
            raise SchedulerError(f"reading qhost: {err}") from err
        up = []
        for name in sorted(names):
            host = snap.host(name)
            if host is not None and host.up:
                up.append(name)
            else:
                seen[name] = "not in qhost" if host is None else "its execd does not report"
        return up

    def out_of_service(self, reasons: Mapping[str, str]) -> None:
        return None  # the remove play took the exec hosts out; pooled ones stay, disabled

    def resumed(self, host: str) -> None:
        _sge(lambda: self.sge.enable_host(host))  # a pooled node's queue instances stayed disabled

    def release(self, hosts: Sequence[str], reason: str) -> None:
        return None  # Grid Engine never asks for a node

    def requeue(self, host: str) -> Requeued:
        done = _sge(lambda: self.sge.reschedule_host(host))
        return Requeued(tuple(done.pushed), tuple(done.not_restartable))

    def bind_on_demand(self, job: int, hard_requests: Mapping[str, str], groups: NodeGroups) -> str:
        """``qalter -l``: the job's hard requests with one only on-demand groups offer
        (``elb.schedulers.sge.ondemand``)."""
        request = on_demand_request(groups)
        if request is None:
            raise SchedulerError(NO_REQUEST)
        _sge(lambda: self.sge.set_hard_requests(job, with_request(hard_requests, request)))
        name, value = request
        return f"it now requests {name}={value}, which only on-demand nodes offer"


T = TypeVar("T")


def _sge(call: Callable[[], T]) -> T:
    """``call()``, its ``SgeError`` (a command that failed, timed out or answered what elb cannot
    use) as the ``SchedulerError`` every driver raises."""
    try:
        return call()
    except SgeError as err:
        raise SchedulerError(str(err), transient=err.transient) from err


def node_plays(cfg: Config) -> NodePlays:
    """What Grid Engine's nodes need from the provisioner: ``sge``'s settings for its roles, its
    node's boot playbook and its role's variables there, the master's plays, a node's variables
    from its group."""
    return NodePlays(
        variables=sge_settings(cfg).role_vars(),
        boot_playbook=BOOT_PLAYBOOK,
        boot_vars=BOOT_VARS,
        master_playbooks=(ADD_PLAYBOOK, REMOVE_PLAYBOOK),
        admit_playbooks=(ADMIT_PLAYBOOK,),
        group_vars=group_vars,
    )


def group_vars(group: NodeGroup) -> dict[str, object]:
    """A node of ``group`` joins its queues and host group, and its exec host gets the complex
    values the group offers (the sge_exec role's variables)."""
    options = sge_options(group)
    out: dict[str, object] = {"sge_exec_queues": list(options.queues), "sge_exec_hostgroup": options.hostgroup}
    if options.offers:
        out["sge_exec_complex_values"] = dict(options.offers)
    return out


# A node group's own Grid Engine settings (``elb.core.drivers``): its queues, host group, complex
# values and parallel environments.
GROUP_OPTIONS = SgeGroupOptions
# Grid Engine's own settings: the config file's ``sge:``.
CONFIG_SECTION = SgeConfig


def group_options(cfg: Config) -> SgeGroupOptions:
    """The one group of a config without ``node_groups`` joins ``sge.queue`` and ``sge.hostgroup``."""
    sge = sge_settings(cfg)
    return SgeGroupOptions(queues=[sge.queue], hostgroup=sge.hostgroup)


def command_timeout(cfg: Config) -> tuple[float, str]:
    """The time-out of one Grid Engine command, and its config key."""
    return sge_settings(cfg).timeout, "sge.timeout"


def job_uses(cfg: Config, since: float, until: float, accounting: Path | None = None) -> list[JobUse]:
    """The job uses in [since, until) of Grid Engine's accounting file (``accounting``, else where
    ``sge.root`` and ``sge.cell`` put it); none while no job has finished (``accounting_note``)."""
    if unwritten(cfg, accounting) is not None:
        return []
    return read_sge(accounting or accounting_path(cfg), since, until)


def accounting_note(cfg: Config, accounting: Path | None = None) -> str | None:
    """What ``elb spend`` says when the accounting has no job yet: Grid Engine writes its file
    when the first job ends."""
    path = unwritten(cfg, accounting)
    return None if path is None else f"no job has finished yet: Grid Engine writes {path} when the first one ends"


def checks(cfg: Config) -> Iterator[Check]:
    """``elb validate``'s check of Grid Engine: qstat answers."""
    sge = sge_settings(cfg)
    try:
        SgeCommands(sge).answers()
    except SgeTimeoutError as err:
        yield Check(
            "SGE",
            False,
            f"qstat did not answer within {sge.timeout:g}s (sge.timeout): {err}",
            "is the qmaster up and reachable from here?",
        )
        return
    except SgeError as err:
        # SGE's own answer names the cause where it can (sge.errors.hint): nothing to add then.
        fix = "" if hint(err.stderr) else "set sge.root, sge.cell and sge.bin_dir for this cluster"
        yield Check("SGE", False, str(err), fix)
        return
    yield Check("SGE", True, f"qstat answers (sge.root {sge.root}, cell {sge.cell})")
    if cfg.policy.peek_interval > 0:
        yield _peek_check(cfg)


def _peek_check(cfg: Config) -> Check:
    """Whether the peek can be read: a warning when not (the daemon then passes every poll only)."""
    try:
        sge = sge_settings(cfg)
        waiting = SgeCommands(sge).waiting_jobs(sge.timeout)
    except SgeError as err:
        return Check(
            "SGE peek",
            True,
            f"qstat -s p -u '*' cannot be read: {err}; elb would pass every poll only",
            "set policy.peek_interval: 0 to say so, or see why qstat prints this",
            warning=True,
        )
    return Check(
        "SGE peek",
        True,
        f"qstat -s p -u '*' read ({len(waiting)} jobs waiting): new ones start a pass within "
        f"policy.peek_interval ({cfg.policy.peek_interval:g} s)",
    )


TITLE = "Grid Engine"


def _init_config(options: Any) -> SgeConfig:
    """Where ``elb init`` looks for Grid Engine: ``--sge-root``, else ``$SGE_ROOT``, else the
    default (and ``--sge-cell`` alike)."""
    defaults = SgeConfig()
    root = options.sge_root or Path(os.environ.get("SGE_ROOT") or defaults.root)
    cell = options.sge_cell or os.environ.get("SGE_CELL") or defaults.cell
    return SgeConfig(root=root, cell=cell, timeout=10)


def init_answers(options: Any) -> str | None:
    """Whether Grid Engine answers here (its queues can be listed)."""
    from elb.schedulers.sge.init import answers  # noqa: PLC0415 (elb init's only)

    return "Grid Engine answers" if answers(_init_config(options)) else None


def init(options: Any, cloud: Sequence[str], tail: Sequence[str]) -> InitDraft:
    """``elb init``'s Grid Engine config (``elb.schedulers.sge.init``) and what could not be read."""
    from elb.schedulers.sge.init import gather, render  # noqa: PLC0415 (elb init's only)

    facts = gather(_init_config(options))
    return InitDraft(render(facts, cloud, tail), (f"SGE: {facts.sge_problem}",) if facts.sge_problem else ())


__all__: Sequence[str] = ("ADD_PLAYBOOK", "REMOVE_PLAYBOOK", "GridEngine", "checks", "init", "init_answers")


def make(cfg: Config, journal: object) -> GridEngine:
    """The Grid Engine driver of ``cfg`` (``elb.core.registry.SchedulerModule``; it keeps nothing
    in the journal)."""
    return GridEngine(cfg)
