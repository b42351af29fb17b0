"""A node's boot timeline: when each step of its bring-up was first reached, and the durations
between the steps.

The journal records each step once per node (the first time wins, ``Journal.reach`` and
``Journal.mark_seen``); this module turns its rows into a ``Timeline`` and sums up many. Pure:
no I/O, times are arguments.

The steps, in order:

- ``requested``: elb journals the launch of the node;
- ``running``: the cloud reports its instance running with a private address;
- ``provisioning``: elb starts the playbook on it;
- ``reachable``: the playbook's first task that ran on it succeeded (it answered over SSH);
- ``provisioned``: the playbook succeeded on it;
- ``registered``: the first pass that sees its host up in the scheduler (a queue instance not unreachable);
- ``first_job``: the first pass that sees a job or a reservation on it.

Each duration runs from one step to the next (``DURATIONS``): ``boot`` (requested to running),
``ssh`` (running to reachable: the wait for its SSH server, and elb's own until the playbook
starts), ``provision`` (reachable to provisioned), ``register``
(provisioned to registered), ``first_job`` (registered to first job). A duration is known when
both its steps have a journalled time. A pass reads the scheduler while a playbook runs, so a node can be
seen up (or busy) before its playbook ends: such a duration is 0, never negative.

A step journalled without a time (``None``) was reached before the journal kept timelines (a
node up before elb was upgraded): it stops a later pass from recording it, and the durations
that need it stay unknown.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

DAY = 86400.0


class Step(enum.StrEnum):
    """One step of a node's bring-up, in order."""

    REQUESTED = "requested"
    RUNNING = "running"
    PROVISIONING = "provisioning"
    REACHABLE = "reachable"
    PROVISIONED = "provisioned"
    REGISTERED = "registered"
    FIRST_JOB = "first_job"


STEPS: tuple[Step, ...] = tuple(Step)

# Each duration by name, with the step it starts at and the step it ends at.
DURATIONS: tuple[tuple[str, Step, Step], ...] = (
    ("boot", Step.REQUESTED, Step.RUNNING),
    ("ssh", Step.RUNNING, Step.REACHABLE),
    ("provision", Step.REACHABLE, Step.PROVISIONED),
    ("register", Step.PROVISIONED, Step.REGISTERED),
    ("first_job", Step.REGISTERED, Step.FIRST_JOB),
)
DURATION_NAMES: tuple[str, ...] = tuple(name for name, _, _ in DURATIONS)


@dataclass(frozen=True, slots=True)
class Timeline:
    """The steps one node reached: their times (None: reached at a time not journalled)."""

    node: str
    launched_at: float  # the node's record: start of billing; the sum-ups select nodes by it
    steps: Mapping[Step, float | None] = field(default_factory=dict, hash=False)

    def reached(self, step: Step) -> bool:
        return step in self.steps

    def at(self, step: Step) -> float | None:
        """When ``step`` was first reached; None when not reached or its time is not known."""
        return self.steps.get(step)

    def duration(self, name: str) -> float | None:
        """Seconds of duration ``name`` (``DURATION_NAMES``); None until both its steps have a time."""
        for dname, start, end in DURATIONS:
            if dname == name:
                t0, t1 = self.at(start), self.at(end)
                return None if t0 is None or t1 is None else max(0.0, t1 - t0)
        raise ValueError(f"unknown boot step duration {name!r} (one of {', '.join(DURATION_NAMES)})")

    def durations(self) -> dict[str, float | None]:
        """Every duration by name, None where not known."""
        return {name: self.duration(name) for name in DURATION_NAMES}

    def completed_by(self, step: Step) -> list[tuple[str, float]]:
        """The durations that ``step`` completes: those with ``step`` at one end and a time at
        both. Called as ``step`` is first journalled, each duration is given exactly once (when
        the later-journalled of its two steps arrives), whatever order the steps come in."""
        out: list[tuple[str, float]] = []
        for name, start, end in DURATIONS:
            if step in (start, end):
                seconds = self.duration(name)
                if seconds is not None:
                    out.append((name, seconds))
        return out


def timeline_of(node: str, launched_at: float, rows: Iterable[tuple[str, float | None]]) -> Timeline:
    """The timeline of ``node`` from its journal rows ``(step, at)``; a step name this elb does
    not know is skipped, and a step given twice keeps its earliest known time."""
    known = {s.value: s for s in Step}
    steps: dict[Step, float | None] = {}
    for name, at in rows:
        step = known.get(name)
        if step is None:
            continue
        prev = steps.get(step)
        steps[step] = at if prev is None else prev if at is None else min(prev, at)
    return Timeline(node, launched_at, {s: steps[s] for s in STEPS if s in steps})


@dataclass(frozen=True, slots=True)
class StepSummary:
    """One duration over many nodes: how many nodes have it known, its median and worst (None
    when no node has it)."""

    nodes: int
    median: float | None
    worst: float | None


@dataclass(frozen=True, slots=True)
class TimelineSummary:
    """The durations of the nodes elb launched since ``since``."""

    since: float
    nodes: int  # nodes elb launched since then
    steps: Mapping[str, StepSummary] = field(default_factory=dict, hash=False)
    adopted: int = 0  # nodes of the window elb did not launch (adopted by reconcile): not in the figures

    def describe(self, hours: float) -> str:
        """One line for ``elb status``: median and worst seconds of each duration."""
        if not self.nodes:
            tail = f" ({self.adopted} node(s) adopted, not launched by elb)" if self.adopted else ""
            return f"boot timeline: no node launched in the last {hours:g} h{tail}"
        parts = []
        for name in DURATION_NAMES:
            s = self.steps[name]
            figures = "-" if s.median is None or s.worst is None else f"{s.median:.0f}/{s.worst:.0f}"
            parts.append(f"{name.replace('_', ' ')} {figures}")
        tail = f"; {self.adopted} node(s) adopted, not launched by elb, are not in it" if self.adopted else ""
        return (
            f"boot timeline of {self.nodes} node(s) launched in the last {hours:g} h, "
            f"median/worst seconds: {', '.join(parts)}{tail}"
        )


def summarize(timelines: Iterable[Timeline], now: float, window: float = DAY) -> TimelineSummary:
    """Median and worst of each duration over the timelines of nodes launched within ``window``
    seconds before ``now`` (by their record's ``launched_at``): those elb launched (that reached
    ``requested``); the others, adopted by reconcile, only counted."""
    since = now - window
    recent = [t for t in timelines if t.launched_at >= since]
    chosen = [t for t in recent if t.reached(Step.REQUESTED)]
    steps: dict[str, StepSummary] = {}
    for name in DURATION_NAMES:
        values = [d for d in (t.duration(name) for t in chosen) if d is not None]
        steps[name] = StepSummary(
            nodes=len(values),
            median=statistics.median(values) if values else None,
            worst=max(values) if values else None,
        )
    return TimelineSummary(since=since, nodes=len(chosen), steps=steps, adopted=len(recent) - len(chosen))
