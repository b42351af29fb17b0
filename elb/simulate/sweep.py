"""Sweeps: each policy replayed over a range of its own knob, the replays in parallel processes.

``--sweep KEY=V1,V2,...`` (repeatable) replays each listed policy that has parameter KEY once per
value; a policy with two swept keys is replayed over every pair of values (a grid). ``--sweep``
alone replays each listed policy over its own knob (``KNOBS``: what an admin of that system turns
to trade cost against wait), with its default among the values. Each replay is described by a
``RunSpec`` (names and values only), so that a worker process builds its policy itself from the
same ``Setup`` the parent has: the replays run in ``workers`` processes (``multiprocessing``), in
the order given, and give what they give run one after another.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from elb.core.policy.base import Policy
from elb.simulate.engine import SimOutcome, SimSettings
from elb.simulate.groups import SimGroups
from elb.simulate.report import Billing, Metrics
from elb.simulate.runner import Prepared, SimError, build_policy, has_param, param_value, replay, with_param

T = TypeVar("T")
Replayed = tuple[Metrics, SimOutcome]  # a replay's metrics and its raw outcome

# Each policy's own knob(s) and the values a bare ``--sweep`` tries (the default among them):
# Slurm's SuspendTime, ParallelCluster's scaledown idle time, StarCluster's wait_time (it takes
# at least 300 s), elb's idle_factor and launch_delay (a grid of both).
KNOBS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "elb": (("idle_factor", ("0.125", "0.25", "0.5", "1", "2", "4")), ("launch_delay", ("0", "120", "300"))),
    "slurm": (("suspend_time", ("60", "120", "300", "600", "1200", "1800")),),
    "parallelcluster": (("idle_time", ("60", "120", "300", "600", "1200", "1800")),),
    "starcluster": (("wait_time", ("300", "600", "900", "1800", "3600", "7200")),),
}


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One replay: a policy by name, the parameters set on it (``--set``, then the swept ones),
    and whether it is the replay with the warm pool."""

    policy: str
    sets: tuple[tuple[str, str], ...]
    swept: tuple[tuple[str, str], ...]  # the swept keys and this run's values
    label: str
    pooled: bool = False
    default: bool = True  # every swept value is the policy's own default

    @property
    def knobs(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.swept)


@dataclass(frozen=True, slots=True)
class Setup:
    """What a replay is built from, in the parent and in each worker."""

    prepared: Prepared
    pooled: Prepared | None  # the same jobs with the warm pool (``--warm-pool``)
    settings: SimSettings
    billing: Billing
    price: float
    boot_time: float
    poll: float
    groups: SimGroups | None

    def base(self, name: str) -> Policy:
        return build_policy(
            name,
            billing=self.billing,
            slots_per_node=self.settings.slots_per_node,
            boot_time=self.boot_time,
            max_nodes=self.prepared.max_nodes,
            poll_interval=self.poll,
            groups=self.groups,
        )

    def policy(self, spec: RunSpec) -> Policy:
        p = self.base(spec.policy)
        for key, value in spec.sets:
            p = with_param(p, key, value)
        return p


def parse_sweeps(raw: Sequence[str]) -> list[tuple[str, tuple[str, ...]] | None]:
    """``--sweep`` options: (key, values), or None for a bare ``--sweep`` (each policy's knobs)."""
    out: list[tuple[str, tuple[str, ...]] | None] = []
    for text in raw:
        if not text.strip():
            out.append(None)
            continue
        key, sep, values = text.partition("=")
        vs = tuple(v.strip() for v in values.split(",") if v.strip())
        if not sep or not key.strip() or not vs:
            raise SimError(f"--sweep wants KEY=V1,V2,... or nothing, got {text!r}")
        out.append((key.strip(), vs))
    return out


def plan_runs(
    setup: Setup, names: Sequence[str], sets: Sequence[tuple[str, str]], sweeps: Sequence[str]
) -> list[RunSpec]:
    """The replays to make: each policy once, or over its swept values (see the module's
    description), each twice with a warm pool (without it, then with it)."""
    asked = parse_sweeps(sweeps)
    specs: list[RunSpec] = []
    keys_seen: set[str] = set()
    for name in names:
        base = setup.base(name)
        own = [(k, v) for k, v in sets if has_param(base, k)]
        for key, value in own:
            base = with_param(base, key, value)
        axes = _axes(name, base, asked)
        keys_seen.update(axes)
        specs += _runs_of(setup, name, base, own, axes)
    _check_used(setup, names, sets, asked, keys_seen)
    return specs


def _axes(name: str, base: Policy, asked: Sequence[tuple[str, tuple[str, ...]] | None]) -> dict[str, tuple[str, ...]]:
    """The values to sweep a policy's parameters over: a bare ``--sweep`` its knobs, and each
    ``KEY=...`` it has."""
    axes: dict[str, tuple[str, ...]] = {}
    for sweep in asked:
        if sweep is None:
            axes.update(KNOBS.get(name, ()))
        elif has_param(base, sweep[0]):
            axes[sweep[0]] = sweep[1]
    return axes


def _runs_of(
    setup: Setup, name: str, base: Policy, own: Sequence[tuple[str, str]], axes: Mapping[str, tuple[str, ...]]
) -> list[RunSpec]:
    """A policy's replays: one for each combination of its swept values, each followed by the
    same with the warm pool when there is one."""
    specs: list[RunSpec] = []
    combos = list(itertools.product(*[[(k, v) for v in vs] for k, vs in axes.items()])) or [()]
    for combo in combos:
        swept = tuple(combo)
        default = all(param_value(with_param(base, k, v), k) == param_value(base, k) for k, v in swept)
        label = f"{name} {' '.join(f'{k}={v}' for k, v in swept)}" if swept else name
        spec = RunSpec(name, (*own, *swept), swept, label, default=default)
        specs.append(spec)
        if setup.pooled is not None:
            size = setup.pooled.groups.groups.groups[0].warm_pool.max_nodes
            specs.append(RunSpec(name, spec.sets, swept, f"{label}+pool{size}", pooled=True, default=default))
    return specs


def _check_used(
    setup: Setup,
    names: Sequence[str],
    sets: Sequence[tuple[str, str]],
    asked: Sequence[tuple[str, tuple[str, ...]] | None],
    keys_seen: set[str],
) -> None:
    """``SimError`` for a ``--set`` or a ``--sweep`` key no listed policy has."""
    for key, _ in sets:
        if not any(has_param(setup.base(name), key) for name in names):
            raise SimError(f"--set: no listed policy ({', '.join(names)}) has a parameter {key!r}")
    for sweep in asked:
        if sweep is not None and sweep[0] not in keys_seen:
            raise SimError(f"no listed policy has a parameter {sweep[0]!r}")


def replay_one(setup: Setup, spec: RunSpec, progress: Callable[[float], None] | None = None) -> Replayed:
    """One replay's metrics and its raw outcome."""
    prepared = setup.pooled if spec.pooled and setup.pooled is not None else setup.prepared
    return replay(
        prepared,
        setup.policy(spec),
        setup.settings,
        billing=setup.billing,
        price=setup.price,
        label=spec.label,
        progress=progress,
    )


def run_one(setup: Setup, spec: RunSpec, progress: Callable[[float], None] | None = None) -> Metrics:
    return replay_one(setup, spec, progress)[0]


_SETUP: Setup | None = None  # a worker's own copy, set once when it starts


def _start_worker(setup: Setup) -> None:
    global _SETUP  # noqa: PLW0603 (a worker process's one setup, sent once rather than with every replay)
    _SETUP = setup


def _run_in_worker(spec: RunSpec) -> Metrics:
    assert _SETUP is not None
    return run_one(_SETUP, spec)


def _replay_in_worker(spec: RunSpec) -> Replayed:
    assert _SETUP is not None
    return replay_one(_SETUP, spec)


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _map(  # noqa: PLR0917 (run_all's and replay_all's arguments, with the function each runs)
    setup: Setup,
    specs: Sequence[RunSpec],
    workers: int,
    here: Callable[[Setup, RunSpec, Callable[[float], None] | None], T],
    there: Callable[[RunSpec], T],
    progress: Callable[[str], Callable[[float], None] | None] | None,
    done: Callable[[int, int], None] | None,
) -> list[T]:
    if workers <= 1 or len(specs) <= 1:
        return [here(setup, s, progress(s.label) if progress else None) for s in specs]
    results: list[T] = []
    ctx = multiprocessing.get_context("spawn" if os.name != "posix" else "fork")
    with ctx.Pool(min(workers, len(specs)), initializer=_start_worker, initargs=(setup,)) as pool:
        ordered: Iterator[T] = pool.imap(there, specs)
        for i, r in enumerate(ordered, 1):
            results.append(r)
            if done is not None:
                done(i, len(specs))
    return results


def run_all(
    setup: Setup,
    specs: Sequence[RunSpec],
    workers: int,
    *,
    progress: Callable[[str], Callable[[float], None] | None] | None = None,
    done: Callable[[int, int], None] | None = None,
) -> list[Metrics]:
    """Every replay's metrics, in the order of ``specs``: in this process when one worker (or
    one replay) is asked for (``progress`` then draws each one), else in ``workers`` processes
    (``done`` told of each finished replay)."""
    return _map(setup, specs, workers, run_one, _run_in_worker, progress, done)


def replay_all(
    setup: Setup,
    specs: Sequence[RunSpec],
    workers: int,
    *,
    progress: Callable[[str], Callable[[float], None] | None] | None = None,
    done: Callable[[int, int], None] | None = None,
) -> list[Replayed]:
    """``run_all`` with each replay's raw outcome too (its node lives and placements with
    ``SimSettings.record``: what ``--spend-by`` and ``--budget-sweep`` read)."""
    return _map(setup, specs, workers, replay_one, _replay_in_worker, progress, done)


__all__: Sequence[str] = (
    "KNOBS",
    "Replayed",
    "RunSpec",
    "Setup",
    "default_workers",
    "parse_sweeps",
    "plan_runs",
    "replay_all",
    "run_all",
)
