"""elb's default policy.

Two rule sets, each chosen by an option (both new ones on by default; see ``docs/policy.md``):

- ``grow``: ``forecast`` launches at once, in whole nodes, for the waiting jobs that no slot will
  meet within a boot time (free slots, nodes already booting, slots that running jobs free by their
  requested run time, or without one by their age); ``wait_time`` is the classic rule (the oldest
  eligible job has waited longer than ``wait_time``; ``add_nodes_per_iteration`` at a time;
  ``stabilization_time`` after a change).
- ``shrink``: ``cost`` keeps a node as long as it costs less to keep than to lose. Per-period billing:
  an idle node goes at the last poll before its next period begins (the removal done
  ``removal_lead`` before the boundary). Per-second billing: an idle node goes once it has idled
  ``idle_factor`` boot times (ski rental: a relaunch pays a boot). Never a node a waiting job would
  be placed on. ``timer`` is the classic rule (``kill_after`` into the period, or ``idle_time`` idle,
  only while no job waits; ``stabilization_time`` after a change).

The policy is pure: time is an argument. ``quiet_until`` tells a simulator until when ``decide``
stays empty for an unchanged cluster (see ``elb.simulate.engine``).

With the cost rule, a configured ``slots_per_node`` and inputs that say what changed since the
last ones (the simulator's ``Revised`` tuples) it reads the cluster from a ``CapacityTally``
brought up to date by those changes (``incremental``): the size, the waiting jobs, the ready
workers' free slots, the running jobs by expected end, the idle workers and the node numbers in
use are kept, so a decision costs what changed and the bins its forecast touches, not the
cluster's size. Otherwise (the live pass, whose objects are all read anew; the timer rule, which
walks every worker) it reads the full view (``cluster_view``), which gives the same plans.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.durations import minutes
from elb.core.model import History, Job, Node, Plan, Removal
from elb.core.policy.forecast import Forecast, forecast, overdue_at
from elb.core.policy.tally import CapacityTally, IdleWorker, Revised, TallyView
from elb.core.policy.view import ClusterView, ViewCache, Worker, new_names
from elb.core.state import ClusterState

INF = math.inf

View = ClusterView | TallyView


class IdleNode(Protocol):
    """What the cost rule reads of an idle worker (a ``Worker``, or a tally's ``IdleWorker``)."""

    @property
    def name(self) -> str: ...
    @property
    def node(self) -> Node | None: ...
    @property
    def idle_since(self) -> float | None: ...


def _told_changes(*inputs: Sequence[object]) -> bool:
    """Whether the inputs say what changed since the last ones (``Revised``: the simulator's). A
    tally then takes in the changes alone; given inputs made anew (the live pass reads every
    object again), taking them in costs more than the full view, which is built instead."""
    return any(isinstance(seq, Revised) for seq in inputs)


def _idle_managed(view: ClusterView) -> tuple[Worker, ...]:
    return tuple(w for w in view.workers if w.node is not None and w.idle)


def _next_overdue(view: View, span: float) -> float:
    """The last instant before a running job the forecast (``span`` ahead) counts as ending, on a
    ready worker, is taken as running on: a requested end plus ``OVERDUE_GRACE``, or without a
    requested run time its start plus ``span`` (it has then run longer than the horizon is
    ahead); ``view.now`` when one is exactly there (it changes at the next poll); inf with none."""
    now = view.now
    if isinstance(view, TallyView):
        return view.tally.next_overdue(now, span)
    at = INF
    for w in view.workers:
        if not (w.ready and w.facts is not None):
            continue
        for j in w.jobs:
            if j.started is None:
                continue
            overdue = overdue_at(j, span)
            if overdue >= now:
                at = min(at, overdue)
    return at


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class ElbPolicy:
    config: PolicyConfig
    cluster: ClusterConfig
    name: str = "elb"
    incremental: bool = True  # read the cluster from ``tally`` where it can (see the module's doc)
    # What it worked out for the last cluster state it saw (``elb.core.policy.view.ViewCache``).
    cache: ViewCache = field(default_factory=ViewCache, compare=False, repr=False)
    tally: CapacityTally = field(default_factory=CapacityTally, compare=False, repr=False)

    def _view(self, state: ClusterState) -> View:
        cfg, cluster = self.config, self.cluster
        spn = cfg.slots_per_node
        snapshot, records = state.snapshot, state.records
        if self.incremental and spn and cfg.shrink == "cost" and _told_changes(snapshot.jobs, snapshot.hosts, records):
            if self.tally.update_for(snapshot, records, cluster.master, cluster.node_prefix, spn, state.down):
                return TallyView(self.tally, state.now, self.tally.pending(snapshot, state.now), spn)
        else:
            self.tally.clear()
        return self.cache.view(state, cluster.master, spn)

    def _idle(self, view: View) -> Sequence[IdleNode]:
        """The idle workers elb manages (worked out once per set of workers)."""
        if isinstance(view, TallyView):
            return view.tally.idle_workers()
        return self.cache.derived("idle", (view.workers,), lambda: _idle_managed(view))

    def _any_idle(self, view: View) -> bool:
        if isinstance(view, TallyView):  # of the tally's lists, the one the cost rule reads (the other is not kept)
            tally = self._idle_in_order(view)
            return bool(tally.idle_by_since if tally is not None else view.tally.idle)
        return bool(self._idle(view))

    def _names(self, view: View, state: ClusterState, count: int) -> tuple[str, ...]:
        """Names for ``count`` new nodes after the highest number in use."""
        cluster = self.cluster
        if isinstance(view, TallyView):
            return view.tally.new_names(count, cluster.node_prefix, cluster.node_digits)
        return new_names(state.snapshot.hosts, state.records, count, cluster.node_prefix, cluster.node_digits)

    @property
    def _classic(self) -> bool:
        return self.config.grow == "wait_time" and self.config.shrink == "timer"

    def decide(self, state: ClusterState, history: History) -> Plan:
        cfg = self.config
        now = state.now
        view = self._view(state)

        def names(count: int) -> tuple[str, ...]:
            return self._names(view, state, count)

        # Below the floor: replace lost nodes at once, whatever the stabilization window says.
        if view.size < cfg.min_nodes:
            n = cfg.min_nodes - view.size
            return Plan(
                add=n,
                add_names=names(n),
                add_reason=f"{view.size} nodes < min_nodes {cfg.min_nodes}: adding {_plural(n, 'node')}",
            )

        stabilizing: str | None = None
        if history.last_change_at is not None and now - history.last_change_at < cfg.stabilization_time:
            since = now - history.last_change_at
            stabilizing = f"stabilizing: last change {minutes(since)} ago < {minutes(cfg.stabilization_time)}"

        if self._classic:  # the classic rules exactly
            if stabilizing is not None:
                return Plan(reason=stabilizing)
            if view.pending:
                return self._grow(view, names)
            return self._shrink(view, now)

        # Grow.
        grow = Plan()
        fc: Forecast | None = None
        if view.pending:
            if cfg.grow == "wait_time":
                grow = Plan(reason=stabilizing) if stabilizing is not None else self._grow(view, names)
            else:
                grow, fc = self._grow_forecast(view, names, state)
        # Shrink.
        if cfg.shrink == "timer":
            if view.pending or stabilizing is not None:
                return grow
            shrink = self._shrink(view, now)
        else:
            shrink = self._shrink_cost(view, now, fc, grow.add)
        reasons = [r for r in (grow.reason if not grow.add else "", shrink.reason if not shrink.remove else "") if r]
        return Plan(
            add=grow.add,
            add_names=grow.add_names,
            add_reason=grow.add_reason,
            remove=shrink.remove,
            reason="; ".join(reasons) if grow.empty and shrink.empty else "",
        )

    # -- grow: forecast ------------------------------------------------------------------------
    def _counted(self, view: View, now: float) -> tuple[Job, ...]:
        delay = self.config.launch_delay
        if delay <= 0:
            return view.pending
        return tuple(j for j in view.pending if j.submitted is None or now - j.submitted >= delay)

    def _horizon(self) -> float:
        """How far ahead capacity counts: a boot time; per-period billing may wait longer for slots."""
        cfg = self.config
        if cfg.billing == "hour":
            return max(cfg.boot_time, cfg.period_horizon)
        return cfg.boot_time

    def _forecast(self, view: View, state: ClusterState, counted: tuple[Job, ...], limit: int) -> Forecast:
        """``forecast`` of ``counted`` by the horizon, worked out once for the very same inputs,
        time and jobs, and an equal limit (``decide`` reads the one ``quiet_until`` made before
        the pass, and the other way round). The limit is looked up by value: the cache's key
        compares by identity, and two equal ints above 256 are two objects."""
        snapshot = state.snapshot
        by_limit: dict[int, Forecast] = self.cache.derived(
            "forecast", (snapshot.jobs, snapshot.hosts, state.records, state.now, counted), dict
        )
        found = by_limit.get(limit)
        if found is None:
            found = by_limit[limit] = forecast(view, state.now + self._horizon(), counted, limit=limit)
        return found

    def _grow_forecast(
        self, view: View, names: Callable[[int], tuple[str, ...]], state: ClusterState
    ) -> tuple[Plan, Forecast | None]:
        cfg = self.config
        now = state.now
        horizon = self._horizon()
        boot = f"a boot time ({minutes(cfg.boot_time)})" if horizon == cfg.boot_time else minutes(horizon)
        jobs = _plural(len(view.pending), "job")
        head = f"{jobs} waiting ({view.pending_slots} slots)"
        counted = self._counted(view, now)
        if not counted:
            return Plan(reason=f"{head}, none yet for launch_delay {minutes(cfg.launch_delay)}"), None
        room = cfg.max_nodes - view.size
        fc = self._forecast(view, state, counted, max(0, room))
        on = f"{fc.ready} ready + {fc.booting} booting nodes"
        if fc.freed_slots:
            on += f" and {fc.freed_slots} slots running jobs free by their run time limit or age"
        if fc.new_nodes == 0:
            return Plan(reason=f"{head}: all can start within {boot} on {on}"), fc
        short = f"{_plural(fc.short_jobs, 'job')} ({fc.short_slots} slots) can't start within {boot} on {on}"
        if room <= 0:
            return Plan(reason=f"{short}, but the cluster is at max_nodes ({view.size}/{cfg.max_nodes})"), fc
        n = min(fc.new_nodes, room)
        wanted = f"{fc.new_nodes}" if fc.complete else f"at least {fc.new_nodes}"
        capped = f" (capped at max_nodes; {wanted} wanted)" if n < fc.new_nodes else ""
        return (
            Plan(
                add=n,
                add_names=names(n),
                add_reason=f"{short}: adding {_plural(n, 'node')} ({view.size + n}/{cfg.max_nodes}){capped}",
            ),
            fc,
        )

    # -- shrink: cost --------------------------------------------------------------------------
    def _due(self, w: IdleNode, now: float) -> tuple[float, str] | None:
        """(time, why) for an idle managed worker: removable now when ``why`` is set, else not before
        ``time``; None for a worker that is not idle or not elb's."""
        cfg = self.config
        node, since = w.node, w.idle_since
        if node is None or since is None:
            return None
        if cfg.billing == "hour":
            period, lead, poll = cfg.billing_period, cfg.removal_lead, cfg.poll_interval
            into = (now - node.launched_at) % period
            remaining = period - into
            if lead <= remaining < lead + poll:
                return now, (
                    f"idle; its paid {minutes(period)} ends in {minutes(remaining)}: the last poll before "
                    f"the next period (removal done >= {minutes(lead)} before it)"
                )
            # The window opens when remaining drops below lead + poll (this period or the next).
            wait = remaining - lead - poll if remaining >= lead + poll else remaining + period - lead - poll
            return now + max(0.0, wait), ""
        keep = cfg.idle_limit  # the cost rule: idle_factor boot times
        idle_for = now - since
        if idle_for >= keep:
            return now, (
                f"idle {minutes(idle_for)} >= {cfg.idle_factor:g} x boot time ({minutes(keep)}): keeping it "
                "warm longer is expected to cost more than a relaunch"
            )
        return since + keep, ""

    def _protected(self, view: View, now: float, fc: Forecast | None) -> frozenset[str]:
        """Workers a waiting job would be placed on (never removed)."""
        if not view.pending:
            return frozenset()
        if fc is None or self.config.launch_delay > 0:
            fc = forecast(view, now + self._horizon(), limit=max(0, self.config.max_nodes - view.size))
        return fc.assigned

    def _idle_due(self, view: View, now: float) -> Sequence[IdleNode]:
        """The idle workers among which the cost rule finds those due now (``_due``): all of them;
        with per-second billing and a tally, only those idle ``idle_factor`` boot times or more
        (the tally keeps them by idle since: the others are not due)."""
        cfg = self.config
        tally = self._idle_in_order(view)
        if tally is not None:
            return tally.idle_for(now, cfg.idle_limit)
        return self._idle(view)

    def _idle_in_order(self, view: View) -> CapacityTally | None:
        """The tally whose idle workers, longest idle first, are in ``_due``'s order too: with
        per-second billing a worker's removal window opens ``idle_factor`` boot times after it
        turned idle (by the hour it depends on each one's launch)."""
        return view.tally if self.config.billing != "hour" and isinstance(view, TallyView) else None

    def _shrink_cost(self, view: View, now: float, fc: Forecast | None, adding: int) -> Plan:
        cfg = self.config
        candidates: list[tuple[float, str, IdleNode, str]] = []
        for w in self._idle_due(view, now):
            due = self._due(w, now)
            if due is None or not due[1]:
                continue
            node, since = w.node, w.idle_since
            assert node is not None and since is not None
            if cfg.billing == "hour":
                order = cfg.billing_period - (now - node.launched_at) % cfg.billing_period
            else:
                order = -(now - since)
            candidates.append((order, w.name, w, due[1]))
        if not candidates:
            return Plan(reason="no idle node is due for removal")
        protected = self._protected(view, now, fc)
        kept = [c for c in candidates if c[1] in protected]
        candidates = [c for c in candidates if c[1] not in protected]
        if not candidates:
            return Plan(reason=f"{_plural(len(kept), 'idle node')} kept: waiting jobs would be placed on them")
        # Whose paid period ends first goes first; never below min_nodes.
        candidates.sort(key=lambda c: (c[0], c[1]))
        room = view.size + adding - cfg.min_nodes
        chosen = candidates[: max(0, room)]
        if not chosen:
            return Plan(reason=f"idle nodes kept for min_nodes {cfg.min_nodes}")
        return Plan(remove=tuple(Removal(w.name, why) for _, _, w, why in chosen))

    # -- fast-forward --------------------------------------------------------------------------
    def quiet_until(self, state: ClusterState, history: History) -> float:
        """A time before which ``decide`` returns an empty plan while the cluster does not change.

        A time after ``now`` says that ``decide`` returns an empty plan now too (the simulator
        asks it before a pass). With either classic rule set on: ``now`` (poll as usual).
        Otherwise the earliest moment a rule changes with the clock alone:

        - a waiting job reaching ``launch_delay`` (it becomes demand);
        - while jobs wait and a node may be launched, a running job passing its requested end by
          more than ``OVERDUE_GRACE``, or one without a requested run time growing older than the
          horizon is ahead: from then on the forecast takes it as running on, its slots are no
          longer about to free, and the demand rises (its end entering the horizon only makes the
          demand fall, which cannot start a launch or a removal on a cluster without an idle node);
        - an idle node's removal window opening.
        """
        cfg = self.config
        now = state.now
        if cfg.grow != "forecast" or cfg.shrink != "cost":
            return now
        view = self._view(state)
        if view.size < cfg.min_nodes:
            return now
        until = INF
        if view.pending:
            if cfg.launch_delay > 0:
                for j in view.pending:
                    if j.submitted is not None and now - j.submitted < cfg.launch_delay:
                        until = min(until, j.submitted + cfg.launch_delay)
            if self._any_idle(view):
                return now  # which idle node a waiting job would take may change with the clock
            room = cfg.max_nodes - view.size
            if room > 0:
                if self._forecast(view, state, self._counted(view, now), room).new_nodes:
                    return now  # it would launch now
                until = min(until, _next_overdue(view, self._horizon()))
        if view.size <= cfg.min_nodes:
            return until
        return min(until, self._next_removal(view, now))

    def _next_removal(self, view: View, now: float) -> float:
        """When an idle worker's removal window opens (``_due``): ``now`` when one is due; inf with none."""
        tally = self._idle_in_order(view)
        if tally is not None:  # the earliest of ``_due``'s times is the longest idle worker's
            by_since = tally.idle_by_since
            if not by_since:
                return INF
            name = by_since[0][1]
            due = self._due(IdleWorker(name, tally.record(name), by_since[0][0]), now)
            assert due is not None
            return now if due[1] else due[0]
        at = INF
        for w in self._idle(view):
            due = self._due(w, now)
            if due is not None:
                at = min(at, now if due[1] else due[0])
        return at

    # -- grow ------------------------------------------------------------------------------
    def _grow(self, view: View, names: Callable[[int], tuple[str, ...]]) -> Plan:
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
                f"{head} > {minutes(cfg.wait_time)}: adding {_plural(n, 'node')} ({view.size + n}/{cfg.max_nodes})"
            ),
        )

    # -- shrink ----------------------------------------------------------------------------
    def _removable(self, w: Worker, now: float) -> str | None:
        """Why this worker may go now, or None."""
        cfg = self.config
        node, since = w.node, w.idle_since
        if node is None or since is None:
            return None
        if cfg.billing == "hour":
            into = (now - node.launched_at) % cfg.billing_period
            if into < cfg.kill_after:
                return None
            return (
                f"idle, {minutes(into)} into its paid {minutes(cfg.billing_period)} "
                f">= kill_after {minutes(cfg.kill_after)}"
            )
        idle_for = now - since
        if idle_for < cfg.idle_time:
            return None
        return f"idle {minutes(idle_for)} >= idle_time {minutes(cfg.idle_time)}"

    def _shrink(self, view: View, now: float) -> Plan:
        cfg = self.config
        assert isinstance(view, ClusterView)  # the timer rule never reads a tally (``_view``)
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
