"""Build a policy the way the live daemon does, replay a workload under it, and measure."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.gcpause import paused
from elb.core.naming import MAX_NODES
from elb.core.policy import make_policy
from elb.core.policy.base import ConfigKnobs, FixedSize, MasterRunsJobs, OwnClock, PeerKnobs, Policy
from elb.core.policy.grouped import GroupedPolicy
from elb.simulate.engine import SimOutcome, SimSettings, Simulator
from elb.simulate.groups import Assignment, SimGroups, SimGroupsError, assign, one_group
from elb.simulate.powersave import Behind
from elb.simulate.report import Billing, Floors, Metrics, floors, metrics
from elb.simulate.swf import LONGEST, SimJob, Workload


class SimError(Exception):
    """Bad simulation input: the message says what to change."""


_YEAR = 365 * 86400.0


def _convert(raw: str, like: object, *, ranged: bool = True) -> object:
    """``raw`` as the kind of ``like``; ``ranged``: a number must be from 0 to a year (the peers'
    parameters, times and counts; PolicyConfig checks its own)."""
    if isinstance(like, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise SimError(f"not a boolean: {raw!r}")
    try:
        value: float = int(raw) if isinstance(like, int) and not isinstance(like, bool) else float(raw)
    except ValueError:
        raise SimError(f"not a number: {raw!r}") from None
    if ranged and not (math.isfinite(value) and 0 <= value <= _YEAR):  # the peers' parameters: times and counts
        raise SimError(f"not a number from 0 to a year's seconds ({_YEAR:.0f}): {raw!r}")
    return value


def _params(policy: Policy) -> object | None:
    """The policy's own knobs (``PeerKnobs``), if it has any."""
    return policy.params if isinstance(policy, PeerKnobs) else None


def _config(policy: Policy) -> PolicyConfig | None:
    """The policy's ``policy`` section (``ConfigKnobs``), if it is configured by one."""
    config = policy.config if isinstance(policy, ConfigKnobs) else None
    return config if isinstance(config, PolicyConfig) else None


def has_param(policy: Policy, key: str) -> bool:
    params = _params(policy)
    if params is not None and dataclasses.is_dataclass(params) and key in {f.name for f in dataclasses.fields(params)}:
        return True
    return _config(policy) is not None and key in PolicyConfig.model_fields


def param_value(policy: Policy, key: str) -> object:
    """The value of a parameter ``has_param`` finds (its own params first, then its PolicyConfig)."""
    params = _params(policy)
    if params is not None and dataclasses.is_dataclass(params) and key in {f.name for f in dataclasses.fields(params)}:
        return getattr(params, key)
    config = _config(policy)
    if config is not None and key in PolicyConfig.model_fields:
        return getattr(config, key)
    raise SimError(f"policy {policy.name} has no parameter {key!r}")


# The daemon's settings a replay takes as its own options, not as the policy's parameters: set
# through the policy they would change nothing in the replay.
REPLAY_OPTIONS = {"peek_interval": "--peek", "peek_gap": "--peek-gap"}


def with_param(policy: Policy, key: str, raw: str) -> Policy:
    """The same policy with one parameter changed (its own params, else its PolicyConfig)."""
    if key in REPLAY_OPTIONS:
        raise SimError(f"{key} is the replay's {REPLAY_OPTIONS[key]}, not a parameter of the policy")
    params = _params(policy)
    if params is not None and dataclasses.is_dataclass(params) and not isinstance(params, type):
        names = {f.name for f in dataclasses.fields(params)}
        if key in names:
            current = getattr(params, key)
            try:
                value = _convert(raw, current if current is not None else 0)
            except SimError as err:
                raise SimError(f"{key}={raw}: {err}") from None
            new_params = dataclasses.replace(params, **{key: value})
            replaced: Policy = dataclasses.replace(policy, params=new_params)  # type: ignore[type-var,unused-ignore]
            return replaced
    config = _config(policy)
    if config is not None and key in PolicyConfig.model_fields:
        data: dict[str, Any] = config.model_dump()
        current = data[key]  # the config's numbers are strict: convert the text to the field's kind
        try:
            data[key] = (
                raw if isinstance(current, str) else _convert(raw, 0 if current is None else current, ranged=False)
            )
            new_config = PolicyConfig.model_validate(data)
        except ValidationError as err:
            raise SimError(f"{key}={raw}: " + "; ".join(str(e["msg"]) for e in err.errors())) from None
        except SimError as err:
            raise SimError(f"{key}={raw}: {err}") from None
        out: Policy = dataclasses.replace(policy, config=new_config)  # type: ignore[type-var,unused-ignore]
        return out
    raise SimError(f"policy {policy.name} has no parameter {key!r}")


def build_policy(
    name: str,
    *,
    billing: Billing,
    slots_per_node: int,
    boot_time: float,
    max_nodes: int,
    poll_interval: float = 60.0,
    groups: SimGroups | None = None,
) -> Policy:
    """The policy as the live daemon would build it, told the simulated cluster's facts; with
    ``groups``, once per node group as with ``node_groups`` (``elb.core.policy.grouped``)."""
    try:
        cfg = PolicyConfig(
            name=name,
            min_nodes=0,
            max_nodes=max_nodes,
            billing=billing,
            slots_per_node=slots_per_node,
            boot_time=boot_time,
            poll_interval=poll_interval,
        )
    except ValidationError as err:  # one line: each field and what is wrong with it
        raise SimError(
            f"policy {name!r}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        ) from None
    if groups is not None:
        return GroupedPolicy(cfg, ClusterConfig(), groups.groups)
    return make_policy(cfg, ClusterConfig())


@dataclass(slots=True)
class Prepared:
    """Every job of the log with its group (``assignments``, in the same order), the floors of
    the jobs a group can run (all groups, and each), and the jobs no group can run, with why."""

    jobs: list[SimJob]
    assignments: list[Assignment]
    floors: Floors
    group_floors: dict[str, Floors]
    unservable: list[tuple[SimJob, str]]
    max_nodes: int
    groups: SimGroups

    @property
    def servable(self) -> int:
        return len(self.jobs) - len(self.unservable)


def default_max_nodes(jobs: Sequence[SimJob], slots_per_node: int) -> int:
    return floors(jobs, slots_per_node).peak_nodes


def prepare(wl: Workload, slots_per_node: int, max_nodes: int | None, *, groups: SimGroups | None = None) -> Prepared:
    """The replay's jobs placed on groups: ``groups``, or one group of ``slots_per_node`` slots a
    node and ``max_nodes`` nodes (None: the log's zero-wait peak)."""
    _check_times(wl)
    groups, cap = _groups_and_cap(wl, slots_per_node, max_nodes, groups)
    try:
        assignments = assign(wl.jobs, groups)
    except SimGroupsError as err:
        raise SimError(f"{wl.source}: {err}") from None
    unservable = [(j, a.reason) for j, a in zip(wl.jobs, assignments, strict=True) if a.group is None]
    if len(unservable) == len(wl.jobs):
        raise SimError(f"{wl.source}: no node group can run any job (the first: {unservable[0][1]})")
    group_floors = _group_floors(wl.jobs, assignments, groups)
    total = Floors(
        sum(f.floor_node_hours for f in group_floors.values()),
        sum(f.zero_wait_node_hours for f in group_floors.values()),
        sum(f.peak_nodes for f in group_floors.values()),
    )
    return Prepared(list(wl.jobs), assignments, total, group_floors, unservable, cap, groups)


def _check_times(wl: Workload) -> None:
    """``SimError`` for a log without jobs, or a job whose submission or run is not a time."""
    if not wl.jobs:
        raise SimError(f"{wl.source}: no job to replay")
    for j in wl.jobs:  # the readers refuse these; a NaN submission would hang the replay
        if not all(math.isfinite(v) and abs(v) <= LONGEST for v in (j.submit, j.run)):
            raise SimError(f"{wl.source}: job {j.job_id}: submit time {j.submit:g} or run time {j.run:g} is not a time")


def _groups_and_cap(
    wl: Workload, slots_per_node: int, max_nodes: int | None, groups: SimGroups | None
) -> tuple[SimGroups, int]:
    """The groups to replay on (``groups``, or one of ``slots_per_node`` slots a node) and the most
    nodes they may have; ``SimError`` when that is none."""
    if groups is None:
        cap = max_nodes if max_nodes is not None else default_max_nodes(wl.jobs, slots_per_node)
        if cap < 1:
            raise SimError("max nodes must be at least 1")
        if max_nodes is None and cap > MAX_NODES:  # a job (or jobs at once) wider than any cluster
            raise SimError(
                f"{wl.source}: the log's zero-wait peak is {cap} nodes of {slots_per_node} slots, more than the "
                f"{MAX_NODES} a cluster may have: give --max-nodes"
            )
        return one_group(slots_per_node, cap), cap
    cap = groups.groups.total_max_nodes
    if cap < 1:
        raise SimError("the node groups may have no node at all (max_nodes 0)")
    return groups, cap


def _group_floors(jobs: Sequence[SimJob], assignments: Sequence[Assignment], groups: SimGroups) -> dict[str, Floors]:
    """Each group's floors over the jobs assigned to it (each with its footprint there); a group
    with none left out."""
    per_group: dict[str, list[SimJob]] = {g.name: [] for g in groups.groups.groups}
    for j, a in zip(jobs, assignments, strict=True):
        if a.group is not None:
            per_group[a.group].append(dataclasses.replace(j, slots=a.footprint))
    return {g.name: floors(per_group[g.name], g.slots) for g in groups.groups.groups if per_group[g.name]}


def replay(
    prepared: Prepared,
    policy: Policy,
    settings: SimSettings,
    *,
    billing: Billing,
    price: float,
    label: str | None = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[Metrics, SimOutcome]:
    initial = policy.initial_nodes if isinstance(policy, FixedSize) else 0
    if isinstance(policy, OwnClock) and policy.interval > 0:  # a peer that decides on its own clock (Slurm: 10 s)
        settings = dataclasses.replace(settings, poll_interval=float(policy.interval))
    if not policy.name.startswith("elb"):  # the peek is elb's daemon's: a peer's model keeps its own cadence
        # and a peer is a whole system of its own, replayed as itself behind either scheduler
        settings = dataclasses.replace(settings, peek_interval=0.0, scheduler=Behind.SGE)
    if isinstance(policy, MasterRunsJobs) and policy.master_exec:  # a peer whose master runs jobs (StarCluster)
        settings = dataclasses.replace(settings, master_exec_slots=settings.slots_per_node)
    t = time.perf_counter()
    # The cycle collector waits until the figures are made and the simulator is gone (the replay
    # makes no reference cycle: ``Simulator.run``): resumed with the replay's objects still
    # alive, its first collections would walk every one of them, just before they go.
    with paused():
        sim = Simulator(
            prepared.jobs,
            policy,
            settings,
            initial_nodes=initial,
            progress=progress,
            groups=prepared.groups,
            assignments=prepared.assignments,
        )
        out = sim.run()
        elapsed = time.perf_counter() - t
        m = metrics(
            label or policy.name,
            policy.name,
            out,
            prepared.floors,
            billing=billing,
            price=price,
            slots_per_node=settings.slots_per_node,
            replay_seconds=elapsed,
            prices={g.name: g.price_per_hour for g in prepared.groups.groups.groups},
        )
        if sim.power is not None:
            m = dataclasses.replace(m, scheduler=Behind.SLURM, asked=sim.asked.asked, given_back=sim.asked.given_back)
        del sim
    return m, out
