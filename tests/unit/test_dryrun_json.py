"""``elb once --dry-run --json``: the plan as one JSON object on stdout (nodes to add per group
with their names, nodes to remove, unservable jobs with their reasons, the snapshot's totals),
through the command line with the in-memory stand-ins of tests/unit/fakes.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from elb.cli.main import main
from elb.core.exitcodes import Exit
from elb.core.interfaces import Instance
from tests.unit.factories import HOUR, T0, host, pending, running
from tests.unit.fakes import FakeSge
from tests.unit.test_cli_once import Stand, stand  # noqa: F401 (the fixture)

GROUPS = """\
state_dir: {state}
cloud: {{provider: local}}
policy: {{max_nodes: 5}}
node_groups:
  - {{name: small, slots: 2, max_nodes: 3}}
  - {{name: gpu, slots: 4, max_nodes: 2, offers: {{gpu: "1"}}}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(text.format(state=tmp_path / "state"))
    return path


def dry_json(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["once", "--dry-run", "--json", "-c", str(path)])
    return code, json.loads(capsys.readouterr().out)


def test_the_plan_per_group_with_unservable_jobs(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stand.sge = FakeSge(
        T0,
        jobs=[
            replace(pending(1, 600), hard_requests={"gpu": "1"}),
            pending(2, 600, slots=2),
            replace(pending(3, 600), hard_requests={"gpu": "2"}),
            replace(pending(4, 600), hard_queues=("other.q",)),
            running(5, "static1", ran=HOUR),
        ],
        complexes="qconf-sc-site.txt",
    )
    stand.sge.hosts["static1"] = host("static1", 2, used=1)
    code, plan = dry_json(write(tmp_path, GROUPS), capsys)
    assert code == Exit.OK
    assert plan["ok"] is True and plan["time"] == T0
    assert plan["add"] == [
        {"group": "small", "count": 1, "names": ["node001"]},
        {"group": "gpu", "count": 1, "names": ["node002"]},
    ]
    assert plan["remove"] == []
    assert [(u["job_id"], u["reason"]) for u in plan["unservable"]] == [
        (3, "requests gpu=2: more than any node group offers (small: none, gpu: 1)"),
        (4, "bound to queue other.q: no node group joins it"),
    ]
    assert plan["snapshot"] == {
        "jobs_running": 1,
        "jobs_waiting": 4,
        "slots_waiting": 5,
        "jobs_held_or_error": 0,
        "oldest_wait": 600.0,
        "workers": 1,
        "slots": 2,
        "slots_used": 1,
        "nodes_managed": 0,
    }
    assert [g["name"] for g in plan["groups"]] == ["small", "gpu"]
    assert plan["max_nodes"] == 5 and plan["not_yet"] == []
    assert any(line.startswith("add 2 (node001, node002)") for line in plan["lines"])


def test_without_node_groups_the_one_group_is_default(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stand.sge = FakeSge(T0, jobs=[pending(1, 600, slots=1, tasks=3)])
    path = tmp_path / "elb.yml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\npolicy: {{max_nodes: 4, slots_per_node: 2}}\n")
    code, plan = dry_json(path, capsys)
    assert code == Exit.OK
    assert plan["add"] == [{"group": "default", "count": 2, "names": ["node001", "node002"]}]
    assert plan["groups"] == [
        {"name": "default", "slots": 2, "min_nodes": 0, "max_nodes": 4, "nodes": 0, "price_per_hour": None}
    ]


def test_sge_unreadable_is_json_too_and_exits_4(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stand.sge.fail_reads = 5
    code, plan = dry_json(write(tmp_path, GROUPS), capsys)
    assert code == Exit.UNREADABLE
    assert plan["ok"] is False and "unable to contact qmaster" in str(plan["error"])


def test_json_without_dry_run_is_a_usage_error(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["once", "--json", "-c", str(write(tmp_path, GROUPS))]) == Exit.USAGE
    assert "--json goes with --dry-run" in capsys.readouterr().err


def test_the_json_plan_has_the_whole_pass(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The JSON dry run carries the repairs the pass would start and whether scaling runs."""
    assert stand.cloud is not None
    stand.cloud.instances["i-orphan"] = Instance("i-orphan", "node007", "running", T0 - 3600, "10.0.0.7")
    stand.sge = FakeSge(T0, jobs=[pending(1, 600, slots=2)])
    code, plan = dry_json(write(tmp_path, GROUPS), capsys)
    assert code == Exit.OK
    assert [(r["kind"], r["node"]) for r in plan["repairs"]] == [("orphan", "node007")]
    assert plan["scaling"] is False and plan["scaling_note"] and plan["add"] == []
    assert plan["cloud"] == "1 listed (read only)"
    assert plan["lines"][0].startswith("repair (orphan) node007: ")
    assert set(stand.cloud.instances) == {"i-orphan"}


def test_the_json_plan_names_the_group_tags_it_would_set(
    stand: Stand,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A worker whose instance lacks its node group's tag (launched before elb set it), on a
    cloud that can tag: the dry run says it would tag it, and why, and tags nothing."""
    from elb.core.config import load_config
    from elb.core.interfaces import TAG_GROUP
    from elb.core.model import NodeState
    from elb.service.journal import Journal
    from tests.unit.test_group_tags import TaggingCloud

    path = write(tmp_path, GROUPS)
    journal = Journal(load_config(path).journal_path)
    journal.record("node001", NodeState.RUNNING, T0 - HOUR, instance_id="i-0001", private_ip="10.0.0.1", group="gpu")
    journal.record("node001", NodeState.READY, T0 - HOUR + 60)
    journal.close()
    cloud = TaggingCloud(T0)
    cloud.instances["i-0001"] = Instance("i-0001", "node001", "running", T0 - HOUR, "10.0.0.1", slots=4)
    stand.cloud = cloud
    stand.sge.add_host("node001", slots=4)
    code, plan = dry_json(path, capsys)
    assert code == Exit.OK
    (tag,) = plan["group_tags"]
    assert (tag["node"], tag["instance"], tag["group"]) == ("node001", "i-0001", "gpu") and tag["reason"]
    assert any(line.startswith(f"tag node001 {TAG_GROUP}=gpu: ") for line in plan["lines"])
    assert cloud.tag_calls == []
