"""An instance's state reaches the core in the core's words (``InstanceState``): each cloud's
adapter translates its own (EC2's instance states, podman's container states) at its edge, and
the core names neither."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from elb.clouds.ec2.instances import instance_state
from elb.clouds.local import LocalCloud
from elb.core.config import parse_config
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, InstanceState, InstanceWord
from elb.core.state import instance_state as core_state
from elb.service import factory
from tests.unit.test_local_cloud_slots import podman_listing


def test_the_words_an_instance_takes_are_the_enums() -> None:
    assert set(get_args(InstanceWord)) == {s.value for s in InstanceState}


@pytest.mark.parametrize("state", list(InstanceState))
def test_the_core_reads_a_member_or_its_word_as_the_member(state: InstanceState) -> None:
    assert core_state(state) is state
    assert core_state(str(state.value)) is state  # type: ignore[arg-type]


def test_the_core_refuses_a_word_that_is_no_state_as_the_enum_does() -> None:
    with pytest.raises(ValueError, match="is not a valid InstanceState"):
        core_state("shutting-down")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ec2", "state"),
    [
        ("pending", InstanceState.PENDING),
        ("running", InstanceState.RUNNING),
        ("stopping", InstanceState.STOPPING),
        ("stopped", InstanceState.STOPPED),
        ("shutting-down", InstanceState.GONE),
        ("terminated", InstanceState.GONE),
        ("exited", InstanceState.STOPPED),  # not EC2's: exists, serves nothing
    ],
)
def test_ec2_states_in_the_cores_words(ec2: str, state: InstanceState) -> None:
    assert instance_state(ec2) is state


def _podman(tmp: Path, status: str) -> Path:
    """A ``podman`` that lists one worker container, node003, in ``status``."""
    labels = {TAG_CLUSTER: "unit", TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: "node003"}
    container = {"Id": "c0ffee", "Name": "node003", "State": {"Status": status}, "Config": {"Labels": labels}}
    return podman_listing(tmp, container)


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("created", InstanceState.PENDING),
        ("running", InstanceState.RUNNING),
        ("paused", InstanceState.STOPPED),
        ("exited", InstanceState.STOPPED),
        ("removing", InstanceState.GONE),
        ("unheard-of", InstanceState.PENDING),
    ],
)
def test_podman_states_in_the_cores_words(tmp_path: Path, status: str, state: InstanceState) -> None:
    cfg = parse_config(
        {
            "state_dir": str(tmp_path / "state"),
            "cluster": {"name": "unit", "master": "master"},
            "policy": {"max_nodes": 2, "slots_per_node": 1},
            "cloud": {"provider": "local", "local": {"network": "elb-test"}},
        }
    )
    cloud = factory.make_cloud(cfg)
    assert isinstance(cloud, LocalCloud)
    cloud.podman = str(_podman(tmp_path, status))
    [node] = cloud.list_workers()
    assert node.state is state
