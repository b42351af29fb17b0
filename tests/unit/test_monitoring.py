"""The shipped Prometheus alert rules are valid and fire on the series elb serves, and the
Grafana dashboard queries only series elb serves (promtool from Debian's prometheus package)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = MONITORING / "elb-alerts.yml"
DASHBOARD = MONITORING / "elb-dashboard.json"

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")

# Alerts fire from these series; each case: (input series, minutes to evaluate at, alerts expected).
UNIT_TESTS = {
    "rule_files": [str(RULES)],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            "input_series": [
                {"series": "elb_lost_nodes_kept", "values": "0 0 1x30"},
                {"series": "elb_last_good_pass_timestamp_seconds", "values": "0+60x10 600x30"},
                {"series": 'elb_passes_total{outcome="failed"}', "values": "0 0+1x40"},
                {"series": 'elb_passes_total{outcome="ok"}', "values": "0+1x10 10x30"},
                {"series": "elb_node_failures_total", "values": "0 0 1 2 3 4x30"},
                {"series": 'elb_build_info{version="x",python="3.11"}', "values": "1x40"},
                {"series": 'up{job="elb"}', "values": "1x40"},
                {"series": "elb_unservable_jobs", "values": "0 0 2x40"},
            ],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "ElbLostNodeKept", "exp_alerts": []},
                {
                    "eval_time": "20m",
                    "alertname": "ElbLostNodeKept",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning"},
                            "exp_annotations": {
                                "summary": "elb keeps 1 lost node(s) because SGE lists jobs on them",
                                "description": "A node's instance is gone or SGE cannot reach it, but SGE "
                                "still lists jobs there. elb never kills a job: check the node (restart its "
                                "execd) or end the jobs (qdel -f, or qmod -f -rj to rerun them). `elb status` "
                                "names the node.",
                            },
                        }
                    ],
                },
                {"eval_time": "8m", "alertname": "ElbNoGoodPass", "exp_alerts": []},
                {
                    "eval_time": "25m",
                    "alertname": "ElbNoGoodPass",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "critical"},
                            "exp_annotations": {
                                "summary": "elb has not completed a good pass for 15m 0s",
                                "description": "elb cannot read SGE or the cloud, so it changes nothing: the "
                                "cluster neither grows nor shrinks. See `journalctl -u elb`.",
                            },
                        }
                    ],
                },
                {"eval_time": "2m", "alertname": "ElbNodeOperationsFailing", "exp_alerts": []},
                {
                    "eval_time": "10m",
                    "alertname": "ElbNodeOperationsFailing",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning"},
                            "exp_annotations": {
                                "summary": "4 node operations failed in the last hour",
                                "description": "Launches, provisioning or removals are failing (capacity, a "
                                "playbook, the cloud's API). elb backs off between launch attempts; "
                                "`journalctl -u elb -p warning` says why.",
                            },
                        }
                    ],
                },
                {"eval_time": "20m", "alertname": "ElbUnservableJobs", "exp_alerts": []},
                {
                    "eval_time": "38m",
                    "alertname": "ElbUnservableJobs",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "info"},
                            "exp_annotations": {
                                "summary": "2 waiting job(s) that no node elb launches could run",
                                "description": "These jobs wait for a queue, a resource, a host or more slots "
                                "than elb's nodes offer, so elb launches nothing for them and they wait for ever. "
                                "`elb jobs` gives each one's reason: change the job (qalter) or the node settings.",
                            },
                        }
                    ],
                },
                {"eval_time": "30m", "alertname": "ElbDown", "exp_alerts": []},
                {
                    "eval_time": "30m",
                    "alertname": "ElbPassesFailing",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning"},
                            "exp_annotations": {
                                "summary": "more than half of elb's passes failed in the last 30 minutes"
                            },
                        }
                    ],
                },
            ],
        }
    ],
}


def _names(alerts: list[dict[str, object]]) -> list[str]:
    return [str(a["alertname"]) for a in alerts]


@needs_promtool
def test_rules_are_valid() -> None:
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 6 rules found" in out.stdout


@needs_promtool
def test_rules_fire_on_the_series_elb_serves(tmp_path: Path) -> None:
    tests = tmp_path / "tests.yml"
    tests.write_text(yaml.safe_dump(UNIT_TESTS))
    out = subprocess.run(["promtool", "test", "rules", str(tests)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """promtool's unit test can fail: a lost node with no alert expected is reported."""
    broken = json.loads(json.dumps(UNIT_TESTS))
    broken["tests"][0]["alert_rule_test"][1]["exp_alerts"] = []
    tests = tmp_path / "tests.yml"
    tests.write_text(yaml.safe_dump(broken))
    out = subprocess.run(["promtool", "test", "rules", str(tests)], capture_output=True, text=True, check=False)
    assert out.returncode != 0


def test_dashboard_queries_only_served_series() -> None:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert exprs
    served = set(re.findall(r"`(elb_[a-z_]+)", (MONITORING.parent / "README.md").read_text()))
    used = {m for e in exprs for m in re.findall(r"\b(elb_[a-z_]+)", e)}
    suffixes = ("_bucket", "_count", "_sum")
    used = {next((u.removesuffix(s) for s in suffixes if u.endswith(s)), u) for u in used}
    assert used - served == set()
    rules = yaml.safe_load(RULES.read_text())
    rule_series = {m for r in rules["groups"][0]["rules"] for m in re.findall(r"\b(elb_[a-z_]+)", r["expr"])}
    assert rule_series - served == set()
