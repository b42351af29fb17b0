"""A config that loads is one the daemon can run: ``elb validate`` passes it, so
``Balancer.__init__`` must build its node groups from it (``Config.groups``) instead of dying on
a second validation (a repeated or empty instance type, a queue name Grid Engine has no such
thing as). And every number has the bound EC2 or the scheduler gives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.config import ConfigError, load_config, parse_config
from elb.core.naming import MAX_NODES

MAX_SLOTS = 65534

# Values an admin may write, good and bad, for each key that reaches the node groups.
INSTANCE_TYPE = st.sampled_from(["c5.xlarge", "m5.large", "", "c5", "C5.XLARGE", " c5.xlarge", "u-6tb1.metal"])
QUEUE = st.sampled_from(["all.q", "big.q", "", "a b", "all.q@node001", "*", "@allhosts"])
HOSTGROUP = st.sampled_from(["@allhosts", "@big", "allhosts", "@", "", "@a b"])
COUNT = st.one_of(st.integers(-1, 3), st.sampled_from([MAX_SLOTS, MAX_SLOTS + 1, MAX_NODES, MAX_NODES + 1, 10**9]))
WARM_POOL = st.fixed_dictionaries({}, optional={"max_nodes": st.integers(0, 2)})

EC2 = st.fixed_dictionaries(
    {},
    optional={
        "instance_types": st.lists(INSTANCE_TYPE, max_size=3),
        "spot": st.booleans(),
        "spot_max_price": st.sampled_from(["0.5", "1", "-1", "abc", "0", ""]),
        "root_volume_size": COUNT,
        "root_volume_type": st.sampled_from(["gp3", "gp2", "standard", "io1", "sc1", "bogus"]),
    },
)
POLICY = st.fixed_dictionaries(
    {},
    optional={
        "slots_per_node": st.one_of(st.none(), COUNT),
        "add_nodes_per_iteration": COUNT,
        "min_nodes": st.integers(0, 3),
        "max_nodes": COUNT,
        "warm_pool": WARM_POOL,
    },
)
SGE = st.fixed_dictionaries({}, optional={"queue": QUEUE, "hostgroup": HOSTGROUP})
GROUP = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "", "a b"]), "slots": COUNT, "max_nodes": COUNT},
    optional={
        "instance_types": st.lists(INSTANCE_TYPE, max_size=3),
        "queues": st.lists(QUEUE, max_size=2),
        "hostgroup": HOSTGROUP,
        "market": st.sampled_from(["on-demand", "spot"]),
        "warm_pool": WARM_POOL,
    },
)
CONFIG = st.fixed_dictionaries(
    {"cloud": st.fixed_dictionaries({"provider": st.sampled_from(["ec2", "local"]), "ec2": EC2})},
    optional={
        "scheduler": st.sampled_from(["sge", "slurm"]),
        "policy": POLICY,
        "sge": SGE,
        "node_groups": st.lists(GROUP, min_size=1, max_size=2),
    },
)


@settings(max_examples=300, deadline=None)
@given(data=CONFIG, learnt=st.integers(1, 64))
def test_every_config_that_loads_builds_its_node_groups(data: dict[str, Any], learnt: int) -> None:
    try:
        cfg = parse_config(data)
    except ConfigError:
        return
    slots = cfg.policy.slots_per_node if cfg.policy.slots_per_node is not None else learnt
    groups = cfg.groups(slots)  # what Balancer.__init__ does: it must not raise
    assert groups.groups


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "elb.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cloud: {ec2: {instance_types: [c5.xlarge, c5.xlarge]}}", "'c5.xlarge' is listed twice"),
        ("cloud: {ec2: {instance_types: ['']}}", "cloud.ec2.instance_types.0: String should match pattern"),
        ("sge: {queue: 'a b'}", "sge.queue: String should match pattern"),
        ("sge: {hostgroup: allhosts}", "sge.hostgroup: String should match pattern"),
        (
            "policy: {slots_per_node: 1000000000}",
            f"policy.slots_per_node: Input should be less than or equal to {MAX_SLOTS}",
        ),
        (
            "policy: {add_nodes_per_iteration: 1000000000}",
            f"policy.add_nodes_per_iteration: Input should be less than or equal to {MAX_NODES}",
        ),
        (
            "node_groups: [{name: a, slots: 1000000000, max_nodes: 1}]",
            f"node_groups: group 'a': slots: at most {MAX_SLOTS}",
        ),
        ("cloud: {ec2: {root_volume_size: 1000000000}}", "cloud.ec2.root_volume_size: at most 16384 GiB"),
        (
            "cloud: {ec2: {root_volume_size: 2000, root_volume_type: standard}}",
            "at most 1024 GiB for a standard volume",
        ),
        (
            "cloud: {ec2: {root_volume_type: io1}}",
            "cloud.ec2.root_volume_type: Input should be 'gp3', 'gp2' or 'standard'",
        ),
        ("cloud: {ec2: {root_volume_type: sc1}}", "cloud.ec2.root_volume_type: Input should be"),
        (
            "cloud: {ec2: {spot: true, spot_max_price: '-1'}}",
            "cloud.ec2.spot_max_price: '-1': a price in US dollars an hour",
        ),
        (
            "cloud: {ec2: {spot: true, spot_max_price: abc}}",
            "cloud.ec2.spot_max_price: 'abc': a price in US dollars an hour",
        ),
        (
            "cloud: {ec2: {spot: true, spot_max_price: '0'}}",
            "cloud.ec2.spot_max_price: '0': a price in US dollars an hour",
        ),
    ],
)
def test_what_validate_passed_and_run_crashed_on_is_one_line_naming_the_key(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text + "\n"))
    message = str(err.value)
    assert says in message and "\n" not in message


@pytest.mark.parametrize(
    "text",
    [
        f"policy: {{slots_per_node: {MAX_SLOTS}, add_nodes_per_iteration: {MAX_NODES}}}",
        "cloud: {ec2: {root_volume_size: 16384, root_volume_type: gp3}}",
        "cloud: {ec2: {root_volume_size: 16384}}",
        "cloud: {ec2: {root_volume_size: 1024, root_volume_type: standard}}",
        "cloud: {ec2: {spot: true, spot_max_price: '0.0312'}}",
        "cloud: {ec2: {spot: true, spot_max_price: '3'}}",
    ],
)
def test_the_bounds_themselves_load(tmp_path: Path, text: str) -> None:
    cfg = load_config(write(tmp_path, text + "\n"))
    assert cfg.groups(cfg.policy.slots_per_node or 1).groups


def test_the_ansible_directory_follows_state_dir_unless_set() -> None:
    """docs/configuration.md: state_dir holds the journal, the stats and the Ansible artifacts."""
    moved = parse_config({"state_dir": "/srv/elb"})
    assert moved.provision.private_data_dir == Path("/srv/elb/ansible")
    assert moved.provision.host_keys_path == Path("/srv/elb/ansible/host-keys")
    assert moved.stats_path == Path("/srv/elb/stats.csv") and moved.journal_path == Path("/srv/elb/journal.sqlite")
    default = parse_config({})
    assert default.provision.private_data_dir == Path("/var/lib/elb/ansible")
    given = parse_config({"state_dir": "/srv/elb", "provision": {"private_data_dir": "/data/ansible"}})
    assert given.provision.private_data_dir == Path("/data/ansible")


def test_a_partition_names_a_node_group_that_exists(tmp_path: Path) -> None:
    groups = "node_groups: [{name: cloud, slots: 2, max_nodes: 4}]\nscheduler: slurm\n"
    assert load_config(write(tmp_path, groups + "slurm: {partition_groups: {batch: cloud}}\n"))
    with pytest.raises(ConfigError, match=r"slurm.partition_groups: partition batch: no node group 'clod' \(cloud\)"):
        load_config(write(tmp_path, groups + "slurm: {partition_groups: {batch: clod}}\n"))
    with pytest.raises(ConfigError, match=r"no node group 'cloud' \(default\)"):
        load_config(write(tmp_path, "scheduler: slurm\nslurm: {partition_groups: {batch: cloud}}\n"))
