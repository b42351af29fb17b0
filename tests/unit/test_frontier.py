"""``elb simulate --sweep``: each policy over its own knob, in parallel processes, and the frontiers."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.simulate.engine import SimSettings
from elb.simulate.frontier import Point, compare, frontier, frontiers, verdict
from elb.simulate.runner import SimError, prepare
from elb.simulate.sweep import KNOBS, Setup, plan_runs, run_all
from elb.simulate.swf import SimJob, Workload
from tests.unit.test_simulate_wakeup import random_log


def pt(policy: str, knobs: str, cost: float, p95: float, *, default: bool = False, drains: bool = True) -> Point:
    return Point(policy, knobs, cost, cost / 100, p95, default, drains)


def test_a_frontier_keeps_the_points_nothing_beats_on_both_and_never_one_that_never_drains() -> None:
    points = [
        pt("slurm", "a", 120, 300),
        pt("slurm", "b", 110, 300),  # beats a at the same wait
        pt("slurm", "c", 100, 400),
        pt("slurm", "d", 105, 500),  # slower and dearer than c
        pt("slurm", "e", 90, 900),
        pt("slurm", "f", 50, 99999, drains=False),  # cheap because jobs never start
    ]
    assert [p.knobs for p in frontier(points)] == ["b", "c", "e"]


def test_elb_against_each_point_of_each_peers_frontier() -> None:
    fronts = frontiers(
        [
            pt("elb", "x", 100, 330),
            pt("elb", "y", 90, 400),
            pt("slurm", "s1", 95, 310),  # quicker than every elb replay
            pt("slurm", "s2", 93, 400),  # elb y: 90 at 400, below
            pt("parallelcluster", "p", 80, 1000),  # elb's best at <= 1000 is 90: above
        ]
    )
    against = compare(fronts, slack=60.0)
    got = {(a.peer.knobs, a.below, a.below_near) for a in against}
    assert got == {("s1", False, False), ("s2", True, True), ("p", False, False)}
    s1 = next(a for a in against if a.peer.knobs == "s1")
    assert s1.ours is None and s1.near is not None and s1.near.knobs == "x"  # 330 <= 310 + 60, but dearer
    assert "no elb replay this quick (its quickest 5.5m): NOT on or below" in s1.describe()
    assert verdict(against) == (
        "elb is NOT on or below at 2 of 3 peer points; within 60s of their p95: NOT on or below at 2"
    )
    assert verdict([a for a in against if a.peer.knobs == "s2"]).startswith("elb is on or below every peer's")


def small_setup(n: int = 40, seed: int = 3) -> Setup:
    rng = random.Random(seed)
    jobs = [j for j in random_log(rng, n, overrun=0.3) if j.slots <= 16]
    prepared = prepare(Workload("t", jobs), 8, 4)
    settings = SimSettings(slots_per_node=8, max_nodes=4, boot_time=300.0)
    return Setup(prepared, None, settings, "second", 1.0, 300.0, 60.0, None)


def test_a_bare_sweep_turns_each_policys_own_knob_with_its_default_among_the_values() -> None:
    setup = small_setup()
    specs = plan_runs(setup, ["elb", "slurm", "parallelcluster", "starcluster", "static"], [], [""])
    by: dict[str, list[str]] = {}
    for s in specs:
        by.setdefault(s.policy, []).append(s.knobs)
    assert len(by["elb"]) == 6 * 3 and "idle_factor=0.5 launch_delay=0" in by["elb"]
    assert by["slurm"] == [f"suspend_time={v}" for v in KNOBS["slurm"][0][1]]
    assert by["static"] == [""]  # no knob: one replay
    defaults = {s.policy: s.knobs for s in specs if s.default}
    assert defaults == {
        "elb": "idle_factor=0.5 launch_delay=0",
        "slurm": "suspend_time=300",
        "parallelcluster": "idle_time=600",
        "starcluster": "wait_time=900",
        "static": "",
    }
    assert sum(s.default for s in specs) == 5


def test_sweeps_by_key_make_a_grid_and_an_unknown_key_is_an_error() -> None:
    setup = small_setup()
    specs = plan_runs(setup, ["elb", "slurm"], [("suspend_time", "120")], ["idle_factor=0.5,1", "launch_delay=0,60"])
    assert [s.label for s in specs] == [
        "elb idle_factor=0.5 launch_delay=0",
        "elb idle_factor=0.5 launch_delay=60",
        "elb idle_factor=1 launch_delay=0",
        "elb idle_factor=1 launch_delay=60",
        "slurm",
    ]
    assert specs[-1].sets == (("suspend_time", "120"),) and specs[-1].swept == ()
    with pytest.raises(SimError, match="no listed policy has a parameter 'nonsense'"):
        plan_runs(setup, ["slurm"], [], ["nonsense=1,2"])
    with pytest.raises(SimError, match="--sweep wants KEY=V1,V2"):
        plan_runs(setup, ["slurm"], [], ["suspend_time="])


def test_replays_in_worker_processes_give_what_they_give_one_after_another() -> None:
    setup = small_setup()
    specs = plan_runs(setup, ["elb", "slurm"], [], ["idle_factor=0.25,1", "suspend_time=60,600"])
    alone = run_all(setup, specs, 1)
    together = run_all(setup, specs, 2)
    assert [dataclasses.replace(m, replay_seconds=0.0) for m in alone] == [
        dataclasses.replace(m, replay_seconds=0.0) for m in together
    ]


def swf_log(tmp_path: Path) -> Path:
    rng = random.Random(5)
    jobs = [j for j in random_log(rng, 30, overrun=0.3) if j.slots <= 16]
    log = tmp_path / "t.swf"
    log.write_text(
        "; MaxProcs: 16\n"
        + "\n".join(
            f"{j.job_id} {j.submit:.0f} -1 {j.run:.0f} {j.slots} -1 -1 {j.slots} {j.requested or -1:.0f} "
            "-1 1 1 1 1 1 1 -1 -1"
            for j in jobs
            if j.run >= 1
        )
        + "\n"
    )
    return log


def test_the_command_prints_the_frontiers_and_draws_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    log, png = swf_log(tmp_path), tmp_path / "f.png"
    args = ["simulate", str(log), "--max-nodes", "2x", "--policies", "elb,slurm", "--workers", "2"]
    rc = main([*args, "--sweep", "--sweep", "launch_delay=0", "--bound", "--plot", str(png), "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    sweep = data["sweep"]
    assert len(data["results"]) == 6 + 6  # elb: idle_factor x launch_delay 0 only; slurm: its six
    assert set(sweep["frontiers"]) == {"elb", "slurm"}
    assert all(p["drains"] for front in sweep["frontiers"].values() for p in front)
    assert len(sweep["elb_against_peers"]) == len(sweep["frontiers"]["slurm"])
    assert sweep["bound"]["cost"] <= min(p["cost"] for p in sweep["points"] if p["policy"] == "elb") * 1.5
    assert 1000 < png.stat().st_size < 200_000
    rc = main([*args, "--sweep", "suspend_time=60,300"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "frontiers: cost against p95 wait" in text
    assert "slurm            suspend_time=300*" in text
    assert "elb against each peer's frontier" in text


def test_the_bound_alone_gives_elbs_distance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = swf_log(tmp_path)
    rc = main(["simulate", str(log), "--max-nodes", "2x", "--policies", "elb", "--bound"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "clairvoyant bound: cost" in out and "elb's defaults" in out


def test_one_job_a_sweep_of_one_value_still_runs_in_this_process(tmp_path: Path) -> None:
    prepared = prepare(Workload("t", [SimJob(1, 0.0, 100.0, 1)]), 8, 1)
    setup = Setup(prepared, None, SimSettings(max_nodes=1), "second", 1.0, 300.0, 60.0, None)
    (m,) = run_all(setup, plan_runs(setup, ["slurm"], [], []), 4)
    assert m.jobs == 1
