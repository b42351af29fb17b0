"""One pass of elb behind Slurm's power saving, planned purely: ``plan(inputs, config, policy, now)``.

Slurm decides *which* nodes a job needs and asks for them (resume requests, journalled by
``elb.slurm.intake``); elb decides *how* and *whether*: it launches and provisions the nodes
asked for (within ``max_nodes`` and the launch back-off), gives back to Slurm the ones it will
not bring up (``POWER_DOWN_FORCE``, so the node is powered down and can be asked for again, never
left ``DOWN``), removes nodes by its own cost rule (the policy's removals, carried out by the
safe drain), and terminates what Slurm powered down (suspend requests, a node Slurm shows
powered down, a resume Slurm gave up on). After a restart it takes up every node where the
journal left it. Every action carries its reason; nothing here reads a clock or a command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from elb.backoff import Backoff
from elb.config import Config
from elb.durations import minutes
from elb.interfaces import Instance
from elb.journal import SlurmRequestRecord
from elb.model import History, Node, NodeState, Removal, Snapshot
from elb.policy.base import Policy
from elb.reconcile import lost_for
from elb.slurm.commands import SlurmRead
from elb.slurm.parse import SlurmNode, expand
from elb.slurm.view import node_up, snapshot
from elb.state import join

# The states of a job on a node that has not started it: such a job is requeued when the node
# is given back to Slurm (POWER_DOWN_FORCE), never killed.
_NOT_STARTED = frozenset({"PENDING", "CONFIGURING"})

# A node journalled as launching with no instance the cloud lists is given up after this long
# (a launch cut short by a crash; the cloud may list a new instance a little late).
LAUNCH_GRACE = 120.0


@dataclass(frozen=True, slots=True)
class SlurmInputs:
    read: SlurmRead
    nodes: tuple[Node, ...]  # the journal's records, gone ones included
    instances: tuple[Instance, ...]  # the cloud's workers
    requests: tuple[SlurmRequestRecord, ...]  # open requests, oldest first
    history: History
    backoff: Backoff
    in_flight: frozenset[str] = frozenset()
    watched_since: float | None = None  # this run's first live pass (``reconcile.lost_for``)


@dataclass(frozen=True, slots=True)
class Boot:
    """Take up a node the journal left booting, on the instance the cloud lists for it."""

    node: str
    instance: Instance
    reason: str


@dataclass(frozen=True, slots=True)
class SlurmPlan:
    launch: tuple[str, ...] = ()  # nodes to launch and provision, in request order
    launch_reason: str = ""
    launches_held: int = 0  # nodes Slurm asked for, within max_nodes, that the back-off gave back
    groups: Mapping[str, str] = field(default_factory=dict)  # node -> its node group
    boot: tuple[Boot, ...] = ()  # booting nodes to take up again (after a restart)
    give_back: tuple[Removal, ...] = ()  # power down in Slurm: elb will not bring them up now
    drain: tuple[Removal, ...] = ()  # the policy's removals: safe drain, then power down
    lost: tuple[Removal, ...] = ()  # ready nodes Slurm lost, nothing running: given back, taken out, failed
    remove: tuple[Removal, ...] = ()  # deregister and terminate: Slurm has them powered down
    forget: tuple[Removal, ...] = ()  # booting records with nothing behind them: failed
    orphans: tuple[Instance, ...] = ()  # tagged instances no record accounts for
    close: tuple[tuple[int, str], ...] = ()  # requests done: (id, outcome)
    notes: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        lines = []
        if self.launch:
            lines.append(f"launch {', '.join(self.launch)}: {self.launch_reason}")
        lines += [f"take up {b.node}: {b.reason}" for b in self.boot]
        lines += [f"give back {r.node}: {r.reason}" for r in self.give_back]
        lines += [f"drain {r.node}: {r.reason}" for r in self.drain]
        lines += [f"take out {r.node}: {r.reason}" for r in self.lost]
        lines += [f"remove {r.node}: {r.reason}" for r in self.remove]
        lines += [f"forget {r.node}: {r.reason}" for r in self.forget]
        lines += [f"terminate orphan {i.instance_id} ({i.name})" for i in self.orphans]
        lines += list(self.notes)
        return lines or ["nothing to do"]


def _nodes_of(request: SlurmRequestRecord) -> tuple[str, ...]:
    try:
        return expand(request.nodes)
    except ValueError:
        return ()


@dataclass(frozen=True, slots=True)
class _Facts:
    """What every rule of the pass looks at, computed once."""

    records: Mapping[str, Node]
    alive: frozenset[str]  # journalled, alive
    busy: frozenset[str]  # an operation of elb under way
    slurm: Mapping[str, SlurmNode]
    wanted: tuple[str, ...]  # nodes Slurm's open resume requests ask for (latest word resume)
    told: Mapping[str, str]  # node -> suspend or resume-fail (latest word)
    asked_at: Mapping[str, float]  # node -> when Slurm first asked to resume it
    snapshot: Snapshot  # this read of Slurm as the neutral snapshot


def _facts(inputs: SlurmInputs, now: float) -> _Facts:
    records = {n.name: n for n in inputs.nodes}
    wanted: list[str] = []
    told: dict[str, str] = {}
    asked_at: dict[str, float] = {}
    for r in inputs.requests:
        for name in _nodes_of(r):
            if r.kind == "resume":
                if name not in wanted:
                    wanted.append(name)
                asked_at.setdefault(name, r.time)
                told.pop(name, None)
            else:
                told[name] = r.kind
                if name in wanted:
                    wanted.remove(name)
    return _Facts(
        records=records,
        alive=frozenset(name for name, n in records.items() if n.state.alive),
        busy=inputs.in_flight,
        slurm={n.name: n for n in inputs.read.nodes},
        wanted=tuple(wanted),
        told=told,
        asked_at=asked_at,
        snapshot=snapshot(inputs.read.jobs, inputs.read.nodes, now),
    )


def plan(inputs: SlurmInputs, config: Config, policy: Policy, now: float) -> SlurmPlan:
    """take up what a restart left -> launch what Slurm asked for (or give it back: over
    max_nodes, or launching backed off after failed bring-ups) -> remove what Slurm powered
    down -> take out the ready nodes Slurm lost -> the cost rule's drains -> orphans -> close
    the requests elb is done with."""
    f = _facts(inputs, now)
    boot, forget = _take_up(f, inputs.instances, now)
    forgotten = frozenset(r.node for r in forget)
    launch, held, give_back = _launches(f, forgotten, config, inputs.backoff, now)
    remove, notes = _powered_down(f, forgotten)
    give_back += _given_up(f, give_back)
    removing = frozenset(r.node for r in remove)
    lost, kept = _lost(f, inputs, config.unreachable_timeout, removing, now)
    notes += kept
    drain, policy_note = _cost_rule(f, inputs, policy, removing | {r.node for r in lost}, now)
    return SlurmPlan(
        launch=launch,
        launch_reason=f"Slurm asked for {', '.join(launch)}" if launch else "",
        launches_held=held,
        groups=_groups(f, launch, config),
        boot=tuple(boot),
        give_back=tuple(give_back),
        drain=tuple(drain),
        lost=tuple(lost),
        remove=tuple(remove),
        forget=tuple(forget),
        orphans=_orphans(f, inputs, config.orphan_timeout, now),
        close=_closed(f, inputs.requests, frozenset(g.node for g in give_back)),
        notes=(*notes, *([f"policy: {policy_note}"] if policy_note else [])),
    )


def _take_up(f: _Facts, instances: Sequence[Instance], now: float) -> tuple[list[Boot], list[Removal]]:
    """Booting nodes no operation carries (a restart): on the instance the cloud lists for
    them, or failed: at once if never launched, else once the cloud has listed none for
    ``LAUNCH_GRACE``."""
    by_name = {i.name: i for i in instances}
    boot: list[Boot] = []
    forget: list[Removal] = []
    for name in sorted(f.alive - f.busy):
        n = f.records[name]
        if not n.state.booting:
            continue
        inst = by_name.get(name)
        since = now - (n.updated_at or n.launched_at)
        if inst is not None and inst.state == "running" and inst.private_ip:
            boot.append(Boot(name, inst, f"the journal left it {n.state.value}; its instance {inst.instance_id} runs"))
        elif inst is None and n.state is NodeState.REQUESTED:
            # The cloud is asked only after the launch is journalled: no instance can exist.
            forget.append(Removal(name, "requested, never launched"))
        elif inst is None and since >= LAUNCH_GRACE:
            forget.append(Removal(name, f"{n.state.value} for {minutes(since)} with no instance"))
    return boot, forget


def _launches(
    f: _Facts, forgotten: frozenset[str], config: Config, backoff: Backoff, now: float
) -> tuple[tuple[str, ...], int, list[Removal]]:
    """The nodes Slurm asked for that elb has not, launched within ``max_nodes`` and the
    back-off; how many of them the back-off held; the rest given back with why."""
    alive = f.alive - forgotten
    candidates = [n for n in f.wanted if n not in alive and n not in f.busy]
    room = max(0, config.policy.max_nodes - len(alive))
    fits = min(len(candidates), room)
    allowed = min(fits, backoff.cap(fits, now))
    give_back: list[Removal] = []
    for i, name in enumerate(candidates[allowed:], allowed):
        if i >= room:
            why = f"max_nodes {config.policy.max_nodes} reached"
        else:
            why = f"launching backed off for {minutes(backoff.waiting(now))} more ({backoff.last_failure})"
        give_back.append(Removal(name, why))
    return tuple(candidates[:allowed]), fits - allowed, give_back


def _powered_down(f: _Facts, forgotten: frozenset[str]) -> tuple[list[Removal], list[str]]:
    """Nodes to deregister and terminate: Slurm suspended them, gave up on them, or shows them
    powered down."""
    remove: list[Removal] = []
    notes: list[str] = []
    for name in sorted(f.alive - f.busy - forgotten):
        n = f.records[name]
        sn = f.slurm.get(name)
        kind = f.told.get(name)
        if kind == "suspend":
            remove.append(Removal(name, "Slurm powered it down (its SuspendProgram)"))
        elif kind == "resume-fail":
            remove.append(Removal(name, "Slurm gave up on its resume (ResumeTimeout)"))
        elif n.state.booting:
            continue
        elif sn is None:
            notes.append(f"{name}: Slurm does not know it; kept (an admin must look)")
        elif sn.powered_down or (n.state is NodeState.DRAINING and sn.powering_down):
            remove.append(Removal(name, f"Slurm has it {sn.shown}"))
    return remove, notes


def _given_up(f: _Facts, given: Sequence[Removal]) -> list[Removal]:
    """A resume Slurm gave up on leaves the node down: power it down instead, so it can serve again."""
    skip = {g.node for g in given}
    return [
        Removal(name, "Slurm gave up on its resume")
        for name, kind in sorted(f.told.items())
        if kind == "resume-fail" and name not in f.busy and name not in skip
    ]


def _lost(
    f: _Facts, inputs: SlurmInputs, timeout: float, removing: frozenset[str], now: float
) -> tuple[list[Removal], list[str]]:
    """Ready nodes whose slurmd Slurm has not heard from (not responding, or still powering up)
    and has not had up for ``unreachable_timeout``: taken out when no job runs there (Slurm
    sets such a node down, and its power saving never powers a down node down, so it would be
    paid for until an admin looks); kept, and said so, while Slurm lists a job running there
    (elb never kills a job: Slurm ends it, or an admin). A node an admin set down while its
    slurmd answers is the admin's, and left alone."""
    working: dict[str, list[str]] = {}
    for job in inputs.read.jobs:
        if job.state not in _NOT_STARTED:
            for name in job.nodelist:
                working.setdefault(name, []).append(job.job_id)
    lost: list[Removal] = []
    kept: list[str] = []
    for name in sorted(f.alive - f.busy - removing):
        n = f.records[name]
        sn = f.slurm.get(name)
        if n.state is not NodeState.READY or sn is None or not (sn.powering_up or "not_responding" in sn.flags):
            continue
        since = lost_for(n, f.snapshot, now, inputs.watched_since)
        if since < timeout:
            continue
        where = f"Slurm has not had it up for {minutes(since)} ({sn.shown}; unreachable_timeout {minutes(timeout)})"
        if name in working:
            kept.append(f"{name}: {where} but job {', '.join(working[name])} runs there; kept (elb never kills a job)")
        else:
            lost.append(Removal(name, f"{where}, no job running there"))
    return lost, kept


def _cost_rule(
    f: _Facts, inputs: SlurmInputs, policy: Policy, removing: frozenset[str], now: float
) -> tuple[list[Removal], str]:
    """The policy's removals among ready nodes Slurm has up and idle, and drains a restart cut short."""
    alive = [n for n in inputs.nodes if n.state.alive]
    decided = policy.decide(join(alive, (), f.snapshot, now=now), inputs.history)
    on_jobs = {name for j in inputs.read.jobs for name in j.nodelist}
    drain: list[Removal] = []
    for r in decided.remove:
        n = f.records.get(r.node)
        sn = f.slurm.get(r.node)
        if n is None or n.state is not NodeState.READY or r.node in f.busy or r.node in removing:
            continue
        if sn is None or not node_up(sn) or sn.busy or r.node in on_jobs:
            continue
        drain.append(r)
    for name in sorted(f.alive - f.busy - removing):
        if f.records[name].state is NodeState.DRAINING and all(d.node != name for d in drain):
            drain.append(Removal(name, "its drain was cut short"))
    return drain, decided.reason


def _groups(f: _Facts, launch: Sequence[str], config: Config) -> dict[str, str]:
    """The node group of each node to launch: its partition's (``slurm.partition_groups``)."""
    groups: dict[str, str] = {}
    for name in launch:
        sn = f.slurm.get(name)
        part = sn.partitions[0] if sn is not None and sn.partitions else ""
        group = config.slurm.partition_groups.get(part)
        if group is not None:
            groups[name] = group
    return groups


def _orphans(f: _Facts, inputs: SlurmInputs, orphan_timeout: float, now: float) -> tuple[Instance, ...]:
    """Tagged instances no live record accounts for, old enough not to be a launch on its way."""
    known = {n.instance_id for n in inputs.nodes if n.state.alive and n.instance_id}
    return tuple(
        i
        for i in inputs.instances
        if i.instance_id not in known
        and i.name not in f.alive
        and i.name not in f.busy
        and now - i.launched_at >= orphan_timeout
    )


def _closed(f: _Facts, requests: Sequence[SlurmRequestRecord], given: frozenset[str]) -> tuple[tuple[int, str], ...]:
    """Requests elb is done with: a resume once each node is ready or given back; a suspend or
    resume-fail once no node of it is alive."""
    close: list[tuple[int, str]] = []
    for r in requests:
        names = _nodes_of(r)
        if not names:
            close.append((r.id, "not a hostlist elb can read"))
        elif r.kind == "resume":
            ready = [n for n in names if (s := f.records.get(n)) is not None and s.state is NodeState.READY]
            if all(n in given or n in ready for n in names):
                back = sorted(n for n in names if n in given)
                close.append((r.id, f"given back: {', '.join(back)}" if back else "ready"))
        elif all(n not in f.alive and n not in f.busy for n in names):
            close.append((r.id, "done"))
    return tuple(close)


__all__: Sequence[str] = ("Boot", "SlurmInputs", "SlurmPlan", "plan")
