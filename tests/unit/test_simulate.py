"""``elb simulate``: hand-made logs with answers known by hand, and the SWF reader and billing."""

from __future__ import annotations

import dataclasses
import gc
import gzip
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from elb.cli.main import main
from elb.core.backoff import GroupTrackers
from elb.core.model import Event, History, Job, NodeState, Plan
from elb.core.policy.peers import (
    Limits,
    ParallelclusterPolicy,
    SlurmPolicy,
    StarclusterPolicy,
    StaticParams,
    StaticPolicy,
)
from elb.core.policy.placement import host_order
from elb.core.state import ClusterState
from elb.schedulers.sge.states import job_phase
from elb.simulate import report, runner
from elb.simulate.engine import NodeLife, SimOutcome, SimSettings, Simulator, _Waiting
from elb.simulate.report import billed_seconds, floors, percentile
from elb.simulate.runner import SimError, build_policy, prepare, replay, with_param
from elb.simulate.swf import SimJob, SwfError, Workload, parse_text, read_swf


def swf_line(job_id: int, submit: float, run: float, procs: int, req_procs: int = -1, req_time: float = -1) -> str:
    fields = [job_id, submit, -1, run, procs, -1, -1, req_procs, req_time, -1, 1, 1, 1, -1, -1, -1, -1, -1]
    return " ".join(str(f) for f in fields)


def run_jobs(
    jobs: list[SimJob], policy: object, *, spn: int = 8, max_nodes: int = 10, boot: float = 300.0, **kw: object
) -> tuple[Simulator, object]:
    settings = SimSettings(slots_per_node=spn, max_nodes=max_nodes, boot_time=boot, record=True, **kw)  # type: ignore[arg-type]
    sim = Simulator(jobs, policy, settings, initial_nodes=int(getattr(policy, "initial_nodes", 0)))  # type: ignore[arg-type]
    return sim, sim.run()


def limits(max_nodes: int = 10, spn: int = 8) -> Limits:
    return Limits(max_nodes=max_nodes, slots_per_node=spn)


# -- SWF ------------------------------------------------------------------------------------------


def test_swf_uses_requested_procs_then_allocated_and_counts_skips() -> None:
    text = "\n".join(
        [
            "; MaxProcs: 128",
            swf_line(1, 0, 100, 4, req_procs=16, req_time=200),  # requested wins
            swf_line(2, 10, 50, 2),  # allocated when nothing requested
            swf_line(3, 20, 0, 2),  # run time 0: skipped
            swf_line(4, 30, 10, -1),  # no slots: skipped
            swf_line(5, 5, 10, 1),  # out of order: sorted by submit
        ]
    )
    wl = parse_text(text)
    assert [(j.job_id, j.slots) for j in wl.jobs] == [(1, 16), (5, 1), (2, 2)]
    assert wl.jobs[0].requested == 200
    assert wl.jobs[2].requested is None
    assert wl.skipped == {"run time <= 0": 1, "slots <= 0": 1}
    assert wl.max_procs == 128


def test_swf_bad_line_names_the_line() -> None:
    with pytest.raises(SwfError, match=r":2: expected 18 fields"):
        parse_text("; header\n1 2 3\n")
    with pytest.raises(SwfError, match=":1: not a number"):
        parse_text(swf_line(1, 0, 10, 1).replace(" 10 ", " x ", 1))


def test_swf_reads_gzip_and_window(tmp_path: Path) -> None:
    lines = [swf_line(i, i * 86400, 60, 1) for i in range(1, 6)]
    path = tmp_path / "log.swf.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    wl = read_swf(path, start=2 * 86400, days=2)
    assert [j.job_id for j in wl.jobs] == [2, 3]
    assert wl.skipped["outside --start/--days window"] == 3


# -- billing, floors, percentiles -------------------------------------------------------------------


def test_billing_second_has_a_minute_minimum_and_hour_rounds_up() -> None:
    short = NodeLife("n", 0, 10, 30, 0)
    long = NodeLife("n", 0, 10, 3601, 0)
    assert billed_seconds(short, "second") == 60
    assert billed_seconds(long, "second") == 3601
    assert billed_seconds(short, "hour") == 3600
    assert billed_seconds(long, "hour") == 7200
    assert billed_seconds(NodeLife("n", 0, 0, 3600, 0), "hour") == 3600


def test_floors_by_hand() -> None:
    # two 4-slot jobs overlapping for 50 s on 8-slot nodes, then a 16-slot (2-node) job
    jobs = [SimJob(1, 0, 100, 4), SimJob(2, 50, 100, 4), SimJob(3, 1000, 360, 16)]
    fl = floors(jobs, 8)
    assert fl.floor_node_hours == pytest.approx((400 + 400 + 16 * 360) / 8 / 3600)
    # zero wait: one node 0..150, two nodes 1000..1360
    assert fl.zero_wait_node_hours == pytest.approx((150 + 2 * 360) / 3600)
    assert fl.peak_nodes == 2  # 16 slots at once


def test_percentile_interpolates() -> None:
    assert percentile([0, 10], 50) == 5
    assert percentile([1, 2, 3, 4, 5], 100) == 5
    assert percentile([], 95) == 0


# -- hand-made logs ---------------------------------------------------------------------------------


def test_one_job_slurm_waits_exactly_the_boot_time() -> None:
    sim, _ = run_jobs([SimJob(1, 1000, 1000, 4)], SlurmPolicy(limits()))
    out = sim.out
    (p,) = out.placements
    assert p.start == 1300  # launched at the first poll (1000), ready 300 s later
    assert p.end == 2300
    assert out.waits == [300]
    assert out.launches == 1
    (life,) = out.nodes
    assert (life.launched_at, life.ready_at, life.terminated_at) == (1000, 1300, 2300)
    assert life.busy_seconds == 1000


def test_one_job_on_an_empty_starcluster_gets_a_node_at_once() -> None:
    sim, _ = run_jobs([SimJob(1, 0, 100, 4)], StarclusterPolicy(limits()))
    # no slot in the cluster: the first poll adds a node, ready 300 s later
    assert sim.out.waits == [300]


def test_starcluster_waits_for_wait_time_when_the_cluster_has_slots() -> None:
    # 10 one-slot jobs on one 8-slot node: 2 queue (2 <= 8 slots: no add) and wait for the first
    # ones to end; 20 queued jobs > 8 slots: the oldest must wait over 900 s first
    jobs = [SimJob(1, 0, 5000, 8)] + [SimJob(i, 400 + i, 100, 1) for i in range(2, 22)]
    sim, _ = run_jobs(jobs, StarclusterPolicy(limits(max_nodes=3)))
    starts = sorted(p.start for p in sim.out.placements if p.job_id != 1)
    assert starts[0] >= 400 + 900 + 300  # the second node: after wait_time and a boot


def test_elb_policy_runs_through_make_policy() -> None:
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=5)
    sim, _ = run_jobs([SimJob(1, 0, 100, 4)], policy, max_nodes=5)
    assert sim.out.launches >= 1
    assert len(sim.out.placements) == 1
    assert sim.out.placements[0].start >= 300


def test_burst_needing_exactly_three_nodes() -> None:
    jobs = [SimJob(i, 0, 600, 8) for i in (1, 2, 3)]
    sim, _ = run_jobs(jobs, SlurmPolicy(limits()))
    assert sim.out.launches == 3
    assert sim.out.waits == [300, 300, 300]
    assert sorted({n for p in sim.out.placements for n, _ in p.nodes}) == ["node001", "node002", "node003"]
    # the same demand as one wide job: three whole nodes
    sim, _ = run_jobs([SimJob(9, 0, 600, 24)], SlurmPolicy(limits()))
    assert sim.out.launches == 3
    (p,) = sim.out.placements
    assert p.nodes == (("node001", 8), ("node002", 8), ("node003", 8))


def test_parallelcluster_asks_again_while_nodes_boot() -> None:
    jobs = [SimJob(i, 0, 600, 8) for i in (1, 2, 3)]
    sim, _ = run_jobs(jobs, ParallelclusterPolicy(limits(max_nodes=10)))
    # polls at 0, 60, 120, 180 each add 3 (booting nodes count as busy) until max_nodes 10
    assert sim.out.launches == 10
    assert sim.out.waits == [300, 300, 300]


def test_narrow_jobs_go_first_fit_or_best_fit() -> None:
    # node001 keeps 2 free slots, node002 keeps 4; then a 2-slot job arrives
    jobs = [SimJob(1, 0, 1000, 6), SimJob(2, 0, 1000, 4), SimJob(3, 1, 500, 2)]
    policy = StaticPolicy(limits(max_nodes=2))
    first, _ = run_jobs(jobs, policy, max_nodes=2)
    by_id = {p.job_id: p for p in first.out.placements}
    assert by_id[1].nodes == (("node001", 6),)
    assert by_id[2].nodes == (("node002", 4),)
    assert by_id[3].start == 1  # static nodes are ready from the start
    # first fit: the lowest-numbered node with room; best fit: the fullest that fits
    jobs = [SimJob(1, 0, 1000, 4), SimJob(2, 0, 1000, 7), SimJob(3, 1, 500, 1)]
    first, _ = run_jobs(jobs, policy, max_nodes=2)
    best, _ = run_jobs(jobs, policy, max_nodes=2, placement="best")
    assert {p.job_id: p.nodes for p in first.out.placements}[3] == (("node001", 1),)
    assert {p.job_id: p.nodes for p in best.out.placements}[3] == (("node002", 1),)


def test_host_order_is_numeric() -> None:
    sim = Simulator([SimJob(1, 0, 10, 1)], StaticPolicy(limits(max_nodes=1)), SimSettings(max_nodes=1))
    for name in ("node999", "node1000"):
        sim._launch(name, 0.0, boot=0.0)
    wide = _Waiting(SimJob(2, 0, 10, 16), Job(2, "j", "u", "qw", job_phase("qw"), 16), "default", 16, whole=2)
    parts = sim._place_now(wide)
    assert parts is not None
    assert [n.name for n, _ in parts] == ["node999", "node1000"]


def test_job_bigger_than_the_cluster_stays_in_the_replay_as_unservable_not_a_hang() -> None:
    wl = Workload("hand", [SimJob(1, 0, 100, 4), SimJob(2, 10, 100, 40), SimJob(3, 20, 100, 8)])
    prepared = prepare(wl, 8, 3)
    assert [(j.job_id, why) for j, why in prepared.unservable] == [
        (2, "40 slots in PE mpi ($fill_up): more than the 24 slots of group default at max_nodes 3")
    ]
    assert len(prepared.jobs) == 3  # kept, not dropped before the replay
    policy = build_policy("slurm", billing="second", slots_per_node=8, boot_time=300, max_nodes=3)
    m, out = replay(prepared, policy, SimSettings(slots_per_node=8, max_nodes=3), billing="second", price=1.0)
    assert m.jobs == 2 and m.unservable == 1 and not m.saturated
    assert out.never_started == 0 and [j.job_id for j, _ in out.unservable] == [2]
    assert m.launches <= 2  # jobs 1 and 3 at most: never three nodes for job 2


def test_a_policy_that_never_adds_stalls_and_says_so() -> None:
    sim, _ = run_jobs([SimJob(1, 0, 100, 4)], StaticPolicy(limits(max_nodes=0), StaticParams(nodes=0)))
    assert sim.out.stalled
    assert sim.out.never_started == 1


def test_fifo_blocks_easy_backfills_and_sge_starts_around_a_blocked_job() -> None:
    jobs = [
        SimJob(1, 0, 1000, 2, requested=1000),  # runs at once
        SimJob(2, 1, 100, 4, requested=100),  # head: needs the whole node, reserved at 1000
        SimJob(3, 2, 400, 2, requested=500),  # ends before 1000: backfilled at once
        SimJob(4, 3, 400, 2, requested=2000),  # would delay job 2: waits
    ]
    policy = StaticPolicy(limits(max_nodes=1, spn=4))
    fifo, _ = run_jobs(jobs, policy, spn=4, max_nodes=1, dispatch="fifo")
    starts = {p.job_id: p.start for p in fifo.out.placements}
    assert starts == {1: 0, 2: 1000, 3: 1100, 4: 1100}
    easy, _ = run_jobs(jobs, policy, spn=4, max_nodes=1, dispatch="easy")
    starts = {p.job_id: p.start for p in easy.out.placements}
    assert starts == {1: 0, 3: 2, 2: 1000, 4: 1100}
    # SGE's default (no reservation): whatever fits starts, so job 4 goes ahead of job 2 at 402
    sge, _ = run_jobs(jobs, policy, spn=4, max_nodes=1)
    starts = {p.job_id: p.start for p in sge.out.placements}
    assert starts == {1: 0, 3: 2, 4: 402, 2: 1000}


def test_boot_jitter_is_seeded() -> None:
    jobs = [SimJob(i, i * 5000, 100, 8) for i in range(5)]

    def waits(seed: int) -> list[float]:
        sim, _ = run_jobs(jobs, SlurmPolicy(limits()), boot_jitter=120.0, seed=seed)
        return sim.out.waits

    assert waits(1) == waits(1)
    assert waits(1) != waits(2)
    assert all(300 <= w < 420 for w in waits(3))


def test_hour_billing_and_static_cost_by_hand() -> None:
    wl = Workload("hand", [SimJob(1, 0, 5400, 8)])
    prepared = prepare(wl, 8, 2)
    policy = StaticPolicy(limits(max_nodes=2))
    settings = SimSettings(slots_per_node=8, max_nodes=2)
    m, _ = replay(prepared, policy, settings, billing="hour", price=2.0)
    assert m.node_hours == 4  # two nodes for 1.5 h, every started hour paid
    assert m.cost == 8
    assert m.cost_over_floor == pytest.approx(4 / 1.5)
    assert m.idle_node_hours == pytest.approx(4 - 1.5)
    assert m.utilisation == pytest.approx(1.5 / 4)
    m, _ = replay(prepared, policy, settings, billing="second", price=1.0)
    assert m.node_hours == pytest.approx(3.0)


def test_with_param_changes_peer_params_and_policy_config() -> None:
    slurm = build_policy("slurm", billing="second", slots_per_node=8, boot_time=300, max_nodes=5)
    assert isinstance(slurm, SlurmPolicy)
    changed = with_param(slurm, "suspend_time", "60")
    assert isinstance(changed, SlurmPolicy)
    assert changed.params.suspend_time == 60.0
    elb = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=5)
    assert getattr(with_param(elb, "wait_time", "60"), "config").wait_time == 60.0  # noqa: B009
    with pytest.raises(SimError, match="no parameter"):
        with_param(slurm, "nonsense", "1")


# -- the command ------------------------------------------------------------------------------------


def test_cli_json_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "hand.swf"
    log.write_text(
        "; MaxProcs: 16\n"
        + "\n".join(swf_line(i, i * 600, 1200, 4 if i % 3 else 12) for i in range(1, 30))
        + "\n"
        + swf_line(99, 100, 100, 999)
        + "\n"
    )
    png = tmp_path / "p.png"
    rc = main(
        [
            "simulate",
            str(log),
            "--policies",
            "slurm,starcluster,static",
            "--max-nodes",
            "2x",
            "--json",
            "--sweep",
            "suspend_time=60,600",
            "--plot",
            str(png),
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["max_nodes"] == 4
    assert [r["label"] for r in data["results"]] == [
        "slurm suspend_time=60",
        "slurm suspend_time=600",
        "starcluster",
        "static",
    ]
    assert data["unservable"]["jobs"] >= 1 and data["unservable"]["first"][0]["reason"]
    assert png.stat().st_size > 1000
    rc = main(["simulate", str(log), "--policies", "slurm", "--max-nodes", "4"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "x floor" in text
    assert "zero-wait" in text


def test_cli_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "hand.swf"
    log.write_text(swf_line(1, 0, 10, 1) + "\n")
    assert main(["simulate", str(log), "--policies", "nope"]) == 2
    assert main(["simulate", str(log), "--sweep", "nonsense=1,2"]) == 2
    assert main(["simulate", str(tmp_path / "missing.swf")]) == 2
    assert main(["simulate", str(log), "--max-nodes", "0"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy" in err
    assert "cannot read" in err
    assert not math.isnan(0.0)


def test_saturation_is_reported_not_silent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # one 8-slot node, a job of a whole node every 100 s running 1000 s: the queue only grows
    log = tmp_path / "busy.swf"
    log.write_text("\n".join(swf_line(i, i * 100, 1000, 8) for i in range(1, 40)) + "\n")
    rc = main(["simulate", str(log), "--policies", "static", "--max-nodes", "1"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "the queue never drains" in err
    rc = main(["simulate", str(log), "--policies", "static", "--max-nodes", "12"])
    assert "never drains" not in capsys.readouterr().err


def test_incremental_snapshots_and_free_index_match_the_nodes_at_every_decision() -> None:
    # The snapshot's Host/Node values are rebuilt only for changed nodes, and ready nodes sit in a
    # FreeIndex: at every decision both must show exactly what the nodes hold.
    rng = random.Random(3)
    jobs = [SimJob(i, i * 40, rng.choice([100, 700, 2000]), rng.choice([1, 3, 8, 12])) for i in range(1, 120)]
    seen: list[int] = []

    class Checking:
        name = "checking"

        def __init__(self) -> None:
            self.inner = SlurmPolicy(limits(max_nodes=12))
            self.sim: Simulator | None = None

        def decide(self, state: ClusterState, history: History) -> Plan:
            snapshot, nodes = state.snapshot, state.records
            sim = self.sim
            assert sim is not None
            ready = {n.name: n for n in sim.nodes.values() if n.ready}
            assert {h.name: h.free_slots for h in snapshot.hosts} == {k: n.free for k, n in ready.items()}
            assert {r.name: r.state for r in nodes} == {
                k: NodeState.READY if n.ready else NodeState.PROVISIONING for k, n in sim.nodes.items()
            }
            # When a node last turned idle is read while it is idle only: a busy node's record
            # may still say when it turned idle before the last snapshot.
            idle = {k: n.last_busy_at for k, n in sim.nodes.items() if n.jobs == 0}
            assert {r.name: r.last_busy_at for r in nodes if r.name in idle} == idle
            for slots in (1, 3, 8):
                fits = sorted((k for k, n in ready.items() if n.free >= slots), key=host_order)
                key = sim._ready["default"].first(slots)
                assert (key[1] if key else None) == (fits[0] if fits else None)
            seen.append(len(ready))
            return self.inner.decide(state, history)

    policy = Checking()
    sim = Simulator(jobs, policy, SimSettings(max_nodes=12, fast_forward=False))
    policy.sim = sim
    sim.run()
    assert max(seen) > 3  # nodes came and went while it checked


def test_a_short_burst_in_a_short_replay_is_not_saturation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # four whole-node jobs at once on one node, 10 minutes each: a 30-minute queue in a 40-minute replay
    log = tmp_path / "burst.swf"
    log.write_text("\n".join(swf_line(i, 10, 600, 8) for i in range(1, 5)) + "\n")
    assert main(["simulate", str(log), "--policies", "static", "--max-nodes", "1"]) == 0
    assert "never drains" not in capsys.readouterr().err


def test_a_stalled_replay_bills_its_nodes_until_it_gives_up() -> None:
    # job 2 can never start (9 slots, and a static cluster of one 8-slot node where two could
    # run it): the replay gives up at the first poll that finds nothing can change, after job 1
    # ended (100 s) and job 2 came (500 s); the static node ran, and was billed, until then
    jobs = [SimJob(1, 0.0, 100.0, 1), SimJob(2, 500.0, 100.0, 9)]
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=0.0, poll_interval=60.0)
    out = Simulator(jobs, StaticPolicy(limits(max_nodes=2), StaticParams(nodes=1)), settings).run()
    assert out.stalled and out.never_started == 1
    (life,) = out.nodes
    assert life.terminated_at == 540.0  # the poll that gave up, not job 2's submission (500 s)


def test_slurm_decides_every_power_save_interval_not_at_the_balancer_poll() -> None:
    # job 2 comes 5 s after a poll, while job 1 fills the only node: Slurm's 10 s pass powers a
    # node up for it within 10 s, where a 60 s poll waits for the next minute
    prepared = prepare(Workload("t", [SimJob(1, 0.0, 1000.0, 8), SimJob(2, 65.0, 100.0, 8)]), 8, 2)
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=300.0, poll_interval=60.0)
    slurm = build_policy("slurm", billing="second", slots_per_node=8, boot_time=300, max_nodes=2)
    _, out = replay(prepared, slurm, settings, billing="second", price=1.0)
    assert sorted(out.waits)[-1] <= 300.0 + 10.0
    elb = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=2)
    _, out = replay(prepared, elb, settings, billing="second", price=1.0)
    assert sorted(out.waits)[-1] > 300.0 + 10.0  # elb polls every 60 s, as configured


def test_starclusters_master_is_an_exec_host_that_is_never_billed() -> None:
    # 8 one-slot jobs: the master's 8 slots take them all, no node is launched and nothing billed
    prepared = prepare(Workload("t", [SimJob(i, float(i), 100.0, 1) for i in range(1, 9)]), 8, 4)
    settings = SimSettings(slots_per_node=8, max_nodes=4)
    sc = build_policy("starcluster", billing="second", slots_per_node=8, boot_time=300, max_nodes=4)
    m, out = replay(prepared, sc, settings, billing="second", price=1.0)
    assert out.launches == 0 and out.nodes == [] and m.cost == 0.0
    assert max(out.waits) == 0.0
    slurm = build_policy("slurm", billing="second", slots_per_node=8, boot_time=300, max_nodes=4)
    _, out = replay(prepared, slurm, settings, billing="second", price=1.0)
    assert out.launches == 1  # Slurm's controller runs no jobs: a node is powered up


# -- the replay drives the live planner ------------------------------------------------------------


def test_the_replays_index_is_what_a_scan_of_the_joined_state_finds() -> None:
    """The replay hands the planner what it keeps event by event (``JoinIndex``); at every
    decision the planner's whole plan on it equals the plan on the same state found by a scan,
    and the index's suspects, pooled records and instances are the scan's (a warm pool, so that
    nodes stop and start again)."""
    from elb.core.groups import NodeGroups
    from elb.core.planner import plan_pass
    from elb.core.warmpool import WarmPool
    from elb.simulate.groups import one_group

    rng = random.Random(5)
    jobs = [SimJob(i, i * 90, rng.choice([100, 700, 2000]), rng.choice([1, 3, 8, 12])) for i in range(1, 150)]
    checked: list[int] = []
    groups = one_group(8, 12, WarmPool(max_nodes=2, restart_time=30, volume_price_per_hour=0.01))
    assert isinstance(groups.groups, NodeGroups)
    sim = Simulator(
        jobs, SlurmPolicy(limits(max_nodes=12)), SimSettings(max_nodes=12, fast_forward=False), groups=groups
    )
    real_plan = sim._plan

    def checking(now: float):  # type: ignore[no-untyped-def]
        pp = real_plan(now)
        indexed = sim.last_inputs
        assert indexed is not None and indexed.index is not None
        scanned_instances = tuple(sim._instance_values.values())
        scan = dataclasses.replace(indexed, index=None, instances=scanned_instances)
        from elb.core.planner import cluster_state

        a, b = cluster_state(indexed, now), cluster_state(scan, now)
        assert sorted(m.name for m in a.suspects) == sorted(m.name for m in b.suspects)
        assert sorted(r.name for r in a.pooled) == sorted(r.name for r in b.pooled)
        assert a.down == b.down
        assert b.unaccounted == ()
        assert plan_pass(scan, sim.config, SlurmPolicy(limits(max_nodes=12)), now).describe() == pp.describe()
        checked.append(len(a.suspects))
        return pp

    sim._plan = checking  # type: ignore[method-assign]
    out = sim.run()
    assert max(checked) > 0 and out.stops > 0 and out.restarts > 0 and out.repairs == 0


def test_a_replay_with_failing_provisioning_backs_off_as_the_daemon_does() -> None:
    """A share of bring-ups fails after its boot time: the back-off the live pass computes from
    its journal holds launches (a probe at a time, waits doubling), so a replay with failures
    launches far fewer nodes per failure than one launch a poll."""
    rng = random.Random(7)
    jobs = [SimJob(i, i * 30, rng.choice([600, 1800]), rng.choice([1, 4, 8])) for i in range(1, 200)]

    def replay_with(rate: float) -> SimOutcome:
        settings = SimSettings(max_nodes=20, provision_failure_rate=rate, backoff_initial=60, backoff_max=1800)
        return Simulator(jobs, SlurmPolicy(limits(max_nodes=20)), settings).run()

    healthy, failing = replay_with(0.0), replay_with(0.5)
    assert healthy.failed_bringups == 0 and healthy.backoff_rounds == 0
    assert failing.failed_bringups > 5 and failing.backoff_rounds >= 2 and failing.launches_held > 0
    assert failing.never_started == 0  # every job still ran
    assert max(failing.waits) > max(healthy.waits)


def test_a_replay_without_failures_leaves_the_back_off_untold_and_plans_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no bring-up that can fail the back-off is never told of a request or a readiness
    (they would leave it empty) nor asked when a launch it holds may start: the replay is the one
    in which it is told of every one."""
    rng = random.Random(5)
    jobs = [SimJob(i, i * 45, rng.choice([300, 1200]), rng.choice([1, 4, 8, 20])) for i in range(1, 150)]
    told: list[str] = []
    add = GroupTrackers.add

    def counted(self: GroupTrackers, e: Event, group: str) -> None:
        told.append(e.node)
        add(self, e, group)

    monkeypatch.setattr(GroupTrackers, "add", counted)

    def replay(tell: bool) -> tuple[SimOutcome, Simulator]:
        sim = Simulator(jobs, SlurmPolicy(limits(max_nodes=8)), SimSettings(max_nodes=8, record=True))
        if tell:  # the plain path: told of every bring-up
            sim._tell_backoff = True
        return sim.run(), sim

    quick, sim = replay(False)
    assert told == [] and quick.launches > 5
    plain, told_sim = replay(True)
    assert len(told) == 2 * plain.launches
    assert quick.placements == plain.placements and quick.nodes == plain.nodes
    assert (quick.polls, quick.decisions) == (plain.polls, plain.decisions)
    assert sim.backoff.state == told_sim.backoff.state


def test_cli_replays_failing_provisioning_and_reports_the_back_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(11)
    lines = [swf_line(i, i * 60, rng.choice([300, 900]), rng.choice([1, 4, 8])) for i in range(1, 300)]
    log = tmp_path / "burst.swf"
    log.write_text("\n".join(lines) + "\n")
    args = ["simulate", str(log), "--policies", "elb", "--max-nodes", "12", "--json"]
    assert main([*args, "--provision-failure-rate", "0.4"]) == 0
    failing = json.loads(capsys.readouterr().out)["results"][0]
    assert failing["failed_bringups"] > 0 and failing["backoff_rounds"] >= 1 and failing["launches_held"] > 0
    assert main(args) == 0
    healthy = json.loads(capsys.readouterr().out)["results"][0]
    assert healthy["failed_bringups"] == healthy["launches_held"] == healthy["backoff_rounds"] == 0
    assert main([*args, "--provision-failure-rate", "1"]) == 2
    assert "--provision-failure-rate must be a share" in capsys.readouterr().err


class _SeesCollector(StarclusterPolicy):
    """A peer that notes whether the cycle collector runs while it decides."""

    def decide(self, state: ClusterState, history: History) -> Plan:
        seen.append(gc.isenabled())
        return super().decide(state, history)


seen: list[bool] = []


@pytest.mark.parametrize("enabled", [True, False])
def test_a_replay_pauses_the_cycle_collector_and_leaves_it_as_it_found_it(enabled: bool) -> None:
    seen.clear()
    jobs = [SimJob(i, 60.0 * i, 600.0, 2) for i in range(1, 6)]
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        Simulator(jobs, _SeesCollector(limits()), SimSettings(max_nodes=4)).run()
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert seen
    assert not any(seen)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_replays_figures_are_made_with_the_collector_paused_and_it_is_left_as_found(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``replay`` makes the figures before the collector resumes (it would walk every object of
    the replay, just before they go), and leaves it as it found it."""
    during: list[bool] = []
    made = report.metrics

    def watched(*args: Any, **kwargs: Any) -> report.Metrics:
        during.append(gc.isenabled())
        return made(*args, **kwargs)

    monkeypatch.setattr(runner, "metrics", watched)
    jobs = [SimJob(i, 60.0 * i, 600.0, 2) for i in range(1, 6)]
    prepared = prepare(Workload("t", jobs), 8, 4)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        replay(prepared, StarclusterPolicy(limits()), SimSettings(max_nodes=4), billing="second", price=1.0)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert during == [False]


def test_the_history_keeps_each_removals_time_the_last_fifty() -> None:
    """A pass notes its removals in the history at once: each one's time, newest last, the last 50,
    as one removal after another would."""
    from tests.unit.test_simulate_records import random_log

    class Counted(Simulator):
        times: list[float]

        def _remove(self, name: str, now: float, *, stop: str | None = None) -> bool:
            removed = super()._remove(name, now, stop=stop)
            if removed:
                self.times = [*getattr(self, "times", []), now]
            return removed

    jobs = random_log(7, 600)
    s = SimSettings(slots_per_node=8, max_nodes=6)
    policy = build_policy("parallelcluster", billing="second", slots_per_node=8, boot_time=300, max_nodes=6)
    sim = Counted(jobs, policy, s)
    sim.run()
    assert len(sim.times) > 50 and len(set(sim.times)) < len(sim.times)  # passes that removed several
    assert sim.history.recent_removals == tuple(sim.times[-50:])
