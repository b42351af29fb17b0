"""The budget replayed (``elb simulate --budget``, ``--budget-sweep``): the planner paces the
replay's launches on its spend so that no period overruns, jobs wait longer for it; and who spent
a replay's money (``--spend-by``), adding up to the replay's bill."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.attribution import By
from elb.core.budget import Budget
from elb.core.spend import Billing
from elb.simulate.budget import ANCHOR, BudgetRun, costliest_period, log_users, parse_budget, replay_split
from elb.simulate.budgetsweep import budget_sweep
from elb.simulate.engine import SimOutcome, SimSettings
from elb.simulate.report import Metrics
from elb.simulate.runner import Prepared, build_policy, prepare, replay
from elb.simulate.sweep import Setup, plan_runs, replay_all
from elb.simulate.swf import SimJob, Workload


def burst_jobs(seed: int = 3, days: float = 2.0) -> list[SimJob]:
    """Bursts of 8-slot jobs of 10 min to 3 h over a few days, from ``ANCHOR`` (a period's start)."""
    rng = random.Random(seed)
    jobs: list[SimJob] = []
    t = ANCHOR
    i = 0
    while t < ANCHOR + days * 86400:
        for _ in range(rng.randint(1, 12)):
            i += 1
            jobs.append(SimJob(i, t + rng.uniform(0, 600), rng.uniform(600, 3 * 3600), 8))
        t += rng.uniform(1, 8) * 3600
    return jobs


def run(
    jobs: list[SimJob], budget: Budget | None, *, record: bool = False, billing: Billing = "second"
) -> tuple[Prepared, tuple[Metrics, SimOutcome]]:
    prepared = prepare(Workload("burst", jobs), 8, 20)
    policy = build_policy("elb", billing=billing, slots_per_node=8, boot_time=300, max_nodes=20)
    settings = SimSettings(max_nodes=20, budget=budget, billing=billing, record=record)
    return prepared, replay(prepared, policy, settings, billing=billing, price=1.0)


def test_a_replayed_budget_never_overruns_its_period_and_jobs_wait_for_it() -> None:
    jobs = burst_jobs(days=0.5)  # half a day of bursts, from the start of the replay's first day
    _, (free, free_out) = run(jobs, None)
    first_day = (ANCHOR, ANCHOR + 86400.0)
    budget = Budget(amount=0.6 * spent_in(free_out, *first_day), period="day")
    _, (paced, out) = run(jobs, budget)
    assert spent_in(out, *first_day) <= budget.amount + 0.01  # the 60 s minimums billed in full
    assert out.budget_held > 0 and paced.never_started == 0
    assert paced.wait_mean > free.wait_mean


def spent_in(out: SimOutcome, start: float, end: float) -> float:
    """What a replay's nodes (1 an hour, billed per second with a 60 s minimum) cost in [start, end)."""
    return (
        sum(
            max(0.0, min(n.launched_at + max(60.0, n.terminated_at - n.launched_at), end) - max(n.launched_at, start))
            for n in out.nodes
        )
        / 3600.0
    )


def test_a_period_overruns_only_by_what_runs_at_its_start() -> None:
    """Days: a backlog from the day before keeps its nodes busy into the next one, and elb removes
    no busy node; each day's spend is at most the budget or what ran at its start, run all day."""
    jobs = burst_jobs(days=2.0)
    _, (_, free_out) = run(jobs, None)
    daily = Budget(amount=1.0, period="day")
    budget = Budget(amount=0.5 * costliest_period(free_out, daily, "second", {"default": 1.0}), period="day")
    _, (_, out) = run(jobs, budget)
    for k in range(5):
        start, end = ANCHOR + k * 86400, ANCHOR + (k + 1) * 86400
        spent = sum(
            max(0.0, min(n.terminated_at, end) - max(n.launched_at, start)) / 3600 for n in out.nodes
        )  # per second billing, 1 an hour; the 60 s minimums are within the tolerance
        carried = sum(1 for n in out.nodes if n.launched_at <= start < n.terminated_at) * 24.0
        assert spent <= max(budget.amount, carried) + 0.05, (k, spent, budget.amount, carried)


def test_a_generous_budget_changes_nothing() -> None:
    jobs = burst_jobs()
    _, (free, _) = run(jobs, None)
    _, (paced, out) = run(jobs, Budget(amount=1e6, period="week"))
    assert out.budget_held == 0
    assert (paced.cost, paced.wait_mean, paced.launches) == pytest.approx((free.cost, free.wait_mean, free.launches))


@pytest.mark.parametrize("billing", ["second", "hour"])
def test_a_replay_s_split_adds_up_to_its_bill(billing: Billing) -> None:
    jobs = burst_jobs(days=1.0)
    prepared, (m, out) = run(jobs, None, record=True, billing=billing)
    users = {j.job_id: f"u{j.job_id % 3}" for j in jobs}
    by: By
    for by in ("group", "user"):
        split = replay_split(out, prepared.jobs, by, billing=billing, prices={"default": 1.0}, users=users)
        assert abs(split.money - m.cost) < 0.005  # to the cent
        assert split.node_seconds / 3600 == pytest.approx(m.node_hours)
        jobs_part = sum(p.node_seconds for p in split.jobs) / 3600
        slot_hours = sum(j.slots * j.run for j in jobs) / 8 / 3600  # the jobs' own node-hours
        assert jobs_part == pytest.approx(slot_hours, rel=1e-6)
    assert {p.key for p in split.jobs} == {"u0", "u1", "u2"}


def test_the_log_s_users_are_read_from_swf_s_user_field(tmp_path: Path) -> None:
    log = tmp_path / "log.swf"
    log.write_text(
        "; MaxProcs: 16\n"
        "1 0 0 100 8 -1 -1 8 200 -1 1 7 1 -1 1 -1 -1 -1\n"
        "2 5 0 50 8 -1 -1 8 100 -1 1 -1 1 -1 1 -1 -1 -1\n"
    )
    assert log_users(log) == {1: "user7", 2: ""}


def test_a_budget_is_amount_slash_period() -> None:
    assert parse_budget("500/week") == Budget(amount=500.0, period="week")
    for bad in ("500", "0/day", "x/day", "5/year", "-1/month"):
        with pytest.raises(ValueError, match="AMOUNT/PERIOD"):
            parse_budget(bad)


def test_elb_simulate_replays_a_budget_and_its_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.swf"
    rows = [
        f"{j.job_id} {j.submit - ANCHOR:.0f} 0 {j.run:.0f} 8 -1 -1 8 {j.run + 60:.0f} -1 1 {j.job_id % 2} "
        "1 -1 1 -1 -1 -1"
        for j in burst_jobs(days=1.0)
    ]
    log.write_text("\n".join(rows) + "\n")
    base = ["simulate", str(log), "--policies", "elb", "--max-nodes", "10"]
    assert main([*base, "--budget", "30/day", "--spend-by", "user"]) == 0
    out = capsys.readouterr().out
    assert "who spent it, by user" in out and "user0" in out and "user1" in out
    assert main([*base, "--budget-sweep", "50,90", "--budget-period", "day"]) == 0
    out = capsys.readouterr().out
    assert "elb unconstrained" in out and "elb 50%" in out and "elb 90%" in out
    assert main([*base, "--budget-sweep", "50", "--json"]) == 2
    assert "not with --json" in capsys.readouterr().err
    assert main([*base, "--budget", "lots"]) == 2


def test_replays_with_a_budget_start_at_a_period_s_start() -> None:
    from elb.simulate.budget import anchored

    wl = Workload("x", [SimJob(1, 500.0, 10, 1), SimJob(2, 900.0, 10, 1)])
    moved = anchored(wl)
    assert [j.submit for j in moved.jobs] == [ANCHOR, ANCHOR + 400.0]
    assert dataclasses.replace(moved.jobs[0], submit=500.0) == wl.jobs[0]


def test_budgeted_replays_in_worker_processes_bring_back_their_outcomes_and_split() -> None:
    """``--workers``: each budgeted replay's outcome (node lives, placements) comes back from its
    process as run here, so ``--spend-by`` and the budget's figures are the same."""
    jobs = burst_jobs(days=1.0)
    prepared = prepare(Workload("burst", jobs), 8, 20)
    settings = SimSettings(max_nodes=20, budget=Budget(amount=40.0, period="day"), record=True)
    setup = Setup(prepared, None, settings, "second", 1.0, 300.0, 60.0, None)
    specs = plan_runs(setup, ["elb", "slurm"], [], [])
    alone, together = replay_all(setup, specs, 1), replay_all(setup, specs, 2)
    for (m1, out1), (m2, out2) in zip(alone, together, strict=True):
        assert dataclasses.replace(m1, replay_seconds=0.0) == dataclasses.replace(m2, replay_seconds=0.0)
        assert (out1.nodes, out1.placements, out1.budget_held) == (out2.nodes, out2.placements, out2.budget_held)
        assert out2.placements and out2.budget_held > 0
        split = replay_split(out2, prepared.jobs, "group", billing="second", prices={"default": 1.0})
        assert abs(split.money - m2.cost) < 0.005


def test_a_budget_holds_beside_the_back_off_when_bring_ups_fail() -> None:
    """``--provision-failure-rate`` with ``--budget``: the failed bring-ups are billed into the
    period's spend the planner reads, so the day still does not overrun."""
    jobs = burst_jobs(days=0.5)
    first_day = (ANCHOR, ANCHOR + 86400.0)
    prepared = prepare(Workload("burst", jobs), 8, 20)
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=20)
    failing = SimSettings(max_nodes=20, provision_failure_rate=0.3, seed=5)
    _, free = replay(prepared, policy, failing, billing="second", price=1.0)
    assert free.failed_bringups > 0
    # Above what the day spent unconstrained, and still holding: every node up at a launch must be
    # paid for the whole next day too, which the burst's peak was not (at 0.6 one node ran, none failed).
    budget = Budget(amount=1.2 * spent_in(free, *first_day), period="day")
    _, out = replay(prepared, policy, dataclasses.replace(failing, budget=budget), billing="second", price=1.0)
    assert out.failed_bringups > 0 and out.budget_held > 0
    assert spent_in(out, *first_day) <= budget.amount + 0.01


def test_elb_simulate_s_budget_options_go_with_workers_and_sweeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.swf"
    rows = [
        f"{j.job_id} {j.submit - ANCHOR:.0f} 0 {j.run:.0f} 8 -1 -1 8 {j.run + 60:.0f} -1 1 {j.job_id % 2} "
        "1 -1 1 -1 -1 -1"
        for j in burst_jobs(days=0.25)
    ]
    log.write_text("\n".join(rows) + "\n")
    base = ["simulate", str(log), "--max-nodes", "10", "--workers", "2"]
    assert main([*base, "--policies", "elb,static", "--budget", "20/day", "--spend-by", "user"]) == 0
    out = capsys.readouterr().out
    assert "elb: who spent it, by user" in out and "static: who spent it, by user" in out
    sweep = ["--sweep", "idle_factor=0.5,1", "--budget-sweep", "90", "--budget-period", "day"]
    assert main([*base, "--policies", "elb", *sweep]) == 0
    out = capsys.readouterr().out
    assert "elb idle_factor=0.5 90%" in out and "elb idle_factor=1 unconstrained" in out


def test_elb_simulate_s_json_gives_the_budget_and_the_passes_it_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.swf"
    rows = [
        f"{j.job_id} {j.submit - ANCHOR:.0f} 0 {j.run:.0f} 8 -1 -1 8 {j.run + 60:.0f} -1 1 1 1 -1 1 -1 -1 -1"
        for j in burst_jobs(days=0.25)
    ]
    log.write_text("\n".join(rows) + "\n")
    base = ["simulate", str(log), "--max-nodes", "10", "--policies", "elb", "--json"]
    assert main([*base, "--budget", "20/day", "--budget-horizon", "2h"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["budget"] == {"amount": 20.0, "period": "day", "horizon": 7200.0}
    assert report["results"][0]["budget_held"] > 0
    assert main(base) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["budget"] is None and report["results"][0]["budget_held"] == 0


def test_the_budget_sweep_takes_the_unconstrained_replay_already_made() -> None:
    """``elb simulate --budget-sweep`` without ``--budget`` hands the sweep each policy's own
    replay as the unconstrained one: the sweep gives what it gives replaying it again."""
    jobs = burst_jobs(days=0.25)
    prepared = prepare(Workload("burst", jobs), 8, 20)
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=20)
    settings = SimSettings(max_nodes=20)
    made = replay(prepared, policy, settings, billing="second", price=1.0, label="elb")

    def sweep(free: tuple[Metrics, SimOutcome] | None) -> list[BudgetRun]:
        return budget_sweep(
            prepared,
            policy,
            settings,
            billing="second",
            price=1.0,
            label="elb",
            shares=[60.0],
            period="day",
            free=free,
        )

    given, again = sweep(made), sweep(None)
    assert given == again and given[0].cost == made[0].cost and given[1].held > 0
