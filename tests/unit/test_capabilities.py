"""The optional capabilities of a cloud and a provisioner are declared (``elb.core.interfaces``:
``ReportsHealth``, ``VersionsTemplates``, ``RestartsServices``, ``ReapsLeftovers``, ``Cancels``)
and asked for by ``isinstance``: the shipped adapters have the ones they implement, and a cloud
without them (this module's) runs a pass, going without each as its declaration says."""

from __future__ import annotations

from pathlib import Path

from elb.clouds.local import LocalCloud, LocalConfig
from elb.core.interfaces import Cancels, ReapsLeftovers, ReportsHealth, RestartsServices, VersionsTemplates
from elb.provision.ansible import AnsibleProvisioner
from tests.unit import ec2_scenarios
from tests.unit.factories import T0, pending, small_config
from tests.unit.fakes import FakeCloud
from tests.unit.test_daemon import parts


def test_the_shipped_adapters_declare_what_they_do(tmp_path: Path) -> None:
    ec2 = ec2_scenarios.cloud(ec2_scenarios.World(), **ec2_scenarios.OWN)
    local = LocalCloud(LocalConfig(), "unit", authorized_key=tmp_path / "key.pub", podman="/bin/false")
    assert isinstance(ec2, ReportsHealth) and isinstance(ec2, VersionsTemplates)
    assert isinstance(ec2, RestartsServices) and ec2.restart_runs_services
    assert not isinstance(local, ReportsHealth) and not isinstance(local, VersionsTemplates)
    assert isinstance(local, RestartsServices) and not local.restart_runs_services  # podman's restart runs no service
    assert issubclass(AnsibleProvisioner, ReapsLeftovers) and issubclass(AnsibleProvisioner, Cancels)


def test_a_cloud_without_the_optional_capabilities_runs_a_pass(tmp_path: Path) -> None:
    r = parts(small_config(tmp_path, add_nodes_per_iteration=2, shrink="timer"))
    assert isinstance(r.cloud, FakeCloud)
    assert not isinstance(r.cloud, ReportsHealth) and not isinstance(r.cloud, VersionsTemplates)
    assert not isinstance(r.prov, ReapsLeftovers) and not isinstance(r.prov, Cancels)
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=12)]
    result = r.bal.run_pass()
    assert result.ok and result.outcomes.added == ["node001", "node002"]
    assert result.now == T0
