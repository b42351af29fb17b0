"""elb's default policy: the original StarCluster balancer's rules with its known defects fixed.

Grow when eligible jobs (``qw``) have waited longer than ``wait_time`` (oldest by submission
time), by at most ``add_nodes_per_iteration`` and never more than the waiting slots need,
counting nodes still booting. Shrink every idle worker elb manages that is near the end of
the billing period it has paid for (per-hour billing) or has been idle ``idle_time``
(per-second billing), while nothing waits and the cluster stays at ``min_nodes``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from elb.config import ClusterConfig, PolicyConfig
from elb.model import History, Node, Plan, Removal, Snapshot
from elb.naming import next_names
from elb.policy.base import minutes
from elb.policy.view import ClusterView, Worker, cluster_view


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class ElbPolicy:
    config: PolicyConfig
    cluster: ClusterConfig
    name: str = "elb"

    def decide(self, snapshot: Snapshot, nodes: Sequence[Node], history: History, now: float) -> Plan:
        cfg = self.config
        view = cluster_view(snapshot, nodes, self.cluster.master, now, cfg.slots_per_node)
        in_use = [h.name for h in snapshot.hosts] + [n.name for n in nodes]

        def names(count: int) -> tuple[str, ...]:
            return next_names(in_use, count, self.cluster.node_prefix, self.cluster.node_digits)

        # Below the floor: replace lost nodes at once, whatever the stabilization window says.
        if view.size < cfg.min_nodes:
            n = cfg.min_nodes - view.size
            return Plan(
                add=n,
                add_names=names(n),
                add_reason=f"{view.size} nodes < min_nodes {cfg.min_nodes}: adding {_plural(n, 'node')}",
            )

        if history.last_change_at is not None and now - history.last_change_at < cfg.stabilization_time:
            since = now - history.last_change_at
            return Plan(
                reason=f"stabilizing: last change {minutes(since)} ago < {minutes(cfg.stabilization_time)}"
            )

        if view.pending:
            return self._grow(view, names)
        return self._shrink(view, now)

    # -- grow ------------------------------------------------------------------------------
    def _grow(self, view: ClusterView, names: Callable[[int], tuple[str, ...]]) -> Plan:
        cfg = self.config
        waited = view.oldest_wait()
        jobs = _plural(len(view.pending), "job")
        head = f"{jobs} waiting ({view.pending_slots} slots), oldest {minutes(waited)}"
        if waited <= cfg.wait_time:
            return Plan(reason=f"{head} <= wait_time {minutes(cfg.wait_time)}: not adding yet")
        if view.size >= cfg.max_nodes:
            return Plan(reason=f"{head}, but the cluster is at max_nodes ({view.size}/{cfg.max_nodes})")
        needed = view.nodes_for(view.pending) - len(view.booting)
        if needed <= 0:
            return Plan(reason=f"{head}; {_plural(len(view.booting), 'node')} already booting cover them")
        n = min(cfg.add_nodes_per_iteration, needed, cfg.max_nodes - view.size)
        chosen = names(n)
        return Plan(
            add=n,
            add_names=chosen,
            add_reason=(
                f"{head} > {minutes(cfg.wait_time)}: adding {_plural(n, 'node')} "
                f"({view.size + n}/{cfg.max_nodes})"
            ),
        )

    # -- shrink ----------------------------------------------------------------------------
    def _removable(self, w: Worker, now: float) -> str | None:
        """Why this worker may go now, or None."""
        cfg = self.config
        node = w.node
        if node is None or not w.idle:
            return None
        if cfg.billing == "hour":
            into = (now - node.launched_at) % cfg.billing_period
            if into < cfg.kill_after:
                return None
            return (
                f"idle, {minutes(into)} into its paid {minutes(cfg.billing_period)} "
                f">= kill_after {minutes(cfg.kill_after)}"
            )
        since = node.last_busy_at or node.ready_at or node.launched_at
        idle_for = now - since
        if idle_for < cfg.idle_time:
            return None
        return f"idle {minutes(idle_for)} >= idle_time {minutes(cfg.idle_time)}"

    def _shrink(self, view: ClusterView, now: float) -> Plan:
        cfg = self.config
        candidates: list[tuple[float, Worker, str]] = []
        for w in view.workers:
            why = self._removable(w, now)
            if why is not None and w.node is not None:
                into = (now - w.node.launched_at) % cfg.billing_period
                candidates.append((-into, w, why))
        if not candidates:
            return Plan(reason="no job waiting; no idle node is due for removal")
        # Whose paid period ends first goes first; never below min_nodes.
        candidates.sort(key=lambda c: (c[0], c[1].name))
        room = view.size - cfg.min_nodes
        chosen = candidates[: max(0, room)]
        if not chosen:
            return Plan(reason=f"no job waiting; idle nodes kept for min_nodes {cfg.min_nodes}")
        removals = tuple(Removal(w.name, f"no job waiting; {why}") for _, w, why in chosen)
        return Plan(remove=removals)
