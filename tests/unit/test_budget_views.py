"""The budget where an admin sees it: ``elb status`` and ``elb once --dry-run`` (text and JSON)
show the period's spend, its projection and whether launches are held; the gauges carry the same
figures; the alerts fire on them (promtool, where it is on PATH)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from elb.cli.main import main
from elb.core.config import load_config
from elb.core.exitcodes import Exit
from elb.core.model import NodeState
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from elb.service.metrics import BalancerCollector
from tests.unit.factories import HOUR, T0, host, pending, running
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge
from tests.unit.test_cli_once import Stand, stand  # noqa: F401 (the fixture)

REPO = Path(__file__).resolve().parents[2]

# T0 is 2027-01-15 08:00 UTC: 16 hours are left of the day.
CONFIG = """\
cloud: {{provider: local}}
state_dir: {state}
policy: {{billing: second, budget: {{amount: {amount}, period: day}}}}
node_groups:
  - {{name: small, slots: 2, max_nodes: 4, price_per_hour: 0.5}}
  - {{name: big, slots: 8, max_nodes: 2, price_per_hour: 2.0}}
"""


def setup(tmp_path: Path, amount: float) -> Path:
    """A config with a day's budget, and a journal with node001 (small) up since 07:00."""
    path = tmp_path / "elb.yml"
    path.write_text(CONFIG.format(state=tmp_path / "state", amount=amount))
    journal = Journal(load_config(path).journal_path)
    journal.record("node001", NodeState.REQUESTED, T0 - 3600, group="small")
    journal.record("node001", NodeState.RUNNING, T0 - 3590, launched_at=T0 - 3600, slots=2, instance_id="i-1")
    journal.record("node001", NodeState.READY, T0 - 3300)
    journal.close()
    return path


def test_status_shows_the_spend_the_projection_and_whether_launches_are_held(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stand.sge.add_host("node001", 2)
    # 0.50 spent, 8.50 projected: room for 3 small nodes (8 each) today, no big one (32); but the next
    # day pays 12 for the node up and 12 for each small node more: room for 1
    path = setup(tmp_path, 33.0)
    assert main(["status", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "budget: 0.50 of 33.00 US dollars spent this day (since 2027-01-15 00:00 +00:00), 8.50 projected" in out
    assert "budget: not holding launches; room for 1 more node(s) of group small, 0 more node(s) of group big" in out
    assert main(["status", "-c", str(path), "--json"]) == Exit.OK
    doc = json.loads(capsys.readouterr().out)["budget"]
    assert doc["spent"] == pytest.approx(0.5) and doc["projected"] == pytest.approx(8.5)
    assert doc["holding"] is False and doc["room"] == {"small": 1, "big": 0} and doc["period"] == "day"


def test_the_dry_run_says_which_launches_the_budget_holds(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stand.sge = FakeSge(
        T0, jobs=[running(9, "node001", slots=2, ran=HOUR), *(pending(i, 600, slots=2) for i in range(1, 4))]
    )
    stand.sge.hosts["node001"] = host("node001", 2, used=2)
    stand.cloud = FakeCloud(T0)
    path = setup(tmp_path, 24.0)  # 8.50 projected: one more small node (8.00) fits, not two (the next day: 24)
    assert main(["once", "--dry-run", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "budget: holding 2 of 3 launch(es)" in out
    assert "budget: 0.50 of 24.00 US dollars spent this day" in out and "holding 2 launch(es)" in out
    assert main(["once", "--dry-run", "--json", "-c", str(path)]) == Exit.OK
    plan = json.loads(capsys.readouterr().out)
    assert plan["add"] == [{"group": "small", "count": 1, "names": ["node002"]}]
    budget = plan["budget"]
    assert budget["holding"] is True and budget["held"] == ["node003", "node004"]
    assert budget["spent"] == pytest.approx(0.5) and budget["projected"] == pytest.approx(8.5)


def test_the_gauges_carry_the_budget(tmp_path: Path) -> None:
    path = setup(tmp_path, 8.0)  # 8.50 projected already: holding
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    sge = FakeSge(T0)
    from elb.schedulers.sge.driver import GridEngine

    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=FakeCloud(T0), provisioner=FakeProvisioner(sge)
    )
    bal.clock = lambda: T0
    got = {
        m.name: [(s.labels, s.value) for s in m.samples]
        for m in BalancerCollector(bal).collect()
        if m.name.startswith("elb_budget")
    }
    journal.close()
    day = {"period": "day"}
    assert got["elb_budget_dollars"] == [(day, 8.0)]
    # pytest.approx compares equal to the floats it stands for; mypy holds the two types disjoint.
    assert got["elb_budget_spent_dollars"] == [(day, pytest.approx(0.5))]  # type: ignore[comparison-overlap]
    assert got["elb_budget_projected_dollars"] == [(day, pytest.approx(8.5))]  # type: ignore[comparison-overlap]
    assert got["elb_budget_holding"] == [(day, 1.0)]


def test_without_a_budget_the_budget_s_gauges_have_no_sample(tmp_path: Path) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path}\ncloud: {{provider: local}}\n")
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    sge = FakeSge(T0)
    from elb.schedulers.sge.driver import GridEngine

    bal = Balancer(
        cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=FakeCloud(T0), provisioner=FakeProvisioner(sge)
    )
    budget = [m for m in BalancerCollector(bal).collect() if m.name.startswith("elb_budget")]
    journal.close()
    assert len(budget) == 4 and all(not m.samples for m in budget)


needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not on PATH")
RUNBOOK = "docs/monitoring.md"

ALERT_TESTS: dict[str, Any] = {
    "rule_files": [str(REPO / "monitoring" / "elb-alerts.yml")],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'elb_budget_holding{period="day"}', "values": "0 0 1x60"},
                {"series": "elb_waiting_jobs", "values": "0 0 0 0 0 3x60"},  # jobs wait from minute 5
                {"series": 'elb_budget_dollars{period="day"}', "values": "100x100"},
                {"series": 'elb_budget_projected_dollars{period="day"}', "values": "90x10 120x90"},
            ],
            "alert_rule_test": [
                {"eval_time": "30m", "alertname": "ElbBudgetHolding", "exp_alerts": []},
                {
                    "eval_time": "40m",
                    "alertname": "ElbBudgetHolding",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "info", "period": "day"},
                            "exp_annotations": {
                                "summary": "the day's budget holds launches while jobs wait",
                                "description": "The money spent this period and what runs now, run to the "
                                "period's end, leave no room for another node (policy.budget), so elb launches "
                                "nothing for the waiting jobs. It never removes a busy node nor kills a job for "
                                "it. `elb status` shows the spend.",
                                "runbook_url": f"{RUNBOOK}#elbbudgetholding",
                            },
                        }
                    ],
                },
                {"eval_time": "60m", "alertname": "ElbBudgetOverrun", "exp_alerts": []},
                {
                    "eval_time": "75m",
                    "alertname": "ElbBudgetOverrun",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning", "period": "day"},
                            "exp_annotations": {
                                "summary": "the day's spend is projected past the budget",
                                "description": "What runs now, run to the period's end, costs more than the "
                                "budget leaves: elb launches nothing, but it removes only idle nodes, and the "
                                "nodes running jobs go on. `elb status` shows the spend; `elb spend` says who "
                                "spent it.",
                                "runbook_url": f"{RUNBOOK}#elbbudgetoverrun",
                            },
                        }
                    ],
                },
            ],
        }
    ],
}


@needs_promtool
def test_the_budget_s_alerts_fire_on_its_gauges(tmp_path: Path) -> None:
    tests = tmp_path / "tests.yml"
    tests.write_text(yaml.safe_dump(ALERT_TESTS))
    out = subprocess.run(["promtool", "test", "rules", str(tests)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
