"""Metrics of a replay, the floors, and the table / JSON / plot output."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from elb.core import spend
from elb.simulate.engine import NodeLife, SimOutcome
from elb.simulate.swf import SimJob

Billing = spend.Billing
TAU = 10.0  # bounded slowdown threshold, seconds


SATURATION_BACKLOG = 3600.0


def billed_seconds(life: NodeLife, billing: Billing) -> float:
    """Per second with a 60 s minimum, or every started hour (``elb.core.spend.billed_seconds``)."""
    return spend.billed_seconds(life.terminated_at - life.launched_at, billing)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return 0.0
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class Floors:
    floor_node_hours: float  # total slot-seconds / slots per node
    zero_wait_node_hours: float  # every job starting at submission, nodes billed per second
    peak_nodes: int  # zero-wait peak: most slots in use at once / slots per node, rounded up


def floors(jobs: Sequence[SimJob], slots_per_node: int) -> Floors:
    spn = slots_per_node
    slot_seconds = sum(j.slots * j.run for j in jobs)
    events: list[tuple[float, int, int]] = []  # (time, wide nodes delta, narrow slots delta)
    for j in jobs:
        if j.slots > spn:
            k = math.ceil(j.slots / spn)
            events.append((j.submit, k, 0))
            events.append((j.submit + j.run, -k, 0))
        else:
            events.append((j.submit, 0, j.slots))
            events.append((j.submit + j.run, 0, -j.slots))
    events.sort(key=lambda e: (e[0], e[1] + e[2]))  # ends before starts at the same instant
    wide = narrow = 0
    node_seconds = 0.0
    last = events[0][0] if events else 0.0
    for t, dw, dn in events:
        node_seconds += (wide + math.ceil(narrow / spn)) * (t - last)
        last = t
        wide += dw
        narrow += dn
    # The peak in slots as the issue defines it: the jobs' own slots, not whole-node rounding.
    peak = _peak_slots(jobs)
    return Floors(slot_seconds / spn / 3600.0, node_seconds / 3600.0, max(1, math.ceil(peak / spn)))


def _peak_slots(jobs: Sequence[SimJob]) -> int:
    ev: list[tuple[float, int]] = []
    for j in jobs:
        ev.append((j.submit, j.slots))
        ev.append((j.submit + j.run, -j.slots))
    ev.sort(key=lambda e: (e[0], e[1]))
    cur = peak = 0
    for _, d in ev:
        cur += d
        peak = max(peak, cur)
    return peak


@dataclass(frozen=True, slots=True)
class GroupCost:
    """One node group's share of a replay's bill."""

    group: str
    node_hours: float
    idle_node_hours: float
    cost: float  # node-hours at the group's price_per_hour (the replay's --price when it has none), plus pool_cost
    price_per_hour: float
    launches: int
    restarts: int = 0  # stopped nodes started again (warm pool)
    pooled_node_hours: float = 0.0  # node-hours its nodes spent stopped in the warm pool
    pool_cost: float = 0.0  # their volumes' cost


@dataclass(frozen=True, slots=True)
class Metrics:
    label: str
    policy: str
    node_hours: float
    cost: float
    cost_over_floor: float
    idle_node_hours: float
    utilisation: float
    wait_mean: float
    wait_p50: float
    wait_p95: float
    wait_p99: float
    wait_max: float
    bounded_slowdown: float
    makespan: float
    launches: int
    terminations: int
    jobs: int
    never_started: int
    saturated: bool
    longest_backlog: float
    replay_seconds: float
    decisions: int
    groups: tuple[GroupCost, ...] = ()
    unservable: int = 0  # jobs no node group can run: in the replay, never started, not demand
    restarts: int = 0  # warm pool: stopped nodes started for demand instead of launches
    stops: int = 0  # warm pool: removals that stopped the node
    pooled_node_hours: float = 0.0  # warm pool: node-hours stopped (not in node_hours)
    pool_cost: float = 0.0  # warm pool: the stopped nodes' volumes (in cost)
    failed_bringups: int = 0  # bring-ups whose provisioning failed (--provision-failure-rate)
    launches_held: int = 0  # launches the back-off held
    backoff_rounds: int = 0  # the most failed rounds in a row the back-off reached
    budget_held: int = 0  # passes at which the budget held a launch or a restart (--budget)
    peak_nodes: int = 0  # the most nodes up (launched, not yet gone) at once
    quick_passes: int = 0  # passes a peek brought forward (--peek)
    scheduler: str = "sge"  # the scheduler elb ran behind (a powersave.Behind) (--scheduler; a peer: its own model)
    asked: int = 0  # behind Slurm: nodes its power saving asked for
    given_back: int = 0  # behind Slurm: nodes asked for that elb gave back

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def metrics(
    label: str,
    policy: str,
    out: SimOutcome,
    fl: Floors,
    *,
    billing: Billing,
    price: float,
    slots_per_node: int,
    replay_seconds: float = 0.0,
    prices: Mapping[str, float | None] | None = None,
) -> Metrics:
    """The replay's figures. ``prices``: each node group's price per node-hour (None, or a group
    missing: ``price``); a node's slots are its own (``NodeLife.slots``) or ``slots_per_node``."""
    each = [billed_seconds(n, billing) for n in out.nodes]  # each life's billed seconds, worked out once
    billed = sum(each)
    busy = sum(n.busy_seconds for n in out.nodes)
    slot_billed = sum(b * (n.slots or slots_per_node) for b, n in zip(each, out.nodes, strict=True))
    costs = _group_costs(out, each, price, prices)
    waits = sorted(out.waits)
    node_hours = billed / 3600.0
    bsld = [max(1.0, (w + r) / max(r, TAU)) for w, r in zip(out.waits, out.runs, strict=True)]
    span = max(1.0, out.last_end - out.first_submit)
    # Never drains: jobs never started, or a backlog that lasted a quarter of the replay and at
    # least an hour (in a replay of a few hours, a queue of some minutes is a burst, not saturation).
    saturated = out.never_started > 0 or out.longest_backlog > max(0.25 * span, SATURATION_BACKLOG)
    return Metrics(
        label=label,
        policy=policy,
        node_hours=node_hours,
        cost=sum(c.cost for c in costs),
        cost_over_floor=node_hours / fl.floor_node_hours if fl.floor_node_hours else math.nan,
        idle_node_hours=(billed - busy) / 3600.0,
        utilisation=out.slot_seconds / slot_billed if slot_billed else 0.0,
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        wait_p50=percentile(waits, 50),
        wait_p95=percentile(waits, 95),
        wait_p99=percentile(waits, 99),
        wait_max=waits[-1] if waits else 0.0,
        bounded_slowdown=sum(bsld) / len(bsld) if bsld else 0.0,
        makespan=out.last_end - out.first_submit,
        launches=out.launches,
        terminations=out.terminations,
        jobs=len(waits),
        never_started=out.never_started,
        saturated=saturated,
        longest_backlog=out.longest_backlog,
        replay_seconds=replay_seconds,
        decisions=out.decisions,
        groups=tuple(costs),
        unservable=len(out.unservable),
        restarts=out.restarts,
        stops=out.stops,
        pooled_node_hours=sum(out.pooled_seconds.values()) / 3600.0,
        pool_cost=sum(out.pool_cost.values()),
        failed_bringups=out.failed_bringups,
        launches_held=out.launches_held,
        backoff_rounds=out.backoff_rounds,
        budget_held=out.budget_held,
        peak_nodes=_peak_nodes(out.nodes),
        quick_passes=out.quick_passes,
    )


def _group_costs(
    out: SimOutcome, billed: Sequence[float], price: float, prices: Mapping[str, float | None] | None
) -> list[GroupCost]:
    """Each node group's billed and idle node-hours and cost (its stopped nodes' volumes in),
    launches and restarts; every group ``prices`` names, then any other a node was of.
    ``billed``: each of ``out.nodes``'s billed seconds, in its order."""
    per_group: dict[str, list[tuple[NodeLife, float]]] = {name: [] for name in prices or {}}
    for n, b in zip(out.nodes, billed, strict=True):
        per_group.setdefault(n.group, []).append((n, b))
    costs: list[GroupCost] = []
    for name, lives in per_group.items():
        hours = sum(b for _, b in lives) / 3600.0
        rate = (prices or {}).get(name) or price
        idle = hours - sum(n.busy_seconds for n, _ in lives) / 3600.0
        restarts = sum(1 for n, _ in lives if n.restart)
        pooled = out.pooled_seconds.get(name, 0.0) / 3600.0
        volumes = out.pool_cost.get(name, 0.0)
        costs.append(
            GroupCost(name, hours, idle, hours * rate + volumes, rate, len(lives) - restarts, restarts, pooled, volumes)
        )
    return costs


def _peak_nodes(nodes: Sequence[NodeLife]) -> int:
    """The most nodes up (launched, not yet gone) at once."""
    deltas = sorted(d for n in nodes for d in ((n.launched_at, 1), (n.terminated_at, -1)))
    up = peak = 0
    for _, d in deltas:  # by time, a node gone (-1) before one launched at the same instant
        up += d
        peak = max(peak, up)
    return peak


def fmt_wait(s: float) -> str:
    if s < 120:
        return f"{s:.0f}s"
    if s < 3 * 3600:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.1f}h"


def table(rows: Sequence[Metrics], fl: Floors, price: float) -> str:
    head = (
        f"{'policy':<22} {'node-h':>9} {'cost':>9} {'x floor':>7} {'idle nh':>8} {'util':>5} "
        f"{'mean':>6} {'p50':>6} {'p95':>6} {'p99':>6} {'max':>6} {'bsld':>6} {'makespan':>8} "
        f"{'launch':>6} {'term':>6}"
    )
    lines = [head, "-" * len(head)]
    for m in rows:
        lines.append(
            f"{m.label:<22} {m.node_hours:>9.0f} {m.cost:>9.0f} {m.cost_over_floor:>7.2f} "
            f"{m.idle_node_hours:>8.0f} {m.utilisation:>5.2f} {fmt_wait(m.wait_mean):>6} "
            f"{fmt_wait(m.wait_p50):>6} {fmt_wait(m.wait_p95):>6} {fmt_wait(m.wait_p99):>6} "
            f"{fmt_wait(m.wait_max):>6} {m.bounded_slowdown:>6.2f} {m.makespan / 86400:>7.1f}d "
            f"{m.launches:>6} {m.terminations:>6}"
        )
    lines.append(
        f"{'floor (slot-seconds)':<22} {fl.floor_node_hours:>9.0f} {fl.floor_node_hours * price:>9.0f} {1.0:>7.2f}"
    )
    zw = fl.zero_wait_node_hours
    ratio = zw / fl.floor_node_hours if fl.floor_node_hours else math.nan
    lines.append(f"{'zero-wait':<22} {zw:>9.0f} {zw * price:>9.0f} {ratio:>7.2f}")
    return "\n".join(lines)


def pool_table(pairs: Sequence[tuple[Metrics, Metrics]]) -> str:
    """Each policy without and with the warm pool: waits, compute and stopped node-hours, money
    (compute and volumes), new nodes against restarts."""
    head = (
        f"{'policy':<22} {'mean':>6} {'p95':>6} {'node-h':>9} {'pooled-h':>9} {'cost':>10} "
        f"{'volumes':>8} {'launch':>6} {'restart':>7} {'stops':>6}"
    )
    lines = [head, "-" * len(head)]
    for without, with_pool in pairs:
        for m in (without, with_pool):
            lines.append(
                f"{m.label:<22} {fmt_wait(m.wait_mean):>6} {fmt_wait(m.wait_p95):>6} {m.node_hours:>9.1f} "
                f"{m.pooled_node_hours:>9.1f} {m.cost:>10.2f} {m.pool_cost:>8.2f} {m.launches:>6} "
                f"{m.restarts:>7} {m.stops:>6}"
            )
        lines.append(
            f"{'  pool saves':<22} {fmt_wait(without.wait_mean - with_pool.wait_mean):>6} "
            f"{fmt_wait(without.wait_p95 - with_pool.wait_p95):>6} {without.node_hours - with_pool.node_hours:>9.1f} "
            f"{'':>9} {without.cost - with_pool.cost:>10.2f}"
        )
    return "\n".join(lines)


def group_table(rows: Sequence[Metrics], floors_by_group: Mapping[str, Floors]) -> str:
    """Each policy's node-hours and cost per node group, with each group's floor."""
    head = f"{'policy':<22} {'group':<14} {'node-h':>9} {'idle nh':>8} {'price/h':>8} {'cost':>10} {'nodes':>6}"
    lines = [head, "-" * len(head)]
    for m in rows:
        for c in m.groups:
            lines.append(
                f"{m.label:<22} {c.group:<14} {c.node_hours:>9.0f} {c.idle_node_hours:>8.0f} "
                f"{c.price_per_hour:>8.3f} {c.cost:>10.0f} {c.launches:>6}"
            )
    for name, fl in floors_by_group.items():
        lines.append(f"{'floor (slot-seconds)':<22} {name:<14} {fl.floor_node_hours:>9.0f}")
    return "\n".join(lines)


def plot(rows: Sequence[Metrics], path: Path, title: str) -> None:
    """Cost (x floor) against p95 wait: a point per policy, a curve per swept policy."""
    import matplotlib  # noqa: PLC0415 (matplotlib only when plotting)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import FormatStrFormatter  # noqa: PLC0415

    by_policy: dict[str, list[Metrics]] = {}
    for m in rows:
        by_policy.setdefault(m.policy, []).append(m)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, ms in by_policy.items():
        xs = [m.wait_p95 / 60.0 for m in ms]
        ys = [m.cost_over_floor for m in ms]
        style = "o-" if len(ms) > 1 else "o"
        ax.plot(xs, ys, style, label=name)
        if len(ms) > 1:
            for m, x, y in zip(ms, xs, ys, strict=True):
                ax.annotate(m.label.split(" ", 1)[-1], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ys_all = [m.cost_over_floor for m in rows if m.cost_over_floor > 0]
    if ys_all and max(ys_all) > 4 * min(ys_all):  # a static cluster far above the elastic ones
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("p95 wait (minutes)")
    ax.set_ylabel("cost / cost floor")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
