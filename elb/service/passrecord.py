"""What a pass leaves behind for the log, the stats and the metrics: its result, the figures of
the last pass, and the counters since elb started. Values only."""

from __future__ import annotations

from dataclasses import dataclass, field

from elb.core.demand import NotDemand
from elb.core.model import Plan, Snapshot, by_reason
from elb.core.planner import PassPlan
from elb.service.actuator import Outcomes


@dataclass
class PassResult:
    ok: bool
    now: float
    plan: Plan | None = None
    snapshot: Snapshot | None = None
    error: str | None = None
    outcomes: Outcomes = field(default_factory=Outcomes)
    # The dry run's whole plan (on the journal's workers when the cloud was not read), and what it read of the cloud.
    planned: PassPlan | None = None
    cloud_note: str = ""

    def summary(self) -> str:
        if not self.ok:
            return f"pass failed, nothing changed: {self.error}"
        assert self.plan is not None
        parts = self.plan.describe()
        o = self.outcomes
        if o.added:
            parts.append(f"added {', '.join(o.added)}")
        if o.removed:
            parts.append(f"removed {', '.join(o.removed)}")
        landed = [n for n in o.kept if n not in o.failed]  # the others are said by their reason
        if landed:
            parts.append(f"kept (job landed) {', '.join(landed)}")
        if o.stopped:
            parts.append(f"stopped into the warm pool {', '.join(o.stopped)}")
        if o.restarted:
            parts.append(f"restarted from the warm pool {', '.join(o.restarted)}")
        parts.extend(f"repaired {r}" for r in by_reason(_node_and_what(r) for r in o.repaired))
        parts.extend(by_reason(o.failed.items()))
        if o.given_back:
            parts.append(f"given back {', '.join(o.given_back)}")
        if o.held:
            parts.append(f"held from the scheduler's asks {', '.join(o.held)}")
        if o.reopened:
            parts.append(f"reopened to the scheduler's asks {', '.join(o.reopened)}")
        if o.postponed:
            parts.append(f"stopping: not started {', '.join(o.postponed)}")
        return "; ".join(parts)


def _node_and_what(repaired: str) -> tuple[str, str]:
    """A repair as ``Outcomes.repaired`` holds it (``NODE: what was repaired``): the node and what."""
    node, _, what = repaired.partition(": ")
    return node, what


@dataclass
class LastPass:
    """Figures of the last pass, for metrics."""

    pending_jobs: int = 0
    pending_slots: int = 0
    oldest_wait: float = 0.0
    duration: float = 0.0
    last_good: float = 0.0
    lost_kept: int = 0  # lost nodes kept because the scheduler lists work on them (an admin must look)
    backoff_rounds: int = 0  # failed launch rounds in a row (0: launching is not backed off)
    backoff_wait: float = 0.0  # seconds before the next launch may start
    unservable_jobs: int = 0  # waiting jobs no node elb launches could ever run (never demand)
    not_demand: tuple[NotDemand, ...] = ()  # the waiting jobs the last plan left out, with why


@dataclass
class Counters:
    added: int = 0
    removed: int = 0
    failures: int = 0
    failed_passes: int = 0
    repairs: int = 0
    launches_held: int = 0  # launches the policy wanted and the back-off did not allow
    notices: dict[str, int] = field(default_factory=dict)  # the cloud's notices about managed nodes, by kind
    rescheduled: int = 0  # jobs requeued from a node about to be taken back (spot interruption)
    moved_on_demand: int = 0  # jobs bound to on-demand nodes after too many spot interruptions
    stopped: int = 0  # nodes stopped into a warm pool
    restarted: int = 0  # nodes started again from a warm pool, ready
    given_back: int = 0  # nodes the scheduler asked for and elb gave back

    def count(self, o: Outcomes) -> None:
        """Add what one pass's operations achieved."""
        self.added += len(o.added)
        self.removed += len(o.removed)
        self.failures += len(o.failed)
        self.repairs += len(o.repaired)
        self.stopped += len(o.stopped)
        self.restarted += len(o.restarted)
        self.given_back += len(o.given_back)
        self.rescheduled += len(o.requeued)
        self.moved_on_demand += len(o.moved)
