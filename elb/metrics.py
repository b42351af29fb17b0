"""Prometheus metrics on 127.0.0.1 (off unless ``metrics_port`` is set).

Values are taken from the journal and the last pass when Prometheus scrapes, so the
daemon's pass does no extra work for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from elb.model import NodeState

if TYPE_CHECKING:
    from elb.daemon import Balancer


class BalancerCollector(Collector):
    def __init__(self, balancer: Balancer) -> None:
        self.balancer = balancer

    def collect(self) -> Iterator[Metric]:
        b = self.balancer
        s = b.last
        for name, doc, value in (
            ("elb_waiting_jobs", "Eligible jobs waiting in qw at the last pass", s.pending_jobs),
            ("elb_waiting_slots", "Slots the waiting jobs need", s.pending_slots),
            ("elb_oldest_wait_seconds", "Wait of the oldest eligible job", s.oldest_wait),
            ("elb_pass_duration_seconds", "Duration of the last pass", s.duration),
            ("elb_last_good_pass_timestamp_seconds", "Time of the last successful pass", s.last_good),
            (
                "elb_lost_nodes_kept",
                "Nodes lost (instance gone or SGE can't reach them) but kept: SGE lists work on them",
                s.lost_kept,
            ),
            (
                "elb_launch_backoff_rounds",
                "Failed launch rounds in a row (launches or provisionings); 0: launching is not backed off",
                s.backoff_rounds,
            ),
            ("elb_launch_backoff_seconds", "Seconds before the next launch may start (back-off)", s.backoff_wait),
        ):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], value)
            yield g
        nodes = b.journal.nodes()
        g = GaugeMetricFamily("elb_nodes", "Nodes elb manages, by lifecycle state", labels=["state"])
        for st in NodeState:
            g.add_metric([st.value], sum(1 for n in nodes if n.state is st))
        yield g
        for name, doc, value in (
            ("elb_nodes_added", "Nodes added and ready", b.counters.added),
            ("elb_nodes_removed", "Nodes drained, deregistered and terminated", b.counters.removed),
            ("elb_node_failures", "Node operations that failed", b.counters.failures),
            ("elb_repairs", "Differences between journal, cloud and SGE repaired", b.counters.repairs),
            ("elb_launches_held", "Launches the policy wanted that the back-off held", b.counters.launches_held),
            (
                "elb_passes_failed",
                "Passes that failed (SGE or the cloud unreadable, or an error) and changed nothing",
                b.counters.failed_passes,
            ),
        ):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], value)
            yield c


def start_metrics_server(port: int, balancer: Balancer) -> None:
    registry = CollectorRegistry()
    registry.register(BalancerCollector(balancer))
    start_http_server(port, addr="127.0.0.1", registry=registry)
