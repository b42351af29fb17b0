"""Build a policy the way the live daemon does, replay a workload under it, and measure."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from elb.config import ClusterConfig, PolicyConfig
from elb.policy import make_policy
from elb.policy.base import Policy
from elb.simulate.engine import SimOutcome, SimSettings, Simulator
from elb.simulate.report import Billing, Floors, Metrics, floors, metrics
from elb.simulate.swf import SimJob, Workload


class SimError(Exception):
    """Bad simulation input: the message says what to change."""


def _convert(raw: str, like: object) -> object:
    if isinstance(like, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise SimError(f"not a boolean: {raw!r}")
    try:
        if isinstance(like, int) and not isinstance(like, bool):
            return int(raw)
        return float(raw)
    except ValueError:
        raise SimError(f"not a number: {raw!r}") from None


def has_param(policy: Policy, key: str) -> bool:
    params = getattr(policy, "params", None)
    if params is not None and dataclasses.is_dataclass(params) and key in {f.name for f in dataclasses.fields(params)}:
        return True
    config = getattr(policy, "config", None)
    return isinstance(config, PolicyConfig) and key in PolicyConfig.model_fields


def with_param(policy: Policy, key: str, raw: str) -> Policy:
    """The same policy with one parameter changed (its own params, else its PolicyConfig)."""
    params = getattr(policy, "params", None)
    if params is not None and dataclasses.is_dataclass(params) and not isinstance(params, type):
        names = {f.name for f in dataclasses.fields(params)}
        if key in names:
            current = getattr(params, key)
            value = _convert(raw, current if current is not None else 0)
            new_params = dataclasses.replace(params, **{key: value})
            replaced: Policy = dataclasses.replace(policy, params=new_params)  # type: ignore[type-var,unused-ignore]
            return replaced
    config = getattr(policy, "config", None)
    if isinstance(config, PolicyConfig) and key in PolicyConfig.model_fields:
        data: dict[str, Any] = config.model_dump()
        current = data[key]  # the config's numbers are strict: convert the text to the field's kind
        data[key] = raw if isinstance(current, str) else _convert(raw, 0 if current is None else current)
        try:
            new_config = PolicyConfig.model_validate(data)
        except ValueError as err:
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
) -> Policy:
    """The policy as the live daemon would build it, told the simulated cluster's facts."""
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
    except ValueError as err:
        raise SimError(f"policy {name!r}: {err}") from None
    return make_policy(cfg, ClusterConfig())


@dataclass(slots=True)
class Prepared:
    """The jobs that can run on the capped cluster, the floors, and what was skipped."""

    jobs: list[SimJob]
    floors: Floors
    too_big: list[SimJob]
    max_nodes: int


def default_max_nodes(jobs: Sequence[SimJob], slots_per_node: int) -> int:
    return floors(jobs, slots_per_node).peak_nodes


def prepare(wl: Workload, slots_per_node: int, max_nodes: int | None) -> Prepared:
    if not wl.jobs:
        raise SimError(f"{wl.source}: no job to replay")
    cap = max_nodes if max_nodes is not None else default_max_nodes(wl.jobs, slots_per_node)
    if cap < 1:
        raise SimError("max nodes must be at least 1")

    def width(j: SimJob) -> int:
        return math.ceil(j.slots / slots_per_node)

    fits = [j for j in wl.jobs if width(j) <= cap]
    too_big = [j for j in wl.jobs if width(j) > cap]
    if not fits:
        raise SimError(f"{wl.source}: every job is bigger than the cluster ({cap} nodes of {slots_per_node} slots)")
    return Prepared(fits, floors(fits, slots_per_node), too_big, cap)


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
    initial = int(getattr(policy, "initial_nodes", 0) or 0)
    own = getattr(policy, "interval", None)  # a peer that decides on its own clock (Slurm: 10 s)
    if isinstance(own, int | float) and own > 0:
        settings = dataclasses.replace(settings, poll_interval=float(own))
    if getattr(policy, "master_exec", False) is True:  # a peer whose master runs jobs (StarCluster)
        settings = dataclasses.replace(settings, master_exec_slots=settings.slots_per_node)
    t = time.perf_counter()
    sim = Simulator(prepared.jobs, policy, settings, initial_nodes=initial, progress=progress)
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
    )
    return m, out
