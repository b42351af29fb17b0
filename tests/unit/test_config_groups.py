"""``node_groups:`` in the config file: read strictly, errors named at their place, and a config
without it keeps meaning one group built from today's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.clouds.ec2.groupoptions import ec2_options
from elb.clouds.local import LocalGroupOptions
from elb.core.config import ConfigError, load_config
from elb.schedulers.sge.groupoptions import sge_options

TWO_GROUPS = """\
cloud: {provider: local}
policy:
  max_nodes: 5
node_groups:
  - name: small
    slots: 1
    max_nodes: 4
  - name: bigmem
    queues: [all.q, big.q]
    hostgroup: "@bigmem"
    slots: 2
    memory: 8G
    offers: {bigmem: "1"}
    instance_types: [r5.xlarge, r5a.xlarge]
    min_nodes: 1
    max_nodes: 2
    market: spot
    pes: [smp]
    placement_group: true
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(text)
    return path


def test_two_groups(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, TWO_GROUPS))
    groups = cfg.groups(99)  # the size learnt is for the default group only
    assert [g.name for g in groups.groups] == ["small", "bigmem"]
    big = groups.groups[1]
    sge, ec2 = sge_options(big), big.cloud_options
    assert isinstance(ec2, LocalGroupOptions)  # EC2's keys, as the local cloud takes them
    assert (sge.queues, sge.hostgroup, big.slots, sge.offers) == (["all.q", "big.q"], "@bigmem", 2, {"bigmem": "1"})
    assert (ec2.instance_types, big.min_nodes, big.max_nodes, big.market) == (["r5.xlarge", "r5a.xlarge"], 1, 2, "spot")
    assert (sge.pes, ec2.placement_group, big.memory) == (["smp"], True, "8G")
    # policy.max_nodes caps the groups together; min_nodes is the sum of theirs
    assert (groups.max_nodes, groups.total_max_nodes) == (5, 5)
    assert (cfg.policy.min_nodes, cfg.policy.max_nodes) == (1, 5)


def test_without_a_global_max_the_groups_add_up(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, TWO_GROUPS.replace("policy:\n  max_nodes: 5\n", "")))
    assert cfg.policy.max_nodes == 6
    assert cfg.groups(1).total_max_nodes == 6


def test_no_node_groups_is_one_group_from_todays_settings(tmp_path: Path) -> None:
    text = """\
policy: {min_nodes: 1, max_nodes: 7}
sge: {queue: work.q, hostgroup: "@work"}
cloud: {ec2: {instance_types: [c5.xlarge]}}
"""
    cfg = load_config(write(tmp_path, text))
    assert cfg.node_groups is None
    groups = cfg.groups(4)
    (g,) = groups.groups
    assert (g.name, g.slots, g.min_nodes, g.max_nodes) == ("default", 4, 1, 7)
    sge, ec2 = sge_options(g), ec2_options(g)
    assert (sge.queues, sge.hostgroup, ec2.instance_types, sge.pes, sge.offers) == (
        ["work.q"],
        "@work",
        ["c5.xlarge"],
        ["*"],
        {},
    )


BAD = [
    pytest.param(
        "policy: {min_nodes: 1}\n",
        r"line 2, column 1: node_groups: policy.min_nodes cannot be set with node_groups",
        id="policy-min",
    ),
    pytest.param(
        "policy: {slots_per_node: 2}\n",
        r"line 2, column 1: node_groups: policy.slots_per_node cannot be set",
        id="policy-slots",
    ),
    pytest.param(
        "sge: {queue: big.q, hostgroup: '@x'}\n",
        r"node_groups: sge.queue, sge.hostgroup cannot be set",
        id="sge-queue",
    ),
    pytest.param(
        "policy: {max_nodes: 0}\n", r"the groups' min_nodes add up to 1, more than max_nodes \(0\)", id="global-max"
    ),
]


@pytest.mark.parametrize(("prefix", "message"), BAD)
def test_settings_the_groups_own_are_refused(tmp_path: Path, prefix: str, message: str) -> None:
    text = prefix + "node_groups:\n  - {name: a, slots: 2, max_nodes: 3, min_nodes: 1}\n"
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


GROUP_ERRORS = [
    pytest.param("{name: a, slots: 2}", r"line 2, column 5: node_groups\.0\.max_nodes: Field required", id="no-max"),
    pytest.param("{name: a, slots: 2, max_nodes: 1, gpus: 1}", r"node_groups\.0\.gpus: unknown key", id="typo"),
    pytest.param(
        "{name: a, slots: 2, max_nodes: 1, offers: {gpu: 1}}",
        r"line 2, column \d+: node_groups\.0\.offers\.gpu: Input should be a valid string",
        id="number-offer",
    ),
    pytest.param("{name: 'a b', slots: 2, max_nodes: 1}", r"node_groups\.0\.name: String should match", id="name"),
    pytest.param(
        "{name: a, slots: '2', max_nodes: 1}", r"node_groups\.0\.slots: Input should be a valid integer", id="slots"
    ),
    pytest.param("{name: a, slots: 2, max_nodes: 1, market: cheap}", r"node_groups\.0\.market", id="market"),
    pytest.param(
        "{name: a, slots: 2, max_nodes: 1, instance_types: [c5.large], launch_template: {name: lt1}}",
        r"node_groups\.0: give instance_types or launch_template, not both",
        id="types-and-template",
    ),
    pytest.param("{name: a, slots: 2, max_nodes: 1, price_per_hour: .inf}", r"price_per_hour", id="price-inf"),
]


@pytest.mark.parametrize(("group", "message"), GROUP_ERRORS)
def test_a_bad_group_is_named_at_its_place(tmp_path: Path, group: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, f"node_groups:\n  - {group}\n"))


def test_two_groups_of_one_name(tmp_path: Path) -> None:
    text = "node_groups:\n  - {name: a, slots: 2, max_nodes: 1}\n  - {name: a, slots: 4, max_nodes: 1}\n"
    with pytest.raises(ConfigError, match=r"line 1, column 1: node_groups: two node groups are named 'a'"):
        load_config(write(tmp_path, text))


def test_prices_on_every_group_or_none(tmp_path: Path) -> None:
    text = (
        "node_groups:\n  - {name: a, slots: 2, max_nodes: 1, price_per_hour: 0.1}\n"
        "  - {name: b, slots: 4, max_nodes: 1}\n"
    )
    with pytest.raises(ConfigError, match=r"node_groups: price_per_hour is set on a but not on b"):
        load_config(write(tmp_path, text))


def test_an_empty_list_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"node_groups: List should have at least 1 item"):
        load_config(write(tmp_path, "node_groups: []\n"))
