"""A clairvoyant replay: the cost below which no policy can go at the waits it gives.

It knows every job's arrival and true run time in advance, and is computed exactly so:

1. **Placement and waits.** The jobs run where and when the replay's own dispatcher runs them
   (``SimSettings.dispatch`` and ``placement``: SGE's order, first fit in host order, wide jobs on
   whole empty nodes) on a cluster whose ``max_nodes`` nodes are all ready all the time: a static
   cluster of the cap that needs no boot. So every job starts at its submission unless the cap is
   full, and the nodes are logical: "node k" is the k-th node of the first fit.
2. **Launches and removals.** Each logical node is launched exactly one boot time (the replay's
   ``boot_time`` plus half its ``boot_jitter``: the mean) before the first job it runs, so that
   job starts at once, and removed the moment it empties, unless its next job comes within a
   boot time: then it is kept idle through the gap, since a relaunch would cost a boot and
   keeping it costs the gap. Each gap costs min(gap, boot), the cheaper of the two.
3. **Billing.** Per second: each stretch of a node, from its launch to its removal, is billed
   with EC2's 60 s minimum, at the group's price (``--price`` without one). Per-hour billing never
   bills a stretch less than per-second billing does, so the same figure bounds it too, loosely.

What it bounds, precisely: a policy whose jobs start at the same times on the same logical
placement cannot cost less, since each of its nodes must be up a boot time before its first job
and until its last job's end, and each idle gap costs it at least min(gap, boot). A policy that
lets jobs wait longer may cost less (jobs delayed pack tighter), and so may one whose smaller
cluster makes the dispatcher's first fit pack differently; the bound is for the waits it reports
(usually none), not for every wait. The cost floor (slot-seconds / slots per node) is the bound
at any wait. One node group only (the replay of ``--groups`` is not bounded here).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from elb.core import spend
from elb.core.policy.peers import Limits, StaticParams, StaticPolicy
from elb.simulate.engine import Placement, SimSettings, Simulator
from elb.simulate.report import percentile
from elb.simulate.runner import Prepared, SimError


@dataclass(frozen=True, slots=True)
class Bound:
    """The clairvoyant replay's figures."""

    node_hours: float
    cost: float
    cost_over_floor: float
    idle_node_hours: float  # boots and the gaps kept (shorter than a boot)
    launches: int  # stretches: a launch each
    wait_mean: float
    wait_p95: float
    never_started: int  # jobs the capped cluster never starts (as in the replay's own runs)

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def busy_periods(placements: Sequence[Placement]) -> dict[str, list[tuple[float, float]]]:
    """Each node's stretches with at least one job on it, in time order, touching ones joined."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for p in placements:
        for name, _ in p.nodes:
            spans[name].append((p.start, p.end))
    periods: dict[str, list[tuple[float, float]]] = {}
    for name, ss in spans.items():
        ss.sort()
        merged: list[tuple[float, float]] = []
        for start, end in ss:
            if merged and start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        periods[name] = merged
    return periods


def stretches(periods: Sequence[tuple[float, float]], boot: float) -> list[tuple[float, float, float]]:
    """A node's stretches from launch to removal, each with its busy seconds: a stretch begins a
    boot before its first busy period and takes in the next period when the gap to it is shorter
    than a boot (the node kept idle through it)."""
    out: list[tuple[float, float, float]] = []
    for start, end in periods:
        if out and start - out[-1][1] < boot:
            first, _, busy = out[-1]
            out[-1] = (first, end, busy + end - start)
        else:
            out.append((start - boot, end, end - start))
    return out


def clairvoyant(prepared: Prepared, settings: SimSettings, *, price: float) -> Bound:
    """The bound for ``prepared``'s jobs under ``settings`` (see the module's description)."""
    groups = prepared.groups.groups.groups
    if len(groups) != 1:
        raise SimError("the clairvoyant bound is for a replay of one node group (not --groups)")
    group = groups[0]
    spn = group.slots
    cap = prepared.max_nodes
    boot = settings.boot_time + settings.boot_jitter / 2
    static = StaticPolicy(Limits(max_nodes=cap, slots_per_node=spn), StaticParams(nodes=cap))
    ready = dataclasses.replace(
        settings,
        slots_per_node=spn,
        max_nodes=cap,
        boot_time=0.0,
        boot_jitter=0.0,
        master_exec_slots=0,
        provision_failure_rate=0.0,
        record=True,
    )
    out = Simulator(
        prepared.jobs,
        static,
        ready,
        initial_nodes=cap,
        groups=prepared.groups,
        assignments=prepared.assignments,
    ).run()
    billed = idle = 0.0
    launches = 0
    for periods in busy_periods(out.placements).values():
        for start, end, busy in stretches(periods, boot):
            seconds = spend.billed_seconds(end - start, "second")
            billed += seconds
            idle += seconds - busy
            launches += 1
    rate = group.price_per_hour if group.price_per_hour is not None else price
    node_hours = billed / 3600.0
    floor = prepared.floors.floor_node_hours
    waits = sorted(out.waits)
    return Bound(
        node_hours=node_hours,
        cost=node_hours * rate,
        cost_over_floor=node_hours / floor if floor else float("nan"),
        idle_node_hours=idle / 3600.0,
        launches=launches,
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        wait_p95=percentile(waits, 95),
        never_started=out.never_started,
    )


__all__: Sequence[str] = ("Bound", "busy_periods", "clairvoyant", "stretches")
