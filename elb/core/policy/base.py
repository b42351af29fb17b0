"""What every scaling policy is: an object with a pure ``decide``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from elb.core.config import PolicyConfig
from elb.core.model import History, Host, Job, Node, Plan
from elb.core.policy.tally import Noted
from elb.core.state import ClusterState


class Policy(Protocol):
    """A scaling policy. ``decide`` must be pure: no I/O, no clock; the time is the joined
    state's ``now``.

    The same object runs live (``elb run``), in ``elb once --dry-run`` and in ``elb simulate``.
    """

    @property
    def name(self) -> str: ...

    def decide(self, state: ClusterState, history: History) -> Plan: ...


@runtime_checkable
class QuietHint(Protocol):
    """Optional for a policy: until when ``decide`` returns an empty plan for an unchanged
    cluster, so a simulator may skip the polls before it. A time after the state's ``now`` says
    that ``decide`` returns an empty plan on this state now, so a simulator may ask it before a
    pass instead of planning. A policy without it is asked at every poll."""

    def quiet_until(self, state: ClusterState, history: History) -> float: ...


@runtime_checkable
class NotedHint(Protocol):
    """Optional for a policy with a ``QuietHint``: the hint on the state the last one read (its
    or ``decide``'s) revised by what came and went since (``elb.core.policy.tally.Noted``), with
    no node down, so a simulator need not copy every job, host and record for it. None: the policy
    cannot tell from the changes alone; it is then to be asked ``quiet_until`` on the whole state,
    which revises the one the changes revised."""

    def quiet_until_noted(
        self, jobs: Noted[Job], hosts: Noted[Host], nodes: Noted[Node], now: float, history: History
    ) -> float | None: ...


@runtime_checkable
class OwnClock(Protocol):
    """Optional for a policy: it decides on a clock of its own (Slurm's power saving, every
    ``power_save_interval``); a replay polls it at that clock instead of the balancer's poll."""

    @property
    def interval(self) -> float: ...


@runtime_checkable
class MasterRunsJobs(Protocol):
    """Optional for a policy: the cluster it models runs jobs on its master too (StarCluster);
    a replay gives the master a node's slots, never billed. Without it the master runs none."""

    @property
    def master_exec(self) -> bool: ...


@runtime_checkable
class FixedSize(Protocol):
    """Optional for a policy: a cluster of a fixed size, started at once (``initial_nodes``)
    and planned on its nodes alone (``watches_jobs`` False: a job's start or end never changes
    its plan, so a replay's fast-forward need not stop at them). Without it a replay starts
    with no node and takes every policy to watch the jobs."""

    @property
    def initial_nodes(self) -> int: ...

    @property
    def watches_jobs(self) -> bool: ...


@runtime_checkable
class PeerKnobs(Protocol):
    """Optional for a policy: knobs of its own, a dataclass (``params``) that a replay's
    ``--set`` and ``--sweep`` change by name. Without it (and without ``ConfigKnobs``) a
    policy has no knob a replay can set."""

    @property
    def params(self) -> object: ...


@runtime_checkable
class ConfigKnobs(Protocol):
    """Optional for a policy: it is configured by the config's ``policy`` section, whose keys
    a replay's ``--set`` and ``--sweep`` change by name."""

    @property
    def config(self) -> PolicyConfig: ...
