"""Prometheus metrics (off unless ``metrics_port`` is set; on ``metrics_address``, 127.0.0.1 by
default), for the pass of every scheduler.

Gauges are taken from the journal and the last pass when Prometheus scrapes, so the pass does
no extra work for them; the pass feeds the histograms and the pass counter (``PassMetrics``)
as it ends. The registry is elb's own and carries the process's figures (CPU, memory, open
files) and ``elb_build_info`` beside elb's. The journal feeds the boot step histogram as it
records each node's boot steps (``elb.core.timeline``), once each.

Names follow Prometheus's conventions: a quantity's base unit ends its name and is declared as
the family's unit (``_seconds``; money in US dollars an hour, ``_dollars_per_hour``, the unit of
EC2's prices and of ``price_per_hour``), a counter's series ends in ``_total``, and the build
information is an info metric (the series ``elb_build_info``).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from elb import __version__
from elb.core.model import NodeState
from elb.core.poolplan import group_of
from elb.core.spend import BudgetNow, SpendCache, budget_now, spend_by_group
from elb.core.timeline import DURATION_NAMES, Step, Timeline

if TYPE_CHECKING:
    from elb.core.config import Config
    from elb.service.journal import Journal
    from elb.service.passrecord import Counters, LastPass

# A pass reads the scheduler and the cloud and starts operations: seconds, up to their time-outs.
PASS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Launch to ready: boot plus provisioning, one to fifteen minutes.
READY_BUCKETS = (30, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1800)
# One step of a boot: from seconds (the scheduler seeing a provisioned node) to an hour (a first job).
STEP_BUCKETS = (1, 5, 10, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600)


class PassMetrics:
    """What the daemon observes as passes end and nodes become ready."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.pass_duration = Histogram(
            "elb_pass_duration_seconds",
            "Duration of a pass (read, plan, start operations)",
            unit="seconds",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.passes = Counter(
            "elb_passes", "Passes by outcome (ok, or failed: nothing changed)", ["outcome"], registry=self.registry
        )
        for outcome in ("ok", "failed"):
            self.passes.labels(outcome)  # both series exist from the start: a ratio needs both
        self.launch_to_ready = Histogram(
            "elb_launch_to_ready_seconds",
            "From a node's launch to ready in the scheduler (boot and provisioning)",
            unit="seconds",
            buckets=READY_BUCKETS,
            registry=self.registry,
        )
        self.boot_steps = Histogram(
            "elb_boot_step_seconds",
            "Each step of a node's boot (boot, ssh, provision, register, first_job), as the journal first records it",
            ["step"],
            unit="seconds",
            buckets=STEP_BUCKETS,
            registry=self.registry,
        )
        for name in DURATION_NAMES:
            self.boot_steps.labels(name)  # every step's series exists from the start

    def observe_pass(self, seconds: float, ok: bool) -> None:
        self.pass_duration.observe(seconds)
        self.passes.labels("ok" if ok else "failed").inc()

    def observe_ready(self, seconds: float) -> None:
        self.launch_to_ready.observe(max(0.0, seconds))

    def observe_added(self, journal: Journal, names: Iterable[str]) -> None:
        """Nodes an operation made ready: launch to ready, for the histogram."""
        for name in names:
            node = journal.node(name)
            if node is not None and node.ready_at is not None:
                self.observe_ready(node.ready_at - node.launched_at)

    def observe_step(self, timeline: Timeline, step: Step) -> None:
        """The journal recorded ``step`` of a node for the first time: observe the durations it
        completes (``Timeline.completed_by``), so each is observed once, across passes and restarts."""
        for name, seconds in timeline.completed_by(step):
            self.boot_steps.labels(name).observe(seconds)


class BuildInfoCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        info = InfoMetricFamily("elb_build", "elb's version and Python's (the series elb_build_info)")
        info.add_metric([], {"version": __version__, "python": platform.python_version()})
        yield info


# Node states a node is in while elb manages it (stopped in a warm pool too); terminated and
# failed nodes leave the count.
_LIVE_STATES = tuple(s for s in NodeState if s.alive or s.pooled)


class Observed(Protocol):
    """What the metrics read of a balancer (``elb.service.daemon.Balancer``): its last pass's figures and
    its counters."""

    config: Config
    journal: Journal
    last: LastPass
    counters: Counters
    metrics: PassMetrics
    clock: Callable[[], float]


class BalancerCollector(Collector):
    def __init__(self, balancer: Observed) -> None:
        self.balancer = balancer
        self.spend_cache = SpendCache()  # the budget's gone nodes, kept between scrapes

    def collect(self) -> Iterator[Metric]:
        b = self.balancer
        s = b.last
        for name, doc, value, unit in (
            (
                "elb_waiting_jobs",
                "Eligible jobs waiting at the last pass (SGE's qw; Slurm's pending jobs waiting for nodes)",
                s.pending_jobs,
                "",
            ),
            ("elb_waiting_slots", "Slots (Slurm: CPUs) the waiting jobs need", s.pending_slots, ""),
            ("elb_oldest_wait_seconds", "Wait of the oldest eligible job", s.oldest_wait, "seconds"),
            ("elb_last_pass_duration_seconds", "Duration of the last pass", s.duration, "seconds"),
            (
                "elb_last_good_pass_timestamp_seconds",
                "Time of the last successful pass (Unix time)",
                s.last_good,
                "seconds",
            ),
            (
                "elb_lost_nodes_kept",
                "Nodes lost (instance gone or the scheduler can't reach them) but kept: it lists work on them",
                s.lost_kept,
                "",
            ),
            (
                "elb_launch_backoff_rounds",
                "Failed launch rounds in a row (launches or provisionings); 0: launching is not backed off",
                s.backoff_rounds,
                "",
            ),
            (
                "elb_launch_backoff_seconds",
                "Seconds before the next launch may start (back-off)",
                s.backoff_wait,
                "seconds",
            ),
            (
                "elb_unservable_jobs",
                "Eligible waiting jobs no node elb launches could ever run (never demand; elb jobs says why)",
                s.unservable_jobs,
                "",
            ),
        ):
            g = GaugeMetricFamily(name, doc, unit=unit)
            g.add_metric([], value)
            yield g
        nodes = b.journal.nodes()
        g = GaugeMetricFamily("elb_nodes", "Nodes elb manages, by lifecycle state", labels=["state"])
        for st in _LIVE_STATES:
            g.add_metric([st.value], sum(1 for n in nodes if n.state is st))
        yield g
        groups = b.config.groups(b.config.policy.slots_per_node or 1)
        g = GaugeMetricFamily(
            "elb_warm_pool_nodes", "Nodes stopped in a warm pool (or being stopped), by node group", labels=["group"]
        )
        for group in groups.groups:
            if group.warm_pool.enabled:
                mine = [n for n in nodes if n.state.pooled and group_of(n, groups) is group]
                g.add_metric([group.name], len(mine))
        yield g
        for name, doc, value in (
            ("elb_nodes_added", "Nodes added and ready", b.counters.added),
            ("elb_nodes_stopped", "Idle nodes drained and stopped into a warm pool", b.counters.stopped),
            ("elb_nodes_restarted", "Nodes started again from a warm pool, ready", b.counters.restarted),
            (
                "elb_nodes_removed",
                "Nodes drained (or powered down by Slurm), deregistered and terminated",
                b.counters.removed,
            ),
            ("elb_node_failures", "Node operations that failed", b.counters.failures),
            ("elb_repairs", "Differences between journal, cloud and scheduler repaired", b.counters.repairs),
            (
                "elb_launches_held",
                "Launches the policy (with Slurm: Slurm's requests) wanted that the back-off held",
                b.counters.launches_held,
            ),
            (
                "elb_nodes_given_back",
                "Nodes the scheduler asked for by name that elb gave back (limits, back-off, pause)",
                b.counters.given_back,
            ),
            (
                "elb_jobs_rescheduled",
                "Rerunnable jobs requeued from nodes the cloud was taking back (spot interruption)",
                b.counters.rescheduled,
            ),
            (
                "elb_jobs_moved_on_demand",
                "Jobs bound to on-demand nodes after more spot interruptions than allowed",
                b.counters.moved_on_demand,
            ),
        ):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], value)
            yield c
        p = b.config.policy
        groups = b.config.groups(p.slots_per_node or 1)
        g = GaugeMetricFamily(
            "elb_spend_dollars_per_hour",
            "What the nodes up now, and the volumes of the nodes stopped in a warm pool, cost an hour in US dollars"
            " (price_per_hour, warm_pool.volume_price_per_hour), by node group (groups with a price_per_hour)",
            labels=["group"],
            unit="dollars_per_hour",
        )
        for spent in spend_by_group(nodes, groups, b.clock(), p.billing, p.billing_period):
            if spent.per_hour is not None:
                g.add_metric([spent.group], spent.per_hour)
        yield g
        budget = budget_now(b.journal, b.config, b.clock(), cache=self.spend_cache) if p.budget is not None else None
        yield from budget_families(budget)
        # Named elb_ec2_notices whatever the cloud: the shipped dashboard and admins' alerts read that name.
        c = CounterMetricFamily("elb_ec2_notices", "The cloud's notices about managed nodes, by kind", labels=["kind"])
        for kind, count in sorted(b.counters.notices.items()):
            c.add_metric([kind], count)
        yield c


def budget_families(budget: BudgetNow | None) -> Iterator[Metric]:
    """The budget's gauges (``policy.budget``; without one, the families with no sample): its
    amount, the period's spend so far, its projection to the period's end, and whether it holds
    launches now (``elb.core.spend.budget_now``)."""
    money = "US dollars; policy.budget"
    families = [
        GaugeMetricFamily(
            "elb_budget_dollars",
            f"The budget's amount a period ({money}), by period",
            labels=["period"],
            unit="dollars",
        ),
        GaugeMetricFamily(
            "elb_budget_spent_dollars",
            f"What the budget's period has cost so far: the nodes billed at their prices, the stopped nodes' volumes"
            f" ({money})",
            labels=["period"],
            unit="dollars",
        ),
        GaugeMetricFamily(
            "elb_budget_projected_dollars",
            f"The period's cost so far and what runs now run to the period's end ({money})",
            labels=["period"],
            unit="dollars",
        ),
        GaugeMetricFamily(
            "elb_budget_holding",
            "1 when the budget holds launches back (no room for one more node of any group to its period's end)",
            labels=["period"],
        ),
    ]
    if budget is not None:
        c = budget.check
        for family, value in zip(families, (c.amount, c.spent, c.projected, float(budget.holding)), strict=True):
            family.add_metric([c.period], value)
    yield from families


def metrics_registry(balancer: Observed, passes: PassMetrics) -> CollectorRegistry:
    """elb's registry: the balancer's figures, the pass histograms, build info, the process; the
    journal's boot steps go to the step histogram from now on."""
    balancer.journal.on_step = passes.observe_step
    registry = passes.registry
    registry.register(BalancerCollector(balancer))
    registry.register(BuildInfoCollector())
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def start_metrics_server(address: str, port: int, balancer: Observed, passes: PassMetrics) -> None:
    start_http_server(port, addr=address, registry=metrics_registry(balancer, passes))
