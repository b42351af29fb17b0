"""Where a replay's CPU goes, by step: a sampling of the stack (every millisecond of the process's
CPU, ``signal.ITIMER_PROF``), each sample given to the innermost step on it.

The steps are the simulator's own (``elb.simulate.engine.Simulator``): its ``events`` (job
submissions, starts and ends, nodes becoming ready, dispatch), its ``snapshot`` (the values a pass
reads, made for what changed, or the changes alone that a ``NotedHint`` reads), the ``policy``
(the policy's ``decide`` and ``quiet_until``, or ``quiet_until_noted``, its tally and its packing
with them), the ``planner`` (``elb.core.planner.plan_pass`` around the
policy, and the inputs the simulator hands it), carrying out a plan (``carry out``: launches and
removals) and the quiet hint around the policy's (``quiet hint``); ``other`` is the rest (the
loop's own steps, the report). A sample costs about 10 us, so the steps' shares are those of a
replay about 1% slower than one alone.

The events, the planner and carrying out plans are what a replay costs whatever the policy and
however it reads the cluster: ``bench_replay_scale --steps`` prints them beside the plain
replay's CPU, as a floor under the ratio to it.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TypeVar

from elb.core import planner
from elb.core.policy import default, grouped, peers
from elb.simulate import engine

T = TypeVar("T")
STEPS = ("events", "snapshot", "policy", "planner", "carry out", "quiet hint", "other")
INTERVAL = 0.001  # seconds of CPU between samples

_Sim = engine.Simulator
# The code of each step's functions: a sample goes to the first of them found from the innermost
# frame out (the policy's calls within the planner's pass are the policy's, the snapshot a quiet
# hint takes is the snapshot's).
_ROOTS: dict[CodeType, str] = {
    _Sim._events_at.__code__: "events",
    _Sim.dispatch.__code__: "events",
    _Sim.snapshot.__code__: "snapshot",
    _Sim._noted.__code__: "snapshot",  # the changes alone, which a ``NotedHint`` reads instead of a snapshot
    grouped.decide_demand.__code__: "policy",
    _Sim._plan.__code__: "planner",
    planner.plan_pass.__code__: "planner",
    _Sim._carry_out.__code__: "carry out",
    _Sim._next_poll.__code__: "quiet hint",
    _Sim._wake.__code__: "quiet hint",  # before a pass too (``Simulator._pass``)
}
for _cls in (default.ElbPolicy, peers.SlurmPolicy, peers.ParallelclusterPolicy, peers.StarclusterPolicy):
    _ROOTS[_cls.quiet_until.__code__] = "policy"
    _ROOTS[_cls.decide.__code__] = "policy"
# The hint on the changes alone (``NotedHint``: StarCluster's, the one policy that has it), the policy's as well.
_ROOTS[peers.StarclusterPolicy.quiet_until_noted.__code__] = "policy"


def _step(frame: FrameType | None) -> str:
    while frame is not None:
        step = _ROOTS.get(frame.f_code)
        if step is not None:
            return step
        frame = frame.f_back
    return "other"


def sampled(fn: Callable[[], T]) -> tuple[T, Counter[str]]:
    """``fn()``, and the samples of the CPU it took, by step."""
    samples: Counter[str] = Counter()

    def sample(_signum: int, frame: FrameType | None) -> None:
        samples[_step(frame)] += 1

    before = signal.signal(signal.SIGPROF, sample)
    signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)
    try:
        out = fn()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0.0, 0.0)
        signal.signal(signal.SIGPROF, before)
    return out, samples


def shares(samples: Counter[str]) -> dict[str, float]:
    """Each step's share of the samples (0 to 1), in ``STEPS``'s order."""
    total = sum(samples.values()) or 1
    return {step: samples[step] / total for step in STEPS}
