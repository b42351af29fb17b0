"""A second cloud from this module alone: an in-memory cloud ("memcloud") whose adapter is written
here, registered by name (``elb.core.registry.register_cloud``), under Grid Engine's driver (with
its commands stood in for, tests/unit/fakes.py) through ``elb once``, its dry run, ``elb nodes``
and an idle node's removal, with no edit outside this module. The playbooks are stood in for
too (``FakeProvisioner``); the registry is what is under test.

The module is what a cloud's module provides (``elb.core.drivers.CloudModule``): ``make``,
``checks``, ``notices`` and ``settings`` at its top level, and the optional ``CONFIG_SECTION``:
its own settings, ``cloud.memcloud`` in the config file, read typed by the adapter
(``elb.core.sections.section``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.clouds.local import local_settings
from elb.core.checks import Check
from elb.core.config import Config, ConfigError, load_config, parse_config
from elb.core.durations import PositiveSeconds
from elb.core.exitcodes import Exit
from elb.core.interfaces import CloudError, CloudSettings, Instance, LaunchResult, NodeBoot, NoticeSource
from elb.core.model import NodeState
from elb.core.registry import CLOUDS, register_cloud
from elb.core.sections import Section, section
from elb.schedulers.sge.driver import GridEngine
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeProvisioner, FakeSge

SLOTS = 4


class MemCloud:
    """Instances in a dict: each launch one instance per name, running at once with an address."""

    def __init__(self) -> None:
        self.instances: dict[str, Instance] = {}
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        self.calls.append(("launch", tuple(names)))
        out: list[Instance] = []
        for i, name in enumerate(names):
            if stopping is not None and stopping.is_set():
                return LaunchResult(tuple(out), not_started=tuple(names[i:]))
            n = len(self.instances) + 1
            inst = Instance(f"mem-{n}", name, "running", T0, f"10.9.0.{n}", slots=SLOTS)
            self.instances[inst.instance_id] = inst
            out.append(inst)
        return LaunchResult(tuple(out))

    def list_workers(self) -> list[Instance]:
        return list(self.instances.values())

    def terminate(self, instance_ids: Sequence[str]) -> None:
        self.calls.append(("terminate", tuple(instance_ids)))
        for iid in instance_ids:
            self.instances.pop(iid, None)

    def stop(self, instance_ids: Sequence[str]) -> None:
        raise CloudError("memcloud keeps no warm pool")

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        raise CloudError("memcloud keeps no warm pool")

    def new_node_slots(self) -> int | None:
        return SLOTS


CLOUD = MemCloud()


# -------------------------------------------------- what elb.core.drivers.CloudModule asks


class MemcloudSettings(Section):
    """memcloud's own settings (``CONFIG_SECTION``): the config file's ``cloud.memcloud``."""

    boot_time: PositiveSeconds = 60.0  # how long a node may take to boot


CONFIG_SECTION = MemcloudSettings


def make(cfg: Config) -> MemCloud:
    return CLOUD


def checks(cfg: Config) -> Iterator[Check]:
    yield Check("memcloud", True, f"{len(CLOUD.instances)} instance(s) in memory")


def notices(cfg: Config) -> NoticeSource | None:
    return None


def settings(cfg: Config) -> CloudSettings:
    return CloudSettings("memcloud", boot_timeout=section(cfg, MemcloudSettings).boot_time)


# -------------------------------------------------- the tests


@pytest.fixture
def memcloud(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[Path, FakeSge, FakeProvisioner]]:
    global CLOUD  # noqa: PLW0603 (the cloud's state, fresh for each test)
    CLOUD = MemCloud()
    monkeypatch.setitem(CLOUDS, "memcloud", __name__)
    register_cloud("memcloud", __name__)
    sge = FakeSge(T0)
    prov = FakeProvisioner(sge)
    monkeypatch.setattr(factory, "make_scheduler", lambda cfg, journal: GridEngine(cfg, sge))
    monkeypatch.setattr(factory, "make_provisioner", lambda cfg: prov)
    path = tmp_path / "elb.yml"
    path.write_text(
        f"cloud: {{provider: memcloud, memcloud: {{boot_time: 2m}}}}\nstate_dir: {tmp_path / 'state'}\n"
        f"policy: {{max_nodes: 3, slots_per_node: {SLOTS}, shrink: timer}}\n"
    )
    yield path, sge, prov


def test_a_cloud_the_registry_does_not_have_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown cloud provider 'memcloud'"):
        parse_config({"cloud": {"provider": "memcloud"}})


def test_the_registered_cloud_runs_the_whole_pass(
    memcloud: tuple[Path, FakeSge, FakeProvisioner], capsys: pytest.CaptureFixture[str]
) -> None:
    path, sge, prov = memcloud
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=8)]

    assert main(["once", "--dry-run", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "add 2 (node001, node002)" in out, out
    assert "the cloud's workers: 0 listed (read only)" in out
    assert CLOUD.calls == []

    assert main(["once", "-c", str(path)]) == Exit.OK
    capsys.readouterr()
    assert CLOUD.calls == [("launch", ("node001", "node002"))]
    assert {i.name for i in CLOUD.list_workers()} == set(sge.hosts) == {"node001", "node002"}
    journal = Journal(load_config(path).journal_path)
    try:
        nodes = {n.name: n for n in journal.nodes()}
        assert {n: r.state for n, r in nodes.items()} == dict.fromkeys(("node001", "node002"), NodeState.READY)
        assert nodes["node001"].instance_id == "mem-1"
    finally:
        journal.close()

    assert main(["nodes", "-c", str(path), "--json"]) == Exit.OK
    assert '"mem-1"' in capsys.readouterr().out

    # The jobs are gone; idle near the end of their hour (timer rule), the nodes go through the
    # same removal, and the cloud terminates their instances.
    sge.jobs = []
    sge.now = T0 + 50 * 60
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    try:
        bal = Balancer(
            cfg,
            scheduler=factory.make_scheduler(cfg, journal),
            journal=journal,
            cloud=factory.make_cloud(cfg),
            provisioner=prov,
            clock=Clock(T0 + 50 * 60),
        )
        result = bal.run_pass()
        assert result.ok, result.summary()
        assert sorted(result.outcomes.removed) == ["node001", "node002"], result.summary()
        assert CLOUD.list_workers() == [] and ("terminate", ("mem-1",)) in CLOUD.calls
    finally:
        journal.close()


def test_validate_runs_the_registered_clouds_checks(memcloud: tuple[Path, FakeSge, FakeProvisioner]) -> None:
    path, _sge, _prov = memcloud
    cfg = load_config(path)
    assert [c.what for c in factory.cloud_checks(cfg)] == ["memcloud"]
    assert factory.make_notices(cfg) is None


def test_the_adapter_reads_its_own_section_of_the_config_typed(
    memcloud: tuple[Path, FakeSge, FakeProvisioner],
) -> None:
    """``cloud.memcloud`` is memcloud's ``CONFIG_SECTION``: the boot time the daemon reads of the
    cloud is the file's; a config without the key has the section's defaults."""
    path, _sge, _prov = memcloud
    cfg = load_config(path)
    assert section(cfg, MemcloudSettings) == MemcloudSettings(boot_time=120.0)
    journal = Journal(cfg.journal_path)
    try:
        bal = Balancer(cfg, scheduler=factory.make_scheduler(cfg, journal), journal=journal, cloud=CLOUD)
        assert bal.cloud_settings.boot_timeout == 120.0
    finally:
        journal.close()
    assert section(parse_config({"cloud": {"provider": "memcloud"}}), MemcloudSettings) == MemcloudSettings()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("memcloud: {boot_time: soon}", "cloud.memcloud.boot_time: not a duration"),
        ("memcloud: {boot: 2m}", "cloud.memcloud.boot: unknown key"),
    ],
)
def test_a_wrong_value_in_the_section_is_one_config_error_at_its_key(
    memcloud: tuple[Path, FakeSge, FakeProvisioner], text: str, error: str
) -> None:
    path, _sge, _prov = memcloud
    path.write_text(path.read_text().replace("memcloud: {boot_time: 2m}", text))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"config {path}: line 1, column ")
    assert error in str(err.value) and ";" not in str(err.value) and "\n" not in str(err.value)


def test_the_section_of_a_cloud_not_configured_is_refused_saying_whose(
    memcloud: tuple[Path, FakeSge, FakeProvisioner],
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"cloud": {"provider": "local", "memcloud": {"boot_time": 5}}})
    assert str(err.value) == (
        "<config>: cloud.memcloud: the settings of the memcloud cloud; this config's cloud provider is local"
    )


def test_a_cloud_named_as_a_built_in_keeps_the_built_ins_section(
    memcloud: tuple[Path, FakeSge, FakeProvisioner], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CLOUDS, "local", __name__)
    cfg = parse_config({"cloud": {"provider": "local", "local": {"boot_timeout": 30}}})
    assert local_settings(cfg).boot_timeout == 30.0
    assert section(cfg, MemcloudSettings) == MemcloudSettings()
