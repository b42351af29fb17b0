"""Which waiting jobs the policy plans for: the pass's snapshot split into demand, each job with
its node group (``DemandSplit``), and the jobs that are not demand with the reason
(``NotDemand``). Values every scheduler's driver makes from its own view of its jobs
(``elb.core.scheduler.Scheduler.demand``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from elb.core.frozen import quick_init
from elb.core.model import Job, Snapshot

_NO_GROUPS: Mapping[Job, str] = MappingProxyType({})


@quick_init
@dataclass(frozen=True, slots=True)
class NotDemand:
    """A waiting job the policy does not plan for, one of three kinds: ``held`` by the scheduler
    for a reason of its own, whatever nodes there are (Slurm's pending reasons: a dependency, a
    begin time, a hold, a limit, a node of its own choosing that is not up); not yet, until
    ``until`` (the ``qsub -a`` time after which it is demand); else unservable: no node elb
    launches could ever run it."""

    job: Job
    reason: str
    until: float | None = None
    held: bool = False

    @property
    def unservable(self) -> bool:
        return self.until is None and not self.held

    @property
    def verdict(self) -> str:
        """``held: why``, ``not yet: why`` or ``unservable: why``."""
        kind = "held" if self.held else "unservable" if self.until is None else "not yet"
        return f"{kind}: {self.reason}"

    def describe(self) -> str:
        tasks = f" ({self.job.tasks} tasks)" if self.job.tasks > 1 else ""
        return f"job {self.job.job_id}{tasks}: {self.verdict}"

    def as_json(self) -> dict[str, object]:
        """JSON-ready: job number, tasks, unservable, held or not yet (``until``), the reason."""
        return {
            "job_id": self.job.job_id,
            "tasks": self.job.tasks,
            "unservable": self.unservable,
            "held": self.held,
            "until": self.until,
            "reason": self.reason,
        }


@quick_init
@dataclass(frozen=True, slots=True)
class DemandSplit:
    """``snapshot``: what the policy plans on (the jobs in ``not_demand`` left out);
    ``group_of``: the node group each waiting job in it goes to, as the driver placed it."""

    snapshot: Snapshot
    not_demand: tuple[NotDemand, ...] = ()
    group_of: Mapping[Job, str] = dataclasses.field(default_factory=lambda: _NO_GROUPS)

    @property
    def unservable(self) -> tuple[NotDemand, ...]:
        return tuple(n for n in self.not_demand if n.unservable)
