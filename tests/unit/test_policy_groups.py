"""The policy per node group: each group's policy plans on its share of the cluster (its nodes,
their hosts and jobs, the waiting jobs the demand model placed on it); launches stay within each
group's max_nodes and the global one; new nodes are named across the whole cluster and carry
their group into the journal and to the provisioner."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from elb.core import planner
from elb.core.config import Config, parse_config
from elb.core.drivers import node_plays
from elb.core.interfaces import TAG_GROUP, Instance, NodeSpec
from elb.core.model import History, Job, NodeState, Plan
from elb.core.policy.grouped import GroupedPolicy, decide_demand, policy_for
from elb.core.state import join
from elb.provision.ansible import AnsibleProvisioner
from elb.provision.inventory import Connection, InventoryError, build_inventory
from elb.schedulers.sge.driver import GridEngine
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import HOUR, T0, host, node, pending, running, snap
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

LONG = 30 * 60

SMALL = {"name": "small", "slots": 2, "max_nodes": 3}
GPU = {
    "name": "gpu",
    "slots": 4,
    "max_nodes": 2,
    "offers": {"gpu": "1"},
    "queues": ["all.q", "gpu.q"],
    "hostgroup": "@gpu",
}


def config(tmp_path: Path, *groups: dict[str, object], **policy: object) -> Config:
    policy_section: dict[str, object] = {"billing": "second", **policy}
    return parse_config(
        {
            "state_dir": str(tmp_path),
            "policy": policy_section,
            "node_groups": [dict(g) for g in groups] or [SMALL, GPU],
        }
    )


def gpu_job(job_id: int) -> Job:
    return replace(pending(job_id, LONG), hard_requests={"gpu": "1"})


def balancer(cfg: Config, jobs: list[Job]) -> tuple[Balancer, FakeSge, FakeCloud, Journal]:
    sge = FakeSge(T0, jobs=list(jobs), complexes="qconf-sc-site.txt")  # a site with a gpu consumable
    cloud = FakeCloud(T0)
    journal = Journal(cfg.journal_path)
    bal = Balancer(cfg, scheduler=GridEngine(cfg, sge), journal=journal, cloud=cloud, provisioner=FakeProvisioner(sge))
    return bal, sge, cloud, journal


def test_the_daemon_uses_a_policy_per_group_only_with_node_groups(tmp_path: Path) -> None:
    assert isinstance(policy_for(config(tmp_path)), GroupedPolicy)
    assert not isinstance(policy_for(parse_config({"state_dir": str(tmp_path)})), GroupedPolicy)


def test_a_job_requesting_what_one_group_offers_gets_a_node_of_that_group(tmp_path: Path) -> None:
    bal, _sge, cloud, journal = balancer(config(tmp_path), [gpu_job(1), pending(2, LONG)])
    result = bal.run_pass()
    assert result.ok and result.plan is not None
    assert dict(result.plan.add_groups) == {"node001": "small", "node002": "gpu"}
    assert {n.name: n.group for n in journal.nodes()} == {"node001": "small", "node002": "gpu"}
    assert sorted(i.name for i in cloud.instances.values()) == ["node001", "node002"]
    assert "gpu: 1 (node002)" in result.plan.add_reason and "small: 1 (node001)" in result.plan.add_reason


def test_each_group_within_its_max_and_all_within_the_global_max(tmp_path: Path) -> None:
    jobs = [*(gpu_job(n) for n in range(1, 11)), *(pending(n, LONG, slots=2) for n in range(11, 21))]
    cfg = config(tmp_path, max_nodes=4)
    bal, _sge, _cloud, journal = balancer(cfg, jobs)
    plan = bal.run_pass().plan
    assert plan is not None
    # small (first in order) wants 3 (its max), gpu wants 2 (its max): 4 in all
    assert list(plan.add_groups.values()) == ["small", "small", "small", "gpu"]
    assert "capped at the global max_nodes 4: 1 of 2" in plan.add_reason
    assert len(journal.nodes()) == 4


def test_min_nodes_per_group(tmp_path: Path) -> None:
    cfg = config(tmp_path, SMALL, {**GPU, "min_nodes": 1})
    bal, _sge, _cloud, journal = balancer(cfg, [])
    plan = bal.run_pass().plan
    assert plan is not None and dict(plan.add_groups) == {"node001": "gpu"}
    assert [n.group for n in journal.nodes()] == ["gpu"]


def test_shares_split_nodes_hosts_and_jobs_by_group(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    policy = policy_for(cfg)
    assert isinstance(policy, GroupedPolicy)
    jobs = [running(1, "node001"), running(2, "node002"), running(3, "static1"), gpu_job(4), pending(5, LONG)]
    hosts = [host("node001", 2), host("node002", 4), host("static1", 8)]
    nodes = [
        node("node001", 600, group="small"),
        node("node002", 600, group="gpu"),
        node("old", 600, NodeState.TERMINATED),
    ]
    group_of = {jobs[3]: "gpu", jobs[4]: "small"}
    shares = {s.group.name: s for s in policy.shares(join(nodes, (), snap(jobs, hosts)), group_of)}
    small, gpu = shares["small"], shares["gpu"]
    # an unmanaged host goes to the first group whose queues it serves
    assert [h.name for h in small.state.snapshot.hosts] == ["node001", "static1"]
    assert [h.name for h in gpu.state.snapshot.hosts] == ["node002"]
    assert [j.job_id for j in small.state.snapshot.jobs] == [1, 3, 5]
    assert [j.job_id for j in gpu.state.snapshot.jobs] == [2, 4]
    # a record without a group is of the first group
    assert [n.name for n in small.state.records] == ["node001", "old"] and [n.name for n in gpu.state.records] == [
        "node002"
    ]


def test_an_idle_node_is_removed_by_its_own_groups_policy(tmp_path: Path) -> None:
    cfg = config(tmp_path, SMALL, GPU, boot_time=60)
    policy = policy_for(cfg)
    hosts = [host("node001", 2), host("node002", 4)]
    nodes = [
        node("node001", 3600, group="small", last_busy_at=T0 - 3000),
        node("node002", 3600, group="gpu", last_busy_at=T0 - 3000),
    ]
    jobs = [pending(5, LONG)]  # a small job waiting: node001 is kept for it, node002 is not needed
    assert isinstance(policy, GroupedPolicy)
    plan = policy.decide_groups(join(nodes, (), snap(jobs, hosts), now=T0), {jobs[0]: "small"}, History())
    assert [r.node for r in plan.remove] == ["node002"]
    assert "(group gpu)" in plan.remove[0].reason
    assert plan.add == 0


def test_names_are_unique_across_groups(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    policy = policy_for(cfg)
    hosts = [host("node007", 2, used=2)]
    nodes = [node("node007", 600, group="small", last_busy_at=T0)]
    jobs = [running(9, "node007", slots=2, ran=HOUR), gpu_job(1), pending(2, LONG, slots=2)]
    assert isinstance(policy, GroupedPolicy)
    plan = policy.decide_groups(
        join(nodes, (), snap(jobs, hosts), now=T0), {jobs[1]: "gpu", jobs[2]: "small"}, History()
    )
    assert plan.add_names == ("node008", "node009")
    assert dict(plan.add_groups) == {"node008": "small", "node009": "gpu"}


def provisioner(tmp_path: Path, cfg: Config) -> AnsibleProvisioner:
    return AnsibleProvisioner(
        cfg.provision.model_copy(update={"private_data_dir": tmp_path / "a"}),
        cfg.cluster,
        node_plays(cfg),
        groups=cfg.groups(1),
    )


def test_a_node_is_provisioned_with_its_groups_queues_hostgroup_slots_and_complex_values(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    prov = provisioner(tmp_path, cfg)
    spec = prov._of_group(NodeSpec("node002", "10.0.0.2", 8, group="gpu"))
    inv = build_inventory(Connection(), new_nodes=[spec])
    hv = inv["all"]["children"]["new_nodes"]["hosts"]["node002"]  # type: ignore[index]
    assert hv == {
        "ansible_host": "10.0.0.2",
        "elb_slots": 4,  # the group's, not the instance's
        "elb_group": "gpu",
        "elb_market": "on-demand",
        "sge_exec_queues": ["all.q", "gpu.q"],
        "sge_exec_hostgroup": "@gpu",
        "sge_exec_complex_values": {"gpu": "1"},
    }
    unknown = prov._of_group(NodeSpec("node003", "10.0.0.3", 8))  # adopted, or from before groups
    assert (unknown.group, unknown.slots) == ("small", 2)


def test_a_spot_groups_node_gets_elb_market_spot_in_the_inventory(tmp_path: Path) -> None:
    cfg = config(tmp_path, {**SMALL, "market": "spot"}, GPU)
    prov = provisioner(tmp_path, cfg)
    inv = build_inventory(
        Connection(),
        new_nodes=[
            prov._of_group(NodeSpec("node001", "10.0.0.1", group="small")),
            prov._of_group(NodeSpec("node002", "10.0.0.2", group="gpu")),
        ],
    )
    hosts = inv["all"]["children"]["new_nodes"]["hosts"]  # type: ignore[index]
    assert (hosts["node001"]["elb_market"], hosts["node002"]["elb_market"]) == ("spot", "on-demand")


@pytest.mark.parametrize("value", ["{{ lookup('pipe', 'id') }}", "a b", "{%x%}"])
def test_a_complex_value_ansible_would_template_is_refused(value: str) -> None:
    spec = NodeSpec("node002", "10.0.0.2", 4, host_vars={"sge_exec_complex_values": {"gpu": value}})
    with pytest.raises(InventoryError, match="not a plain name or value"):
        build_inventory(Connection(), new_nodes=[spec])


def test_an_adopted_worker_joins_the_node_group_its_tag_names_when_that_group_is_configured(tmp_path: Path) -> None:
    """A tagged worker the journal does not know (a lost journal, a first run over a running
    cluster) is adopted into the group its ``elb:group`` tag names, so its play gets that group's
    queues and host group; a tag naming no configured group, or none, leaves it without one."""
    cfg = config(tmp_path)
    bal, sge, cloud, journal = balancer(cfg, [])
    for i, (name, tag) in enumerate((("node001", "gpu"), ("node002", "retired"), ("node003", None)), start=1):
        iid = f"i-{i:04d}"
        tags = {} if tag is None else {TAG_GROUP: tag}
        cloud.instances[iid] = Instance(iid, name, "running", T0 - 5 * HOUR, f"10.0.0.{i}", slots=4, tags=tags)
        sge.add_host(name)
    cloud.counter = 3
    result = bal.run_pass()
    assert result.ok, result.error
    groups = {n.name: n.group for n in journal.nodes()}
    assert groups == {"node001": "gpu", "node002": None, "node003": None}, result.summary()


def test_a_live_pass_joins_its_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repairs' verdict on scaling and the plan read one joined state: the shell joins the
    pass's read once and gives it to both (``planner.cluster_state``)."""
    joins: list[object] = []
    real = planner.join  # type: ignore[attr-defined]  # the planner's own import, counted

    def counted(*args: Any, **kw: Any) -> Any:
        joins.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(planner, "join", counted)
    bal, _, _, _ = balancer(config(tmp_path), [pending(1, LONG)])
    result = bal.run_pass()
    assert result.ok and result.plan is not None and result.plan.add == 1, result.summary()
    assert len(joins) == 1


def test_the_groups_quiet_hint_is_the_earliest_of_their_policies_and_now_when_one_declares_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``quiet_until`` is a policy's optional capability (``QuietHint``): a group whose policy
    does not declare it is asked at every poll, so the groups' hint is then ``now``."""
    from elb.core.policy import POLICIES
    from elb.core.policy.base import QuietHint

    class Plain:
        """A policy with ``decide`` alone."""

        name = "plain"

        def decide(self, state: object, history: History) -> Plan:
            return Plan()

    cfg = config(tmp_path)
    policy = policy_for(cfg)
    assert isinstance(policy, GroupedPolicy)
    state = join([], (), snap([], []))  # nothing runs, nothing waits
    hinted = policy.quiet_until_groups(state, {}, History())
    assert all(isinstance(policy.policy_of(g), QuietHint) for g in policy.groups.groups)
    assert hinted > state.now  # elb's policy: nothing can change on an empty, quiet cluster

    monkeypatch.setitem(POLICIES, "elb", lambda _cfg, _cluster: Plain())
    plain = policy_for(cfg)
    assert isinstance(plain, GroupedPolicy) and not isinstance(plain.policy_of(plain.groups.groups[0]), QuietHint)
    assert plain.quiet_until_groups(state, {}, History()) == state.now


@pytest.mark.parametrize(("listed", "added"), [("stopped", 1), (None, 0)])
def test_a_node_that_is_down_takes_no_place_in_its_group_nor_under_the_global_max(
    tmp_path: Path, listed: str | None, added: int
) -> None:
    """At the global max_nodes 3 and gpu's 1, gpu's node003 died under a job: its instance is listed as
    stopped, Grid Engine no longer reaches its host and lists the job there. A waiting gpu job
    then gets a node. An instance missing from the listing is no evidence: it keeps its place."""
    cfg = config(tmp_path, SMALL, {**GPU, "max_nodes": 1}, max_nodes=3)
    records = (
        node("node001", HOUR, group="small", instance_id="i-1"),
        node("node002", HOUR, group="small", instance_id="i-2"),
        node("node003", HOUR, group="gpu", instance_id="i-3"),
    )
    hosts = [
        host("node001", slots=2, used=2),
        host("node002", slots=2, used=2),
        host("node003", slots=4, used=4, states="u"),
    ]
    jobs = [running(1, "node001", slots=2, ran=HOUR), running(2, "node002", slots=2, ran=HOUR)]
    waiting = gpu_job(4)
    jobs += [running(3, "node003", slots=4, ran=HOUR), waiting]
    instances = [Instance(f"i-{i}", f"node00{i}", "running", T0 - HOUR) for i in (1, 2)]
    if listed is not None:
        instances.append(Instance("i-3", "node003", listed, T0 - HOUR))  # type: ignore[arg-type]
    state = join(records, instances, snap(jobs, hosts))
    plan = decide_demand(policy_for(cfg), state, History(), group_of={waiting: "gpu"})
    assert plan.add == added, plan.reason
    if added:
        assert dict(plan.add_groups) == {"node004": "gpu"}
