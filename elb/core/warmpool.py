"""A warm pool: idle EBS-backed nodes stopped instead of terminated, and started again for demand.

A stopped EC2 instance pays only for its volumes, keeps its disk and its name, and starting it
again skips what a new node needs before it takes jobs (boot and provisioning): it is ready after
``restart_time`` instead of a boot time. This module decides, for one node group:

- ``stop_or_terminate``: an idle node the cost rule removes is stopped into the pool, or
  terminated. It is stopped when the pool has room and a restart saves something, and it is kept
  stopped at most ``keep_time``: ``max_age``, or less when the volumes would cost more than a
  restart saves (ski rental again: pay the volumes while they cost less than what they save, then
  let go). What a restart saves is the compute billed for ``boot_time - restart_time`` at the
  group's price per node-hour; without a price the saving is not money and the node is kept up to
  ``max_age``.
- ``pick_restart``: which stopped node to start for new demand, before launching a new one: the
  youngest (stopped last), whose disk is the most recent.
- ``expired``: which stopped nodes to terminate, for their age (past their keep time or
  ``max_age``) or for the pool's size (the oldest beyond ``max_nodes``).

Each decision carries a reason, like the planner's. Pure: no I/O, time is passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from elb.core.durations import PositiveSeconds, minutes
from elb.core.naming import MAX_NODES


class WarmPool(BaseModel):
    """A node group's warm pool (``warm_pool`` in a node group or in ``policy``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_nodes: int = Field(0, ge=0, le=MAX_NODES)  # stopped nodes kept at most; 0: no pool
    max_age: PositiveSeconds = 86400.0  # longest a node stays stopped
    volume_price_per_hour: float = Field(0.0, ge=0, allow_inf_nan=False)  # a stopped node's volumes
    restart_time: PositiveSeconds = 60.0  # start to ready

    @property
    def enabled(self) -> bool:
        return self.max_nodes > 0


@dataclass(frozen=True, slots=True)
class Pooled:
    """A stopped node: when it was stopped, and until when it may stay stopped."""

    name: str
    stopped_at: float
    keep_until: float


@dataclass(frozen=True, slots=True)
class StopDecision:
    stop: bool  # False: terminate it
    keep_for: float  # seconds it may stay stopped (0 when terminated)
    reason: str


def restart_saving(pool: WarmPool, boot_time: float, price_per_hour: float | None) -> float | None:
    """The compute money a restart saves against a new node (None without a price)."""
    if price_per_hour is None:
        return None
    return max(0.0, boot_time - pool.restart_time) / 3600.0 * price_per_hour


def keep_time(pool: WarmPool, boot_time: float, price_per_hour: float | None) -> float:
    """How long a stopped node is worth keeping: ``max_age``, or until its volumes have cost what
    a restart saves, whichever is shorter."""
    saving = restart_saving(pool, boot_time, price_per_hour)
    if saving is None or pool.volume_price_per_hour <= 0:
        return pool.max_age
    return min(pool.max_age, saving / pool.volume_price_per_hour * 3600.0)


def stop_or_terminate(
    pool: WarmPool,
    pooled: Sequence[Pooled],
    *,
    boot_time: float,
    price_per_hour: float | None,
    poll_interval: float,
) -> StopDecision:
    """Stop an idle node the cost rule removes into the pool, or terminate it.

    Terminated: no pool (``max_nodes`` 0), the pool full, a restart no faster than a boot, or a
    keep time shorter than a poll interval (it would be terminated at the next poll anyway).
    """
    if not pool.enabled:
        return StopDecision(False, 0.0, "no warm pool (warm_pool.max_nodes 0)")
    if len(pooled) >= pool.max_nodes:
        return StopDecision(False, 0.0, f"the warm pool is full ({len(pooled)}/{pool.max_nodes} stopped)")
    if pool.restart_time >= boot_time:
        return StopDecision(
            False,
            0.0,
            f"a restart ({minutes(pool.restart_time)}) is no faster than a boot ({minutes(boot_time)}): "
            "nothing to save",
        )
    keep = keep_time(pool, boot_time, price_per_hour)
    saving = restart_saving(pool, boot_time, price_per_hour)
    if keep < poll_interval:
        return StopDecision(
            False,
            0.0,
            f"its volumes ({pool.volume_price_per_hour:g}/h) cost what a restart saves ({saving or 0:.4f}) "
            f"in {minutes(keep)}, less than a poll ({minutes(poll_interval)})",
        )
    why = f"a restart takes {minutes(pool.restart_time)} instead of a {minutes(boot_time)} boot"
    if saving is None:
        limit = "max_age (no price_per_hour to weigh its volumes against)"
    elif keep < pool.max_age:
        limit = f"its volumes ({pool.volume_price_per_hour:g}/h) have cost what a restart saves ({saving:.4f})"
    else:
        limit = f"max_age (volumes {pool.volume_price_per_hour * pool.max_age / 3600:.4f} by then)"
    return StopDecision(
        True,
        keep,
        f"stopped into the warm pool ({len(pooled) + 1}/{pool.max_nodes}): {why}; kept stopped up to "
        f"{minutes(keep)}, until {limit}",
    )


def due(p: Pooled, pool: WarmPool) -> float:
    """When a stopped node goes for its age: its keep time, never past ``max_age``."""
    return min(p.keep_until, p.stopped_at + pool.max_age)


def pick_restart(pooled: Sequence[Pooled], pool: WarmPool, now: float) -> tuple[Pooled, str] | None:
    """The stopped node to start for new demand (the youngest not yet due), or None."""
    fresh = [p for p in pooled if due(p, pool) > now]
    if not fresh:
        return None
    best = max(fresh, key=lambda p: (p.stopped_at, p.name))
    return best, (
        f"starting {best.name} from the warm pool (stopped {minutes(now - best.stopped_at)} ago, the youngest "
        f"of {len(fresh)}): ready in {minutes(pool.restart_time)}"
    )


def expired(pooled: Sequence[Pooled], pool: WarmPool, now: float) -> list[tuple[Pooled, float, str]]:
    """The stopped nodes to terminate now, with when each became due and why: those past their
    keep time, then the oldest of the rest beyond ``max_nodes``."""
    out: list[tuple[Pooled, float, str]] = []
    rest: list[Pooled] = []
    for p in pooled:
        at = due(p, pool)
        if at <= now:
            limit = "max_age" if at >= p.stopped_at + pool.max_age else "its keep time (volumes cost what it saves)"
            out.append((p, at, f"stopped {minutes(at - p.stopped_at)}: {limit} reached"))
        else:
            rest.append(p)
    over = len(rest) - pool.max_nodes
    if over > 0:
        rest.sort(key=lambda p: (p.stopped_at, p.name))
        out.extend(
            (p, now, f"the warm pool holds {len(rest)} > max_nodes {pool.max_nodes}: the oldest goes")
            for p in rest[:over]
        )
    return out


def volume_cost(seconds: float, pool: WarmPool) -> float:
    return max(0.0, seconds) / 3600.0 * pool.volume_price_per_hour


__all__: Sequence[str] = (
    "Pooled",
    "StopDecision",
    "WarmPool",
    "due",
    "expired",
    "keep_time",
    "pick_restart",
    "restart_saving",
    "stop_or_terminate",
    "volume_cost",
)
