"""A worker launched before elb tagged workers with their node group (``elb:group``) gets the tag
from the daemon: the planner plans it, with why, for each worker of the journal whose group is
known and whose instance lacks it, when the cloud can tag (``TagsGroups``); the actuator has the
cloud tag them in the pass; a refusal is logged, fails no node, is journalled and asked again an
hour later. ``elb nodes`` and the dry run say which workers still lack the tag and when it is set.
EC2 tags them with ``CreateTags``, one call per group and 1000 instances at most."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from elb.cli.dryrun import dry_run
from elb.cli.main import main
from elb.clouds.ec2.contract import problems
from elb.clouds.local import LocalCloud, LocalConfig
from elb.core.backoff import Backoffs
from elb.core.config import Config, load_config, parse_config
from elb.core.demand import DemandSplit
from elb.core.exitcodes import Exit
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.interfaces import TAG_GROUP, CloudError, Instance, TagsGroups
from elb.core.model import History, Node, NodeState
from elb.core.orders import Orders
from elb.core.planner import PassInputs, PassPlan, plan_pass
from elb.core.policy.grouped import policy_for
from elb.core.tagplan import TAG_RETRY
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit import ec2_scenarios
from tests.unit.factories import EC2, T0, host, node, snap
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

GPU = {"name": "gpu", "slots": 4, "max_nodes": 2, "queues": ["gpu.q"], "hostgroup": "@gpu"}
SMALL = {"name": "small", "slots": 2, "max_nodes": 3}


def config(tmp_path: Path, *groups: dict[str, object]) -> Config:
    return parse_config(
        {"state_dir": str(tmp_path), "policy": {"billing": "second"}, "node_groups": [dict(g) for g in groups]}
    )


def instance(name: str, group: str | None = None, state: str = "running") -> Instance:
    tags = {} if group is None else {TAG_GROUP: group}
    return Instance(f"i-{name}", name, state, T0 - 3600, private_ip="10.0.0.9", tags=tags)  # type: ignore[arg-type]


def plan(cfg: Config, nodes: tuple[Node, ...], instances: tuple[Instance, ...], *, tags: bool = True) -> PassPlan:
    snapshot = snap(hosts=[host(n.name) for n in nodes])
    inputs = PassInputs(
        snapshot=snapshot,
        nodes=nodes,
        instances=instances,
        demand=DemandSplit(snapshot),
        history=History(),
        orders=Orders(),
        backoff=Backoffs(),
        scheduler="SGE",
        cloud=EC2,
        tags_groups=tags,
    )
    return plan_pass(inputs, cfg, policy_for(cfg), T0)


def ready(name: str, group: str | None) -> Node:
    return node(name, 3600, instance_id=f"i-{name}", private_ip="10.0.0.9", group=group)


# --------------------------------------------------------------------------- the planner


def test_a_worker_whose_instance_lacks_its_groups_tag_is_planned_to_get_it_with_why(tmp_path: Path) -> None:
    cfg = config(tmp_path, SMALL, GPU)
    p = plan(
        cfg, (ready("node001", "gpu"), ready("node002", "small")), (instance("node001"), instance("node002", "small"))
    )
    assert [(t.node, t.instance_id, t.group) for t in p.group_tags] == [("node001", "i-node001", "gpu")]
    (why,) = {t.reason for t in p.group_tags}
    assert TAG_GROUP in why and "launched before" in why
    (line,) = [line for line in p.describe() if line.startswith("tag ")]
    assert line.startswith(f"tag node001 {TAG_GROUP}=gpu: ") and why in line
    assert p.scaling is not None  # a tag is no repair: scaling goes on in the same pass


def test_nothing_is_planned_when_the_cloud_cannot_tag(tmp_path: Path) -> None:
    cfg = config(tmp_path, SMALL, GPU)
    assert plan(cfg, (ready("node001", "gpu"),), (instance("node001"),), tags=False).group_tags == ()


def test_only_a_known_group_is_tagged(tmp_path: Path) -> None:
    """Among several groups a record without one (the first group's variables, for elb's plays)
    is not tagged: its group is not known, and a tag would place it for good. A group no longer
    configured is not tagged either; a tagged instance, a gone record, a gone instance neither."""
    cfg = config(tmp_path, SMALL, GPU)
    nodes = (
        ready("node001", None),
        ready("node002", "retired"),
        ready("node003", "small"),
        dataclasses.replace(ready("node004", "gpu"), state=NodeState.TERMINATED),
        ready("node005", "gpu"),
    )
    instances = (
        instance("node001"),
        instance("node002"),
        instance("node003", "small"),
        instance("node004"),
        instance("node005", state="gone"),
    )
    assert plan(cfg, nodes, instances).group_tags == ()


def test_with_one_group_a_record_without_one_is_of_that_group(tmp_path: Path) -> None:
    cfg = config(tmp_path, GPU)
    p = plan(cfg, (ready("node001", None),), (instance("node001"),))
    assert [(t.node, t.group) for t in p.group_tags] == [("node001", "gpu")]


def test_without_node_groups_a_worker_is_tagged_with_the_one_group(tmp_path: Path) -> None:
    """As elb launches it: ``default``."""
    cfg = parse_config({"state_dir": str(tmp_path), "policy": {"slots_per_node": 8}})
    p = plan(cfg, (ready("node001", None), ready("node002", "default")), (instance("node001"), instance("node002")))
    assert [(t.node, t.group) for t in p.group_tags] == [("node001", "default"), ("node002", "default")]
    (line,) = [line for line in p.describe() if line.startswith("tag ")]
    assert line.startswith(f"tag node001, node002 {TAG_GROUP}=default: ")


def test_a_stopped_worker_of_the_warm_pool_is_tagged_too(tmp_path: Path) -> None:
    cfg = config(tmp_path, SMALL, GPU)
    pooled = dataclasses.replace(ready("node001", "gpu"), state=NodeState.STOPPED, stopped_at=T0 - 60)
    p = plan(cfg, (pooled,), (instance("node001", state="stopped"),))
    assert [t.node for t in p.group_tags] == ["node001"]


# --------------------------------------------------------------------------- the daemon


@dataclass
class TaggingCloud(FakeCloud):
    """A cloud that tags: each call recorded; ``error``: every call refused."""

    tag_calls: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None

    def tag_groups(self, groups: Mapping[str, str]) -> None:
        self.tag_calls.append(dict(groups))
        if self.error is not None:
            raise CloudError(self.error)
        for iid, group in groups.items():
            inst = self.instances[iid]
            self.instances[iid] = dataclasses.replace(inst, tags={**inst.tags, TAG_GROUP: group})


def rig(tmp_path: Path, cloud: FakeCloud, clock: Callable[[], float] = time.time) -> tuple[Balancer, Journal]:
    """Two ready workers the journal has with their groups (kept: each its group's minimum),
    whose instances have no group tag."""
    cfg = config(tmp_path, {**SMALL, "min_nodes": 1}, {**GPU, "min_nodes": 1})
    sge = FakeSge(T0)
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=journal,
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
        clock=clock,
    )
    for i, (name, group) in enumerate((("node001", "gpu"), ("node002", "small")), start=1):
        iid = f"i-{i:04d}"
        cloud.instances[iid] = Instance(iid, name, "running", T0 - 3600, f"10.0.0.{i}", slots=4)
        journal.record(name, NodeState.RUNNING, T0 - 3600, instance_id=iid, private_ip=f"10.0.0.{i}", group=group)
        journal.record(name, NodeState.READY, T0 - 3500)
        sge.add_host(name)
    cloud.counter = 2
    return bal, journal


def test_the_daemon_tags_each_untagged_worker_once(tmp_path: Path) -> None:
    cloud = TaggingCloud(T0)
    bal, journal = rig(tmp_path, cloud)
    assert isinstance(cloud, TagsGroups)
    result = bal.run_pass()
    assert result.ok, result.error
    assert cloud.tag_calls == [{"i-0001": "gpu", "i-0002": "small"}]
    assert bal.run_pass().ok
    assert len(cloud.tag_calls) == 1  # tagged: nothing more to do
    assert {n.name: n.state for n in journal.nodes()} == {"node001": NodeState.READY, "node002": NodeState.READY}


def test_a_tagging_error_is_logged_once_fails_no_node_and_is_tried_again_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cloud = TaggingCloud(T0, error="UnauthorizedOperation: not authorized to perform: ec2:CreateTags")
    bal, journal = rig(tmp_path, cloud)
    with caplog.at_level("WARNING"):
        result = bal.run_pass()
    assert result.ok, result.error
    said = [r.getMessage() for r in caplog.records if "CreateTags" in r.getMessage()]
    assert len(said) == 1 and "node001" in said[0] and "tried again in 60 min" in said[0]
    assert not result.outcomes.failed
    assert {n.state for n in journal.nodes()} == {NodeState.READY}
    cloud.error = None
    bal.scheduler.sge.now = cloud.now = T0 + TAG_RETRY  # type: ignore[attr-defined]
    assert bal.run_pass().ok
    assert len(cloud.tag_calls) == 2 and cloud.instances["i-0001"].tags[TAG_GROUP] == "gpu"


def test_a_refused_tagging_is_asked_again_an_hour_later_not_every_pass(tmp_path: Path) -> None:
    """A site whose IAM policy predates the tag's statement has every ``CreateTags`` refused: a
    call every pass would be a retry without back-off (and a warning a minute). After a refusal
    the tags wait ``TAG_RETRY``; then they are asked for again."""
    clock = Clock(T0)
    cloud = TaggingCloud(T0, error="UnauthorizedOperation: not authorized to perform: ec2:CreateTags")
    bal, _journal = rig(tmp_path, cloud, clock)
    sge = bal.scheduler.sge  # type: ignore[attr-defined]

    def at(t: float) -> None:
        clock.t = cloud.now = sge.now = T0 + t

    for t in (0.0, 60.0, 120.0, TAG_RETRY - 60):
        at(t)
        assert bal.run_pass().ok
    assert len(cloud.tag_calls) == 1
    at(TAG_RETRY)
    assert bal.run_pass().ok
    assert len(cloud.tag_calls) == 2
    cloud.error = None
    at(2 * TAG_RETRY)
    assert bal.run_pass().ok
    assert len(cloud.tag_calls) == 3 and cloud.instances["i-0001"].tags[TAG_GROUP] == "gpu"


def test_the_dry_run_shows_the_tags_it_would_set_and_sets_none(tmp_path: Path) -> None:
    cloud = TaggingCloud(T0)
    bal, _ = rig(tmp_path, cloud)
    result = bal.run_pass(dry_run=True)
    assert result.ok and result.planned is not None, result.error
    lines = result.planned.describe()
    assert f"tag node001 {TAG_GROUP}=gpu: " in "\n".join(lines)
    assert cloud.tag_calls == []


def test_a_dry_run_that_cannot_list_the_cloud_plans_no_tag(tmp_path: Path) -> None:
    """The journal's workers taken for the cloud's carry no tags: nothing is known to lack one."""

    @dataclass
    class Unlisted(TaggingCloud):
        def list_workers(self) -> list[Instance]:
            raise CloudError("no credentials")

    bal, _ = rig(tmp_path, Unlisted(T0))
    result = bal.run_pass(dry_run=True)
    assert result.ok and result.planned is not None, result.error
    assert result.planned.group_tags == ()


# --------------------------------------------------------------------------- what an admin sees

REFUSED = "UnauthorizedOperation: not authorized to perform: ec2:CreateTags"
REFUSED_LINE = (
    f"group tag {TAG_GROUP}=gpu not yet set: the cloud refused it at 2027-01-15 08:00 UTC "
    f"(tagging i-0001, i-0002: {REFUSED}), asked again at 2027-01-15 09:00 UTC"
)


class ForTagging(TaggingCloud):
    """The refusal as EC2's adapter words it: what the call tagged, then the cloud's error."""

    def tag_groups(self, groups: Mapping[str, str]) -> None:
        try:
            super().tag_groups(groups)
        except CloudError as err:
            raise CloudError(f"tagging {', '.join(groups)}: {err}") from None


def on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cloud: FakeCloud
) -> tuple[Path, Balancer, Journal]:
    """``rig``'s cluster, with its config written for the command line and the factory handing
    out its scheduler and ``cloud``."""
    bal, journal = rig(tmp_path, cloud)
    path = tmp_path / "elb.yml"
    groups = [{**SMALL, "min_nodes": 1}, {**GPU, "min_nodes": 1}]
    path.write_text(json.dumps({"state_dir": str(tmp_path), "policy": {"billing": "second"}, "node_groups": groups}))
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, bal.scheduler.sge))  # type: ignore[attr-defined]
    monkeypatch.setattr(factory, "make_cloud", lambda cfg: cloud)
    return path, bal, journal


def nodes_out(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["nodes", "-c", str(path), *extra]) == Exit.OK
    return capsys.readouterr().out


def test_the_refusal_is_journalled_and_a_restarted_daemon_waits_it_out(tmp_path: Path) -> None:
    """The refusal is the cloud's answer to elb's permissions, not to one process: kept in the
    journal, a restarted daemon (or ``elb once``) asks again when the hour is out, not at once."""
    cloud = TaggingCloud(T0, error=REFUSED)
    bal, journal = rig(tmp_path, cloud)
    assert bal.run_pass().ok and len(cloud.tag_calls) == 1
    refused = journal.tags_refused()
    assert refused is not None and refused.at == T0 and REFUSED in refused.error
    again = Balancer(bal.config, scheduler=bal.scheduler, journal=journal, cloud=cloud, provisioner=bal.provisioner)
    assert again.run_pass().ok
    assert len(cloud.tag_calls) == 1
    cloud.error = None
    bal.scheduler.sge.now = cloud.now = T0 + TAG_RETRY  # type: ignore[attr-defined]
    assert again.run_pass().ok
    assert len(cloud.tag_calls) == 2 and journal.tags_refused() is None


def test_nodes_says_which_workers_lack_their_group_tag_and_that_the_next_pass_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, bal, journal = on_the_command_line(tmp_path, monkeypatch, TaggingCloud(T0))
    out = nodes_out(path, capsys).splitlines()
    at = out.index("node group tags:")
    assert out[at + 1 :] == [
        f"  node001: group tag {TAG_GROUP}=gpu not yet set: set at the next pass",
        f"  node002: group tag {TAG_GROUP}=small not yet set: set at the next pass",
    ]
    doc = json.loads(nodes_out(path, capsys, "--json"))
    assert [(u["node"], u["group"], u["refused_at"]) for u in doc["untagged"]] == [
        ("node001", "gpu", None),
        ("node002", "small", None),
    ]
    assert bal.run_pass().ok  # tagged
    journal.close()
    assert "node group tags:" not in nodes_out(path, capsys)
    assert json.loads(nodes_out(path, capsys, "--json"))["untagged"] == []


def test_nodes_says_the_cloud_refused_the_tags_and_when_they_are_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon's refusal, read from the journal by ``elb nodes`` (another process), with the
    time the daemon asks again (``tags_due``, the pass's own rule); the dry run says the same."""
    cloud = ForTagging(T0, error=REFUSED)
    path, bal, journal = on_the_command_line(tmp_path, monkeypatch, cloud)
    assert bal.run_pass().ok
    journal.close()
    bal.scheduler.sge.now = T0 + 60  # type: ignore[attr-defined]
    out = nodes_out(path, capsys).splitlines()
    assert f"  node001: {REFUSED_LINE}" in out
    doc = json.loads(nodes_out(path, capsys, "--json"))
    (gpu,) = [u for u in doc["untagged"] if u["node"] == "node001"]
    assert (gpu["refused_at"], gpu["asked_again_at"], gpu["line"]) == (T0, T0 + TAG_RETRY, REFUSED_LINE)
    assert REFUSED in gpu["refusal"]
    lines: list[str] = []
    cfg = load_config(path)
    assert dry_run(cfg, factory.make_scheduler, factory.make_cloud, lines.append) == (Exit.OK, None)
    assert f"  node001: {REFUSED_LINE}" in lines
    assert not any(line.strip().startswith("tag ") for line in lines)  # not asked for in this pass
    lines.clear()
    assert dry_run(cfg, factory.make_scheduler, factory.make_cloud, lines.append, as_json=True) == (Exit.OK, None)
    plan = json.loads(lines[0])
    assert plan["group_tags"] == [] and [u["line"] for u in plan["tags_waiting"]][:1] == [REFUSED_LINE]
    assert len(cloud.tag_calls) == 1
    bal.scheduler.sge.now = T0 + TAG_RETRY  # type: ignore[attr-defined]
    out = nodes_out(path, capsys).splitlines()
    due = REFUSED_LINE.removesuffix("at 2027-01-15 09:00 UTC") + "at the next pass"  # the daemon down since
    assert f"  node001: {due}" in out


def test_nodes_says_nothing_of_tags_on_a_cloud_that_cannot_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, journal = on_the_command_line(tmp_path, monkeypatch, FakeCloud(T0))
    journal.close()
    assert "tag" not in nodes_out(path, capsys)
    assert "untagged" not in json.loads(nodes_out(path, capsys, "--json"))


# --------------------------------------------------------------------------- the clouds


def test_ec2_tags_and_the_local_cloud_cannot(tmp_path: Path) -> None:
    """Podman sets a container's labels when it makes it, never after: the local cloud does not tag."""
    ec2 = ec2_scenarios.cloud(ec2_scenarios.World(), **ec2_scenarios.OWN)
    local = LocalCloud(LocalConfig(), "unit", authorized_key=tmp_path / "key.pub", podman="/bin/false")
    assert isinstance(ec2, TagsGroups) and not isinstance(local, TagsGroups)


def test_ec2_tags_each_group_in_calls_of_at_most_1000_instances() -> None:
    world = ec2_scenarios.World()
    gpu = [world.worker(f"node{n:04d}") for n in range(1001)]
    small = world.worker("node9999")
    groups = NodeGroups(
        groups=[NodeGroup(name="small", slots=2, max_nodes=3), NodeGroup(name="gpu", slots=4, max_nodes=2000)]
    )
    cloud = ec2_scenarios.cloud(world, groups, **ec2_scenarios.OWN)
    cloud.tag_groups({**dict.fromkeys(gpu, "gpu"), small: "small"})
    sent = [r["params"] for r in world.requests if r["operation"] == "CreateTags"]
    assert [len(p["Resources"]) for p in sent] == [1000, 1, 1]
    assert [p["Tags"] for p in sent] == [[{"Key": TAG_GROUP, "Value": g}] for g in ("gpu", "gpu", "small")]
    assert [problems("ec2", "CreateTags", p) for p in sent] == [[]] * 3
    assert {t["Value"] for i in world.instances.values() for t in i["Tags"] if t["Key"] == TAG_GROUP} == {
        "gpu",
        "small",
    }


def test_ec2_says_what_refused_the_tags() -> None:
    from botocore.exceptions import ClientError

    world = ec2_scenarios.World()
    iid = world.worker("node001")

    def refuse(service: str, operation: str, params: dict[str, object]) -> object:
        raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "not authorized"}}, operation)

    world.answer = refuse  # type: ignore[method-assign]
    with pytest.raises(CloudError, match="tagging"):
        ec2_scenarios.cloud(world, **ec2_scenarios.OWN).tag_groups({iid: "default"})


@pytest.mark.parametrize("tagged", [False, True])
def test_ec2_check_tries_the_group_tag_when_a_worker_lacks_it(tagged: bool) -> None:
    """``elb ec2-check`` tries the tag (``DryRun``) on a worker without it: an IAM policy from
    before the daemon tagged workers is named there, not only in the daemon's log."""
    from elb.clouds.ec2.preflight import preflight

    world = ec2_scenarios.World()
    iid = world.worker("node001")
    if tagged:
        world.instances[iid]["Tags"].append({"Key": TAG_GROUP, "Value": "default"})
    checks = preflight(ec2_scenarios.cloud(world, **ec2_scenarios.OWN), warm_pool=False)
    sent = [r["params"] for r in world.requests if r["operation"] == "CreateTags"]
    said = [c for c in checks if "CreateTags" in c.what]
    if tagged:
        assert sent == [] and said == []
        return
    assert sent == [{"Resources": [iid], "Tags": [{"Key": TAG_GROUP, "Value": "default"}], "DryRun": True}]
    (check,) = said
    assert check.ok and iid in check.what and "node group" in check.what
