"""``elb simulate --budget`` and ``--budget-sweep`` print what each period cost against the
budget and flag the periods over it (reporting only: the pacing is the planner's). Jobs of a day
each, launched through day 1 as the budget allows, run on into day 2: paced to the period's end,
each launch is paid for the next day too and every day holds; paced a horizon ahead (no bound),
the nodes launched late commit the next day's spend before it starts and it goes over."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.budget import Budget
from elb.simulate.budget import ANCHOR, BudgetRun, budget_table, period_lines


def steady(tmp_path: Path, jobs: int = 36) -> Path:
    log = tmp_path / "steady.swf"
    rows = [f"{i + 1} {i * 2400} 0 86400 8 -1 -1 8 86400 -1 1 1 1 -1 1 -1 -1 -1" for i in range(jobs)]
    log.write_text("; MaxProcs: 1024\n" + "\n".join(rows) + "\n")
    return log


def test_a_budgeted_replay_prints_each_period_and_flags_those_over_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["simulate", str(steady(tmp_path)), "--policies", "elb", "--max-nodes", "50", "--budget", "200/day"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "elb: spend a day against the budget of 200.00" in out
    assert "the budget held launches at" in err and "not the cap" in err and "the policy left" not in err
    assert "over budget" not in out and re.search(r"within the budget in every one of \d+ days", out)
    horizon = ["--budget-horizon", "2h"]
    assert (
        main(
            [
                "simulate",
                str(steady(tmp_path)),
                "--policies",
                "elb",
                "--max-nodes",
                "50",
                "--budget",
                "200/day",
                *horizon,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    day2 = next(line for line in out.splitlines() if line.strip().startswith("2024-01-02 00:00"))
    assert "over budget (+" in day2
    assert re.search(r"over budget in [1-9]\d* of \d+ days; the most: 2024-01-0\d 00:00", out)


def test_the_budget_sweep_prints_each_budgeted_replay_s_periods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = ["--budget-sweep", "50", "--budget-period", "day", "--budget-horizon", "2h"]
    code = main(["simulate", str(steady(tmp_path)), "--policies", "elb", "--max-nodes", "50", *sweep])
    out = capsys.readouterr().out
    assert code == 0
    assert "elb 50%: spend a day against the budget of" in out
    assert "elb unconstrained: spend" not in out  # no budget, nothing to be over
    assert "over budget (+" in out


def test_period_lines_list_only_the_periods_over_the_budget_when_there_are_many() -> None:
    budget = Budget(amount=10.0, period="day")
    spent = [(ANCHOR + d * 86400.0, 12.0 if d % 10 == 0 else 5.0) for d in range(100)]
    lines = period_lines("x", budget, spent)
    assert sum("over budget (+20%)" in line for line in lines) == 10
    assert "  (90 more period(s) not listed: only those over the budget are)" in lines
    assert lines[-1] == "  over budget in 10 of 100 days; the most: 2024-01-01 00:00, 12.00 (+20%)"
    assert period_lines("x", budget, spent[1:3])[-1] == "  within the budget in every one of 2 days"


def test_the_budget_sweep_s_table_flags_a_costliest_period_over_its_budget() -> None:
    def run(label: str, amount: float | None, costliest: float) -> BudgetRun:
        return BudgetRun(label, amount, None if amount is None else 50.0, 9000.0, costliest, 60.0, 120.0, 600.0, 0, 0)

    lines = budget_table([run("elb unconstrained", None, 1728.0), run("elb 50%", 864.0, 1536.0)], "day").splitlines()
    header, rows = lines[0], {line.split()[1]: line for line in lines[2:]}
    assert header.rstrip().endswith("over budget")
    assert rows["50%"].rstrip().endswith("+78%")
    assert not rows["unconstrained"].rstrip().endswith("%")  # no budget: nothing to be over
    held = budget_table([run("elb 50%", 864.0, 864.0)], "day").splitlines()[2]
    assert not held.rstrip().endswith("%")
