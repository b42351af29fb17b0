"""Slurm's power saving in a replay of elb behind Slurm (``--scheduler slurm``): the nodes it
asks elb for by name, and what it does with elb's answers. Pure: each step takes the model's
state (``Asked``) and what the replay shows, and gives the next state (the peer's rule keeps a
tally between calls, which plans as its full view does).

Behind Slurm elb does not size the demand: Slurm's power saving names the nodes its waiting jobs
need (its ResumeProgram) and the nodes it is done with (its SuspendProgram), and the planner's
asks path (``elb.core.planner.plan_pass`` with ``elb.core.askplan``) launches, gives back and
removes on those asks (docs/slurm.md). This module is Slurm's half of that exchange, and nothing
of elb's:

- **What Slurm wants** is the rule of the Slurm peer (``elb.core.policy.peers.SlurmPolicy``, the
  model of Slurm's power saving the peers' replays use), read on Slurm's view of the cluster:
  elb's nodes, and the nodes it asked for that elb has not launched yet (powering up, as
  ``sinfo`` shows them). A node for exactly the waiting jobs that fit on no node up or powering
  up, within the cloud nodes slurm.conf names (``PowerSaving.nodes``), the first of its list
  neither up, nor powering up, nor drained by elb (a node elb stopped into a warm pool is
  powered down in Slurm, and asked for in its turn): each is a *want* of that node, since the
  pass that first sees it. A node of elb's idle ``suspend_time`` (SuspendTime) is a *release*.
- **Each node's ask is its latest word**, as elb's journal keeps it (``node_asks``): a want stays
  open until the planner answers it (its node is ready) or gives the node back (a decline).
  A release is asked again at each pass while the node is idle and elb has it.
- **The names Slurm may pick next** are handed to the pass as elb's read of Slurm lists them
  (``PowerSaving.names``, a ``NamePool``): open, the cloud nodes neither up, powering up nor
  drained; held, those elb drained. A name the pass holds (``PassPlan.names``) is drained, one it
  reopens undrained, and Slurm picks no drained name: how many to hold is the planner's rule,
  the model only honours the drains elb made. It starts with none drained (an elb started on a
  running Slurm): what Slurm asked for before elb's first pass is launched or given back.
- **A give-back** powers the node down in Slurm, which requeues the job that waited for it and
  holds it for a job credential's lifetime (``cred_expire``, 120 s by default): no node is asked
  for the jobs that waited when the declined node was asked for until the hold ends (which jobs
  a node was for the peer's rule does not say, so all of them are held).

Slurm is asked at elb's passes (the replay's polls and peeks): live, Slurm asks within its
power-saving interval and elb's peek sees the request file within ``policy.peek_interval``. The
replay's dispatch starts a waiting job on the first ready node it fits, not necessarily the node
Slurm asked for it (Slurm binds it to that node): as many nodes are asked for, and a job may
start on a node another job's end freed sooner. ResumeTimeout is not modelled: elb launches or gives back each
want at the pass that sees it.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from elb.core.model import History, Job, Node, NodeState, Snapshot
from elb.core.planner import PassPlan
from elb.core.policy.peers import Limits, SlurmParams, SlurmPolicy
from elb.core.scheduler import Ask, AskKind, NamePool, PoolName
from elb.core.state import ClusterState

CRED_EXPIRE = 120.0  # Slurm's AuthInfo cred_expire default: a requeued job's hold, seconds


class Behind(enum.StrEnum):
    """The scheduler a replay puts elb behind, as the simulator models it (``--scheduler``): the
    simulator's own two models, not the registry's drivers. ``SGE``: elb's policy counts the
    demand; ``SLURM``: Slurm's power saving (this module) asks for nodes by name."""

    SGE = "sge"
    SLURM = "slurm"


SUSPEND_TIME = 86400.0  # the SuspendTime docs/slurm.md's slurm.conf sets: Slurm's idle rule as a safety net


@dataclass(frozen=True, slots=True)
class Asked:
    """The model's state: each open want by node, with the record Slurm's view shows for it
    while elb has not launched it; the names elb drained to hold them from Slurm's asks
    (``drained``); the hold of the jobs a give-back requeued (waiting jobs submitted at or before
    ``held_upto`` are held until ``held_until``); how many nodes were asked for and given back."""

    wants: Mapping[str, tuple[Ask, Node]] = field(default_factory=lambda: MappingProxyType({}))
    drained: frozenset[str] = frozenset()
    held_upto: float = -math.inf
    held_until: float = -math.inf
    asked: int = 0
    given_back: int = 0

    def held(self, job: Job, now: float) -> bool:
        """Whether Slurm holds ``job`` now (a give-back requeued it)."""
        submitted = job.submitted
        return now < self.held_until and job.is_pending and submitted is not None and submitted <= self.held_upto


@dataclass(frozen=True, slots=True)
class PowerSaving:
    """Slurm's power saving as the replay's asker: the cloud nodes slurm.conf names (``nodes``),
    a node's CPUs (``slots_per_node``), SuspendTime and the hold of a requeued job
    (``cred_expire``); ``rule`` is the Slurm peer's, on those nodes and SuspendTime."""

    nodes: int
    slots_per_node: int
    suspend_time: float = SUSPEND_TIME
    cred_expire: float = CRED_EXPIRE
    master: str = "master"
    rule: SlurmPolicy = field(init=False, compare=False, repr=False)
    # slurm.conf's cloud nodes, ``node001`` to the ``nodes``-th in order, each as a read lists it
    cloud: Mapping[str, PoolName] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        limits = Limits(max_nodes=self.nodes, slots_per_node=self.slots_per_node, master=self.master)
        object.__setattr__(self, "rule", SlurmPolicy(limits, SlurmParams(suspend_time=self.suspend_time)))
        every = (f"{limits.node_prefix}{i:0{limits.node_digits}d}" for i in range(1, self.nodes + 1))
        object.__setattr__(self, "cloud", MappingProxyType({n: PoolName(n) for n in every}))

    def view(self, asked: Asked, snapshot: Snapshot, records: Sequence[Node], now: float) -> ClusterState:
        """What Slurm's power saving reads now: the jobs it may ask nodes for (the held ones
        left out), elb's nodes, and the nodes it asked for that elb has not launched (powering
        up)."""
        jobs = snapshot.jobs
        if now < asked.held_until:
            jobs = tuple(j for j in jobs if not asked.held(j, now))
        alive = {n.name for n in records if n.state.alive}
        powering = tuple(rec for a, rec in asked.wants.values() if a.node not in alive)
        shown = Snapshot(now, jobs, snapshot.hosts) if jobs is not snapshot.jobs else snapshot
        return ClusterState(shown, (*records, *powering) if powering else tuple(records), now)

    def ask(
        self, asked: Asked, snapshot: Snapshot, records: Sequence[Node], history: History, now: float
    ) -> tuple[Asked, tuple[Ask, ...]]:
        """Slurm's asks at a pass at ``now``: the open wants, new wants for the waiting jobs that
        fit on no node up or powering up (on names elb has not drained), releases of elb's ready
        nodes idle SuspendTime; and the model's state with the new wants."""
        plan = self.rule.decide(self.view(asked, snapshot, records, now), history)
        wants = dict(asked.wants)
        alive = {n.name for n in records if n.state.alive}
        names = tuple(itertools.islice(self._free(asked, alive), plan.add)) if plan.add else ()
        for name in names:
            want = Ask(name, AskKind.WANT, now, "for waiting jobs that fit on no node up or powering up")
            wants[name] = (want, Node(name, NodeState.REQUESTED, now, slots=self.slots_per_node))
        mine = {n.name: n for n in records}
        releases = tuple(
            Ask(r.node, AskKind.RELEASE, now, r.reason)
            for r in plan.remove
            if (n := mine.get(r.node)) is not None and n.state is NodeState.READY
        )
        after = replace(asked, wants=MappingProxyType(wants), asked=asked.asked + len(names))
        return after, (*(a for a, _ in wants.values()), *releases)

    def _free(self, asked: Asked, alive: Collection[str]) -> Iterator[str]:
        """slurm.conf's cloud nodes neither up (``alive``), nor powering up, nor drained by elb:
        those Slurm may power up, first to last (a node elb stopped into a warm pool among them)."""
        wants, drained = asked.wants, asked.drained
        return (n for n in self.cloud if n not in alive and n not in wants and n not in drained)

    def names(self, asked: Asked, records: Sequence[Node]) -> NamePool:
        """The names Slurm may pick next as elb's read of Slurm lists them (``NamePool``): open,
        those it may power up; held, those elb drained that are neither up nor powering up."""
        alive = {n.name for n in records if n.state.alive}
        held = sorted(n for n in asked.drained if n not in alive and n not in asked.wants)
        cloud = self.cloud
        return NamePool(tuple(cloud[n] for n in self._free(asked, alive)), tuple(cloud[n] for n in held))

    def answered(self, asked: Asked, plan: PassPlan, now: float) -> Asked:
        """The model's state after elb's pass: the names it held drained and those it reopened
        undrained (``PassPlan.names``); the wants it answered (their node is ready) or gave back
        closed; a give-back holds the jobs that waited when its node was asked for."""
        holds = plan.names
        if holds.hold or holds.reopen:
            asked = replace(asked, drained=(asked.drained | set(holds.hold)) - set(holds.reopen))
        done = {a.node for a in plan.answers} | {d.node for d in plan.declines}
        if not done & asked.wants.keys():
            return asked
        declined = [d.since for d in plan.declines if d.node in asked.wants]
        wants = MappingProxyType({n: w for n, w in asked.wants.items() if n not in done})
        if not declined:
            return replace(asked, wants=wants)
        return replace(
            asked,
            wants=wants,
            held_upto=max(asked.held_upto, *declined),
            held_until=max(asked.held_until, now + self.cred_expire),
            given_back=asked.given_back + len(declined),
        )

    def wake(self, asked: Asked, snapshot: Snapshot, records: Sequence[Node], history: History, now: float) -> float:
        """Before when Slurm asks nothing new while the cluster does not change: a hold's end
        while it holds a waiting job, a node reaching SuspendTime (the peer's ``quiet_until``)."""
        until = self.rule.quiet_until(self.view(asked, snapshot, records, now), history)
        if now < asked.held_until and any(asked.held(j, now) for j in snapshot.jobs):
            until = min(until, asked.held_until)
        return until


__all__: Sequence[str] = ("CRED_EXPIRE", "SUSPEND_TIME", "Asked", "PowerSaving")
