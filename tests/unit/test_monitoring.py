"""The metrics elb exports follow Prometheus's naming conventions; the shipped alert rules are
valid, fire on the series elb serves, one alert per elb instance, each with a severity and a
runbook that exists; the Grafana dashboard shows one cluster's one elb at a time, queries only
series elb serves, shows every one of them, and gives each panel the unit of its series.

The exported names come from the registry elb serves (``elb.service.metrics``), built here on a
Grid Engine balancer's figures with a priced node group and a warm pool, so every family is in
it. ``promtool`` (Debian's prometheus package) checks and unit-tests the rules where it is on
PATH; the pure-Python checks run everywhere.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from elb.core.config import Config, parse_config
from elb.service.journal import Journal
from elb.service.metrics import PassMetrics, metrics_registry
from elb.service.passrecord import Counters, LastPass

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "monitoring"
RULES = MONITORING / "elb-alerts.yml"
DASHBOARD = MONITORING / "elb-dashboard.json"

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not on PATH (Debian's prometheus package has it): the pure-Python checks still run",
)


# -- what elb exports ------------------------------------------------------------------------


class Observed:
    """What ``elb.service.metrics`` reads of a balancer, with nothing happened yet.

    A plain class: mypy takes a dataclass's Callable field (``clock``) for a read-only
    attribute, which the metrics' protocol wants settable."""

    def __init__(
        self,
        config: Config,
        journal: Journal,
        last: LastPass,
        counters: Counters,
        metrics: PassMetrics,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.journal = journal
        self.last = last
        self.counters = counters
        self.metrics = metrics
        self.clock = clock


@pytest.fixture(scope="module")
def families(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Metric]]:
    """elb's metric families by name (the process's and Python's left out)."""
    state = tmp_path_factory.mktemp("state")
    config = parse_config(
        {
            "state_dir": str(state),
            "cloud": {"provider": "local"},
            "node_groups": [
                {"name": "small", "slots": 2, "max_nodes": 4, "price_per_hour": 0.5, "warm_pool": {"max_nodes": 2}}
            ],
        }
    )
    journal = Journal(config.journal_path)
    passes = PassMetrics(CollectorRegistry())
    registry = metrics_registry(Observed(config, journal, LastPass(), Counters(), passes, lambda: 0.0), passes)
    yield {m.name: m for m in registry.collect() if m.name.startswith("elb_")}
    journal.close()


def series_of(family: Metric) -> set[str]:
    """The series names Prometheus stores for a family."""
    if family.type == "counter":
        return {f"{family.name}_total"}
    if family.type == "histogram":
        return {f"{family.name}_{s}" for s in ("bucket", "count", "sum")}
    if family.type == "info":
        return {f"{family.name}_info"}
    return {family.name}


@pytest.fixture(scope="module")
def served(families: dict[str, Metric]) -> dict[str, Metric]:
    """Each series name elb serves -> its family."""
    return {s: f for f in families.values() for s in series_of(f)}


ELB_SERIES = re.compile(r"\b(elb_[a-z0-9_]+)")
# Units a name may end with: Prometheus's base units, and money in US dollars (a rate of it an
# hour, as EC2 and price_per_hour quote prices: the one unit not per second).
UNITS = ("seconds", "bytes", "ratio", "dollars_per_hour", "dollars")
NOT_BASE_UNITS = re.compile(
    r"(?<!_per)_(ms|milliseconds|minutes?|hours?|days?|kb|mb|gb|kilobytes|megabytes|percent|usd|cost)$"
)
TIME_WORDS = re.compile(r"\b(seconds?|duration|time|timestamp|wait|how long)\b", re.IGNORECASE)
MONEY_WORDS = re.compile(r"\b(cost|costs|price|spend|spent|money|dollars?)\b", re.IGNORECASE)


def test_the_registry_holds_elbs_metrics(families: dict[str, Metric]) -> None:
    assert len(families) > 20
    assert {"elb_nodes", "elb_passes", "elb_pass_duration_seconds"} <= set(families)


def test_exported_names_follow_prometheus_conventions(families: dict[str, Metric]) -> None:
    wrong: list[str] = []
    for name, m in sorted(families.items()):
        unit = next((u for u in UNITS if name.endswith(f"_{u}")), "")
        who = f"{name} ({m.type})"

        def bad(why: str, who: str = who) -> None:
            wrong.append(f"{who}: {why}")

        if not re.fullmatch(r"elb_[a-z][a-z0-9]*(_[a-z0-9]+)*", name):
            bad("not snake_case with the elb_ prefix")
        if m.type not in {"counter", "gauge", "histogram", "info"}:
            bad("a type elb does not use")
        if m.type != "counter" and name.endswith(("_total", "_created")):
            bad("_total/_created belongs to counters")
        if name.endswith(("_bucket", "_count", "_sum")):
            bad("a histogram's series suffix in a family name")
        if name.endswith("_info") or (m.type == "info") != (series_of(m) == {f"{name}_info"}):
            bad("an _info series must be of type info (its family named without _info)")
        if m.unit != unit:
            bad(f"declares unit {m.unit!r}; its name ends with {unit or 'no unit'!r}")
        if NOT_BASE_UNITS.search(name):
            bad("not a base unit (seconds, bytes, ratio)")
        if TIME_WORDS.search(m.documentation) and m.type != "counter" and unit != "seconds":
            bad("a time or duration must be in seconds, named _seconds")
        if MONEY_WORDS.search(m.documentation) and not unit.startswith("dollars"):
            bad("money must name its currency unit (_dollars, _dollars_per_hour)")
        if unit.startswith("dollars") and "US dollars" not in m.documentation:
            bad("the help text must say the money is US dollars")
    assert wrong == [], "\n".join(wrong)


def test_the_monitoring_page_names_every_exported_metric(served: dict[str, Metric]) -> None:
    listed = (REPO / "docs" / "monitoring.md").read_text(encoding="utf-8")
    named = {f.name if f.type == "histogram" else s for s, f in served.items()}
    assert sorted(n for n in named if f"`{n}" not in listed) == []


# -- the alert rules -------------------------------------------------------------------------


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [r for g in doc["groups"] for r in g["rules"]]


RUNBOOK = "docs/monitoring.md"


def anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    out: set[str] = set()
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_every_alert_has_a_severity_a_summary_and_a_runbook_that_exists() -> None:
    assert rules()
    for rule in rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["annotations"]["summary"], name
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == RUNBOOK, name
        assert anchor in anchors(REPO / path), f"{name}: no heading #{anchor} in {path}"
        assert anchor == name.lower()  # the runbook's section is headed with the alert's name


def test_every_alert_expression_uses_series_elb_serves(served: dict[str, Metric]) -> None:
    used = {m for r in rules() for m in ELB_SERIES.findall(r["expr"])}
    assert used
    assert used - set(served) == set()


AGGREGATION = re.compile(r"\b(sum|avg|min|max|count|stddev|topk|bottomk|quantile)\s*(\w*)\s*(\([^()]*\))?\s*\(")


def test_alerts_never_aggregate_over_elb_instances() -> None:
    """An aggregation keeps every target label (``without``) or names cluster and instance."""
    for rule in rules():
        for op, kind, labels in AGGREGATION.findall(rule["expr"]):
            keeps = kind == "without" or (kind == "by" and {"cluster", "instance"} <= set(re.findall(r"\w+", labels)))
            assert keeps, f"{rule['alert']}: {op} {kind}{labels} adds up elb instances"


def test_the_launch_backoff_has_an_alert() -> None:
    backoff = [r for r in rules() if "elb_launch_backoff_rounds" in r["expr"]]
    assert len(backoff) == 1
    assert backoff[0]["for"] == "15m" and backoff[0]["labels"]["severity"] == "warning"


def runbook(name: str) -> str:
    return f"{RUNBOOK}#{name.lower()}"


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
                {"series": "elb_launch_backoff_rounds", "values": "0 1 2 3 4x20 0x10"},
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
                                "runbook_url": runbook("ElbLostNodeKept"),
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
                                "runbook_url": runbook("ElbNoGoodPass"),
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
                                "runbook_url": runbook("ElbNodeOperationsFailing"),
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
                                "runbook_url": runbook("ElbUnservableJobs"),
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
                                "summary": "more than half of elb's passes failed in the last 30 minutes",
                                "runbook_url": runbook("ElbPassesFailing"),
                            },
                        }
                    ],
                },
                # two rounds from minute 2: pending for 15 minutes, then firing until the rounds end
                {"eval_time": "16m", "alertname": "ElbLaunchBackedOff", "exp_alerts": []},
                {
                    "eval_time": "18m",
                    "alertname": "ElbLaunchBackedOff",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning"},
                            "exp_annotations": {
                                "summary": "elb has backed off launching after 4 failed launch rounds in a row",
                                "description": "Launches or provisionings keep failing, so elb waits longer "
                                "and longer between launch rounds and launches a single node at a time: waiting "
                                "jobs get no nodes. `journalctl -u elb -p warning` says why the launches fail.",
                                "runbook_url": runbook("ElbLaunchBackedOff"),
                            },
                        }
                    ],
                },
                {"eval_time": "30m", "alertname": "ElbLaunchBackedOff", "exp_alerts": []},
            ],
        },
        {
            # Two clusters' elbs: passes fail on one only, and the alert names that one alone.
            "interval": "1m",
            "input_series": [
                {"series": 'elb_passes_total{outcome="failed",cluster="a",instance="a:9100"}', "values": "0+1x40"},
                {"series": 'elb_passes_total{outcome="ok",cluster="a",instance="a:9100"}', "values": "0x40"},
                {"series": 'elb_passes_total{outcome="failed",cluster="b",instance="b:9100"}', "values": "0x40"},
                {"series": 'elb_passes_total{outcome="ok",cluster="b",instance="b:9100"}', "values": "0+1x40"},
            ],
            "alert_rule_test": [
                {
                    "eval_time": "30m",
                    "alertname": "ElbPassesFailing",
                    "exp_alerts": [
                        {
                            "exp_labels": {"severity": "warning", "cluster": "a", "instance": "a:9100"},
                            "exp_annotations": {
                                "summary": "more than half of elb's passes failed in the last 30 minutes",
                                "runbook_url": runbook("ElbPassesFailing"),
                            },
                        }
                    ],
                },
            ],
        },
    ],
}


@needs_promtool
def test_rules_are_valid() -> None:
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules())} rules found" in out.stdout


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


# -- the dashboard ---------------------------------------------------------------------------


def board() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text(encoding="utf-8")))


def panels() -> list[dict[str, Any]]:
    return [p for p in board()["panels"] if p["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every query."""
    return [(p["title"], t["expr"]) for p in panels() for t in p["targets"]]


def selectors(expr: str) -> list[tuple[str, str]]:
    """(series, matchers) of each elb series an expression selects."""
    return re.findall(r"\b(elb_[a-z0-9_]+)\s*(?:\{([^}]*)\})?", expr)


def test_the_dashboard_picks_one_cluster_and_one_elb(served: dict[str, Metric]) -> None:
    variables = {v["name"]: v for v in board()["templating"]["list"]}
    for name in ("cluster", "instance"):
        v = variables[name]
        assert v["type"] == "query"
        assert not v.get("multi") and not v.get("includeAll"), f"${name} must be one value: no sums across them"
        m = re.fullmatch(r"label_values\((elb_[a-z0-9_]+)(\{[^}]*\})?,\s*(\w+)\)", v["definition"])
        assert m and m.group(1) in served and m.group(3) == name, v["definition"]
        assert v["query"]["query"] == v["definition"]
    assert 'cluster="$cluster"' in variables["instance"]["definition"]  # the elbs of the cluster picked


def test_every_query_selects_the_cluster_and_the_instance() -> None:
    assert queries()
    for title, expr in queries():
        found = selectors(expr)
        assert found, (title, expr)
        for series, matchers in found:
            have = {m.strip() for m in matchers.split(",")}
            assert {'cluster="$cluster"', 'instance="$instance"'} <= have, (title, series, expr)


def test_the_dashboard_queries_only_series_elb_serves(served: dict[str, Metric]) -> None:
    used = {s for _, e in queries() for s, _ in selectors(e)}
    assert used - set(served) == set()


def test_the_dashboard_shows_every_series_elb_serves(families: dict[str, Metric]) -> None:
    used = {s for _, e in queries() for s, _ in selectors(e)}
    variables = " ".join(v.get("definition", "") for v in board()["templating"]["list"])
    shown = {name for name, f in families.items() if series_of(f) & used or name in variables}
    assert sorted(set(families) - shown) == []


GRAFANA_UNITS = {"seconds": "s", "dollars_per_hour": "currencyUSD", "dollars": "currencyUSD", "": "short"}


def query_unit(expr: str, served: dict[str, Metric]) -> set[str]:
    """The units of what an expression computes: a counter's or a histogram's _count is a count,
    a quantile of a histogram has the histogram's unit, a gauge its own."""
    units = set()
    for series, _ in selectors(expr):
        counted = series.endswith(("_total", "_count"))
        units.add("" if counted else served[series].unit)
    return units


def test_every_panel_has_the_unit_of_its_series(served: dict[str, Metric]) -> None:
    wrong = []
    for p in panels():
        want = {GRAFANA_UNITS[u] for t in p["targets"] for u in query_unit(t["expr"], served)}
        have = p["fieldConfig"]["defaults"]["unit"]
        if want != {have}:
            wrong.append(f"{p['title']}: {have}, its series' unit: {' and '.join(sorted(want))}")
    assert wrong == [], "\n".join(wrong)


@needs_promtool
def test_the_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Each query, its variables filled in, checked as a recording rule by promtool."""
    exprs = [e.replace("$cluster", "c1").replace("$instance", "m:9110") for _, e in queries()]
    rules = [{"record": f"q{i}", "expr": e} for i, e in enumerate(exprs)]
    recorded = {"groups": [{"name": "dashboard", "rules": rules}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(recorded))
    out = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in out.stdout


def test_every_panel_uses_the_datasource_variable() -> None:
    assert any(v["name"] == "datasource" for v in board()["templating"]["list"])
    for p in panels():
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
