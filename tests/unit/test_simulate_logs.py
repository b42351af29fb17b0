"""``elb simulate`` on the real logs: invariants, fast-forward equivalence, and KTH's recorded waits.

The logs live outside the repository (``../shared/traces`` next to it, or ``$ELB_TRACES``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from elb.core.policy.base import Policy, QuietHint
from elb.simulate.engine import NodeLife, SimOutcome, SimSettings
from elb.simulate.report import Metrics
from elb.simulate.runner import Prepared, build_policy, prepare, replay
from elb.simulate.swf import read_swf
from tests.unit.traces import KTH, NASA, needs

needs_logs = needs(KTH, NASA)
POLICIES = ("elb", "starcluster", "parallelcluster", "slurm", "static")


def run(prepared: Prepared, name: str, spn: int, billing: str = "second", **kw: object) -> tuple[Metrics, SimOutcome]:
    policy: Policy = build_policy(
        name,
        billing=billing,  # type: ignore[arg-type]
        slots_per_node=spn,
        boot_time=300,
        max_nodes=prepared.max_nodes,
    )
    settings = SimSettings(slots_per_node=spn, max_nodes=prepared.max_nodes, **kw)  # type: ignore[arg-type]
    return replay(prepared, policy, settings, billing=billing, price=1.0)  # type: ignore[arg-type]


def check_invariants(prepared: Prepared, out: SimOutcome, spn: int, *, strands: bool = False) -> None:
    """``strands``: the policy may leave jobs waiting for ever (StarCluster: see below)."""
    if strands:
        assert out.never_started == 0 or out.stalled  # a stranded job is reported, never dropped silently
        started = {p.job_id for p in out.placements}
        assert len(started) + out.never_started == len(prepared.jobs)
    else:
        assert out.never_started == 0
        assert not out.stalled
        assert sorted(p.job_id for p in out.placements) == sorted(j.job_id for j in prepared.jobs)
    lives: dict[str, list[NodeLife]] = {}
    for n in out.nodes:
        lives.setdefault(n.name, []).append(n)
    by_job = {j.job_id: j for j in prepared.jobs}
    deltas: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for p in out.placements:
        job = by_job[p.job_id]
        assert p.start >= p.submit == job.submit
        assert p.end == pytest.approx(p.start + job.run)
        assert sum(used for _, used in p.nodes) >= job.slots
        for name, used in p.nodes:
            deltas[name].append((p.start, used))
            deltas[name].append((p.end, -used))
            if name == "master":  # StarCluster's master runs jobs; it is there throughout, not billed
                continue
            # on a node that was ready at the start and still there at the end
            assert any(life.ready_at <= p.start and life.terminated_at >= p.end for life in lives[name]), (
                p,
                lives[name],
            )
    for name, ds in deltas.items():
        ds.sort(key=lambda d: (d[0], d[1]))  # ends before starts at the same instant
        used = 0
        for _, d in ds:
            used += d
            assert 0 <= used <= spn, name


@needs_logs
@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize(("log", "days", "spn"), [(KTH, 30, 8), (NASA, 20, 32)])
def test_invariants_on_real_logs(name: str, log: Path, days: float, spn: int) -> None:
    wl = read_swf(log, start=10 * 86400, days=days)
    prepared = prepare(wl, spn, None)
    _, out = run(prepared, name, spn, record=True)
    # StarCluster adds nodes only when more jobs queue than the cluster has slots (or it has none):
    # a wide job queued alone behind a small cluster waits until more jobs come, at a log's end for ever
    check_invariants(prepared, out, spn, strands=name == "starcluster")


@needs_logs
@pytest.mark.parametrize("backfill", [False, True])
def test_invariants_with_backfill(backfill: bool) -> None:
    wl = read_swf(KTH, start=40 * 86400, days=20)
    prepared = prepare(wl, 8, 20)
    _, out = run(prepared, "slurm", 8, record=True, dispatch="easy" if backfill else "fifo")
    check_invariants(prepared, out, 8)


@needs_logs
@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("billing", ["second", "hour"])
def test_fast_forward_gives_identical_results(name: str, billing: str) -> None:
    """Every policy that offers ``quiet_until`` (elb's included, when it does) is checked."""
    wl = read_swf(KTH, start=100 * 86400, days=12)
    prepared = prepare(wl, 8, 52)
    probe = build_policy(name, billing=billing, slots_per_node=8, boot_time=300, max_nodes=52)  # type: ignore[arg-type]
    if not isinstance(probe, QuietHint):
        pytest.skip(f"policy {name} offers no quiet_until: it is polled every interval anyway")
    fast, fout = run(prepared, name, 8, billing, record=True)
    slow, sout = run(prepared, name, 8, billing, record=True, fast_forward=False)
    assert fast.decisions < slow.decisions  # it did skip polls
    assert fout.placements == sout.placements
    assert fout.nodes == sout.nodes
    ignore = {"replay_seconds", "decisions"}
    assert {k: v for k, v in fast.as_dict().items() if k not in ignore} == {
        k: v for k, v in slow.as_dict().items() if k not in ignore
    }


@needs_logs
def test_static_kth_with_easy_backfill_waits_like_the_log() -> None:
    """KTH's SP2 (100 processors) ran EASY; the log records a mean wait of about 255 min."""
    wl = read_swf(KTH)
    recorded = 254.9  # min, mean of field 3 over the jobs replayed
    prepared = prepare(wl, 100, 1)
    m, out = run(prepared, "static", 100, dispatch="easy")
    assert out.never_started == 0
    assert recorded / 3 < m.wait_mean / 60 < recorded * 3, m.wait_mean / 60
    fifo, _ = run(prepared, "static", 100, dispatch="fifo")
    assert fifo.wait_mean > 2 * m.wait_mean  # strict FIFO is far worse on the real machine's size
