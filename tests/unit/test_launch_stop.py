"""A stop (SIGTERM) stops a launch round before its next cloud call.

A launch round starts one instance (EC2) or one container (the local cloud) per name. Once elb is
told to stop, the names not yet started are not started: the round reports them as not started,
and the actuator closes their records (terminated: nothing of theirs exists, and no bring-up
failed, so the launch back-off does not count them). The instances already started finish their
bring-up as an operation under way does.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from elb.clouds.local import LocalCloud, local_settings
from elb.core.backoff import compute
from elb.core.config import Config
from elb.core.interfaces import Instance
from elb.core.model import NodeState
from elb.service.actuator import Actuator, Outcomes
from tests.unit import ec2_scenarios as ec2
from tests.unit.factories import T0, small_config
from tests.unit.test_daemon import parts
from tests.unit.test_local_cloud_slots import config as local_config
from tests.unit.test_local_cloud_slots import fake_podman

NAMES = ["node001", "node002", "node003", "node004"]


def test_ec2_starts_no_instance_after_the_stop() -> None:
    world = ec2.World()
    cloud = ec2.cloud(world, **ec2.OWN)
    stopping = threading.Event()
    real = cloud.launcher.start_one
    calls: list[str] = []

    def start_one(name: str, *args: Any) -> Any:
        calls.append(name)
        inst = real(name, *args)
        stopping.set()  # the signal comes while the first instance starts
        return inst

    cloud.launcher.start_one = start_one  # type: ignore[method-assign,assignment]  # a spy on one start
    result = cloud.launch(NAMES, stopping=stopping)
    assert calls == ["node001"]
    assert [i.name for i in result.launched] == ["node001"]
    assert result.not_started == ("node002", "node003", "node004")
    assert result.failed == {}
    run = [r for r in world.requests if r["operation"] == "RunInstances"]
    assert len(run) == 1


def test_ec2_stopped_before_the_round_starts_nothing() -> None:
    world = ec2.World()
    stopping = threading.Event()
    stopping.set()
    result = ec2.cloud(world, **ec2.OWN).launch(NAMES, stopping=stopping)
    assert result.launched == ()
    assert result.not_started == tuple(NAMES)
    assert not [r for r in world.requests if r["operation"] in ("RunInstances", "CreateFleet")]


def test_the_local_cloud_starts_no_container_after_the_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = local_config(tmp_path)
    assert local_settings(cfg) is not None
    cloud = LocalCloud(
        local_settings(cfg), "unit", authorized_key=tmp_path / "key.pub", podman=str(fake_podman(tmp_path))
    )
    stopping = threading.Event()
    runs: list[str] = []

    def run_with_address(name: str, args: list[str]) -> Any:
        runs.append(name)
        stopping.set()
        raise RuntimeError("the test ends the round here")  # the first run is enough to see

    monkeypatch.setattr(cloud, "_run_with_address", run_with_address)
    with pytest.raises(RuntimeError):
        cloud.launch(NAMES, stopping=stopping)
    assert runs == ["node001"]
    stopping.set()
    runs.clear()
    result = cloud.launch(NAMES, stopping=stopping)
    assert runs == []
    assert result.not_started == tuple(NAMES)


def test_the_actuator_closes_the_names_not_started_without_a_failure(tmp_path: Path) -> None:
    cfg: Config = small_config(tmp_path, add_nodes_per_iteration=4, shrink="timer")
    r = parts(cfg)
    stopping = threading.Event()
    real = r.cloud.launch

    def launch(names: Any, groups: Any = None, boot: Any = None, *, stopping: Any = None) -> Any:
        assert stopping is not None, "the actuator hands its stop to the cloud"
        stopping.set()  # the signal comes as the round begins its cloud calls
        return real(names, groups, boot, stopping=stopping)

    r.cloud.launch = launch  # type: ignore[method-assign]
    act = Actuator(r.journal, r.bal.scheduler, r.cloud, r.prov, r.bal.clock, stopping=stopping)
    act.request(NAMES, "demand", None)
    out = Outcomes()
    act.launch(NAMES, out)
    assert r.cloud.instances == {}
    for name in NAMES:
        node = r.journal.node(name)
        assert node is not None and node.state is NodeState.TERMINATED, name
        assert "elb stopped" in (r.journal.events(name)[-1].detail or "")
    assert out.failed == {}
    assert not compute(r.journal.bring_up_events(), initial=60, maximum=3600).active
    assert r.prov.playbooks == []


def test_a_launch_round_the_stop_cut_short_does_not_hold_the_back_off(tmp_path: Path) -> None:
    """The names not started end their bring-up without a failure and without becoming ready:
    no later launch waits for them as a probe on its way."""
    cfg: Config = small_config(tmp_path)
    r = parts(cfg)
    r.journal.record("node001", NodeState.REQUESTED, T0 - 600)
    r.journal.record("node001", NodeState.FAILED, T0 - 590, detail="launch failed: InsufficientInstanceCapacity")
    r.journal.record("node002", NodeState.REQUESTED, T0 - 100)  # the probe after the wait
    r.journal.record("node002", NodeState.TERMINATED, T0 - 99, detail="not launched: elb stopped")
    b = compute(r.journal.bring_up_events(), initial=60, maximum=3600)
    assert b.active and not b.probing
    assert b.cap(3, T0) == 1
    assert isinstance(r.cloud.instances, dict) and not any(isinstance(i, Instance) for i in r.cloud.instances.values())
