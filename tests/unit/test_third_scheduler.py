"""A third scheduler from this module alone: an in-memory queue ("memq") whose driver is written
here, registered by name (``elb.core.registry.register_scheduler``), and run through the whole
pass (plan, launch and provision, journal, the dry run, ``elb nodes``, an idle node's removal)
with no edit outside this module. The cloud and the playbooks are stood in for here too (this
module's ``QueueProvisioner`` registers a node in the queue as an add play registers an exec
host); the registry is what is under test.

The module is what a driver's module provides (``elb.core.drivers.SchedulerModule``): ``make``,
``checks``, ``command_timeout``, ``job_uses``, ``accounting_note`` and ``elb init``'s ``TITLE``,
``init_answers`` and ``init`` at its top level, and the optional ``node_plays``: what its nodes
need from elb's own provisioner (``elb.service.factory.make_provisioner``, built here for it
with ansible-runner stood in for), without which they get ``NodePlays()``, and the optional
``CONFIG_SECTION``: its own settings, a ``memq:`` key of the config file, read typed by the driver
(``elb.core.sections.section``).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import ansible_runner.runner
import pytest
import yaml

from elb.cli.main import main
from elb.core.attribution import JobUse
from elb.core.checks import Check
from elb.core.config import Config, ConfigError, load_config, parse_config
from elb.core.demand import DemandSplit
from elb.core.drivers import InitDraft, NodePlays
from elb.core.exitcodes import Exit
from elb.core.interfaces import HostResult, JobProcesses, NodeBoot, NodeSpec, Outcome, Witness
from elb.core.model import NO_FLAGS, Host, Job, JobPhase, Node, NodeState, QueueFlags, QueueInstance, Snapshot
from elb.core.registry import SCHEDULERS, register_scheduler
from elb.core.scheduler import BindsOnDemand, DrainCheck, Requeued, SchedulerError, SchedulerRead
from elb.core.sections import Section, section
from elb.provision.boot import BOOT_INVENTORY
from elb.schedulers.slurm.config import slurm_settings
from elb.service import factory
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.fakes import FakeCloud

NOW = 1_800_000_000.0
SLOTS = 4


@dataclass
class MemQueue:
    """The scheduler itself: its hosts (name -> slots), the jobs (waiting or on a host), the
    hosts disabled."""

    hosts: dict[str, int] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    disabled: set[str] = field(default_factory=set)
    now: float = NOW

    def submit(self, job_id: int, slots: int = 1) -> None:
        self.jobs.append(
            Job(job_id, f"j{job_id}", "user", "waiting", JobPhase.WAITING, slots, submitted=self.now - 900)
        )

    def start_all(self) -> None:
        """Start each waiting job on the first enabled host with room."""
        for i, j in enumerate(self.jobs):
            if j.started is not None:
                continue
            for h, slots in self.hosts.items():
                used = sum(x.slots for x in self.jobs if x.host == h)
                if h not in self.disabled and slots - used >= j.slots:
                    self.jobs[i] = replace(
                        j, state="running", phase=JobPhase.RUNNING, started=self.now, queue=f"memq@{h}"
                    )
                    break

    def finish_all(self) -> None:
        self.jobs = [j for j in self.jobs if j.started is None]

    def snapshot(self, queue: str = "memq") -> Snapshot:
        hosts = tuple(
            Host(
                h,
                (
                    QueueInstance(
                        queue,
                        h,
                        slots,
                        sum(j.slots for j in self.jobs if j.host == h),
                        flags=QueueFlags.DISABLED if h in self.disabled else NO_FLAGS,
                    ),
                ),
                slots,
            )
            for h, slots in self.hosts.items()
        )
        return Snapshot(self.now, tuple(self.jobs), hosts)


QUEUE = MemQueue()
MAKE_PROVISIONER = factory.make_provisioner  # elb's own, which the pass's tests stand in for


class MemqSettings(Section):
    """memq's own settings (``CONFIG_SECTION``): the config file's ``memq:``."""

    queue: str = "memq"  # the queue its nodes serve


class MemQ:
    """The driver: every answer read from ``QUEUE``, its hosts shown in the configured queue."""

    name = "MemQ"
    add_playbook = "memq_add.yml"
    remove_playbook = "memq_remove.yml"
    admit_playbook = None

    def __init__(self, queue: MemQueue, settings: MemqSettings) -> None:
        self.queue = queue
        self.settings = settings

    def take_requests(self, now: float) -> tuple[str, ...]:
        return ()

    def read(self, records: Sequence[Node], now: float) -> SchedulerRead:
        return SchedulerRead(self.queue.snapshot(self.settings.queue))

    def demand(self, read: SchedulerRead, records: Sequence[Node], slots: int | None) -> DemandSplit:
        return DemandSplit(read.snapshot)

    def disable_host(self, host: str, reason: str) -> None:
        self.queue.disabled.add(host)

    def enable_host(self, host: str) -> None:
        self.queue.disabled.discard(host)

    def drain_checks(self, hosts: Sequence[str]) -> dict[str, DrainCheck]:
        return {
            h: DrainCheck(tuple(j for j in self.queue.jobs if j.host == h), 0) for h in hosts if h in self.queue.hosts
        }

    def listed(self, hosts: Sequence[str]) -> frozenset[str]:
        return frozenset(h for h in hosts if h in self.queue.hosts)

    def prepare(self, nodes: Sequence[NodeSpec]) -> dict[str, SchedulerError]:
        return {}

    def await_registered(self, names: Sequence[str], stopping: threading.Event) -> dict[str, str] | None:
        return {n: "not in the queue after its play" for n in names if n not in self.queue.hosts}

    def out_of_service(self, reasons: Mapping[str, str]) -> None:
        return None

    def resumed(self, host: str) -> None:
        self.enable_host(host)

    def release(self, hosts: Sequence[str], reason: str) -> None:
        return None

    def requeue(self, host: str) -> Requeued:
        return Requeued()

    # No bind_on_demand: memq lacks that optional capability (``elb.core.scheduler.BindsOnDemand``).


# -------------------------------------------------- what elb.core.drivers.SchedulerModule asks


CONFIG_SECTION = MemqSettings


def make(cfg: Config, journal: object) -> MemQ:
    return MemQ(QUEUE, section(cfg, MemqSettings))


def checks(cfg: Config) -> Iterator[Check]:
    yield Check("memq", True, f"{len(QUEUE.hosts)} host(s) in memory")


def command_timeout(cfg: Config) -> tuple[float, str]:
    return 1.0, "policy.poll_interval"


def job_uses(cfg: Config, since: float, until: float, accounting: Path | None = None) -> list[JobUse]:
    return []


def accounting_note(cfg: Config, accounting: Path | None = None) -> str | None:
    return None


TITLE = "memq"


def init_answers(options: Any) -> str | None:
    return None  # never found by elb init --scheduler auto: asked for by name


def init(options: Any, cloud: Sequence[str], tail: Sequence[str]) -> InitDraft:
    return InitDraft("\n".join(["scheduler: memq", "", *cloud, *tail]), after=("memq: nothing more to set",))


def node_plays(cfg: Config) -> NodePlays:
    """Its roles' settings for every play, its node's boot playbook, its role's variables there."""
    return NodePlays(
        variables={"memq_exec_queue": section(cfg, MemqSettings).queue},
        boot_playbook="memq_boot.yml",
        boot_vars=("memq_exec_",),
    )


# -------------------------------------------------- the playbooks, stood in for


@dataclass
class QueueProvisioner:
    """An add play registers each node in the queue, a remove play takes it out."""

    queue: MemQueue
    plays: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    probes: list[tuple[str, ...]] = field(default_factory=list)

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        self.plays.append((playbook, tuple(n.name for n in nodes)))
        for n in nodes:
            self.queue.hosts[n.name] = n.slots or SLOTS
        return {n.name: HostResult(n.name, Outcome.OK) for n in nodes}

    def remove_nodes(
        self, playbook: str, nodes: Sequence[NodeSpec], existing: Sequence[NodeSpec]
    ) -> dict[str, HostResult]:
        self.plays.append((playbook, tuple(n.name for n in nodes)))
        for n in nodes:
            self.queue.hosts.pop(n.name, None)
            self.queue.disabled.discard(n.name)
        return {n.name: HostResult(n.name, Outcome.OK) for n in nodes}

    def boot_plans(self, names: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, NodeBoot]:
        raise AssertionError("memq's nodes are provisioned by play")

    def probe_jobs(self, nodes: Sequence[NodeSpec]) -> dict[str, Witness]:
        """The node's own word: a job of the queue runs there or not."""
        self.probes.append(tuple(n.name for n in nodes))
        busy = {j.host for j in self.queue.jobs}
        return {n.name: Witness(n.name, JobProcesses.FOUND if n.name in busy else JobProcesses.NONE) for n in nodes}


# -------------------------------------------------- the tests


@pytest.fixture
def memq(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[Path, FakeCloud, QueueProvisioner]]:
    global QUEUE  # noqa: PLW0603 (the scheduler's state, fresh for each test)
    QUEUE = MemQueue()
    monkeypatch.setitem(SCHEDULERS, "memq", SCHEDULERS.get("memq", __name__))
    register_scheduler("memq", __name__)
    cloud = FakeCloud(NOW)
    prov = QueueProvisioner(QUEUE)
    monkeypatch.setattr(factory, "make_cloud", lambda cfg: cloud)
    monkeypatch.setattr(factory, "make_provisioner", lambda cfg: prov)
    path = tmp_path / "elb.yml"
    path.write_text(
        f"scheduler: memq\nstate_dir: {tmp_path / 'state'}\n"
        f"policy: {{max_nodes: 3, slots_per_node: {SLOTS}, billing: second, idle_time: 60}}\n"
        "memq: {queue: short}\n"
    )
    yield path, cloud, prov


def test_a_scheduler_the_registry_does_not_have_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown scheduler 'memq'"):
        parse_config({"scheduler": "memq"})


def test_the_registered_scheduler_runs_the_whole_pass(
    memq: tuple[Path, FakeCloud, QueueProvisioner], capsys: pytest.CaptureFixture[str]
) -> None:
    path, cloud, prov = memq
    for k in range(1, 7):
        QUEUE.submit(k, slots=2)

    # The dry run plans on the driver's read and changes nothing.
    assert main(["once", "--dry-run", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out
    assert "add 3 (node001, node002, node003)" in out, out
    assert cloud.instances == {} and prov.plays == []

    # The live pass launches, provisions with the driver's play, waits for the driver, journals.
    assert main(["once", "-c", str(path)]) == Exit.OK
    capsys.readouterr()
    assert prov.plays == [("memq_add.yml", ("node001", "node002", "node003"))]
    assert set(QUEUE.hosts) == {"node001", "node002", "node003"}
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    try:
        assert {n.name: n.state for n in journal.nodes()} == dict.fromkeys(QUEUE.hosts, NodeState.READY)
    finally:
        journal.close()

    # elb nodes reads the driver for what runs where.
    QUEUE.start_all()
    assert main(["nodes", "-c", str(path), "--json"]) == Exit.OK
    assert '"node001"' in capsys.readouterr().out

    # A pass sees the jobs run; they end; idle past idle_time, the nodes are drained through the
    # driver, each asked itself (a read once showed it busy), and removed.
    clock = Clock(NOW + 60)
    journal = Journal(cfg.journal_path)
    bal = Balancer(
        cfg, scheduler=factory.make_scheduler(cfg, journal), journal=journal, cloud=cloud, provisioner=prov, clock=clock
    )
    try:
        QUEUE.now = NOW + 60
        assert bal.run_pass().ok
        QUEUE.finish_all()
        clock.t = QUEUE.now = NOW + 600
        result = bal.run_pass()
        assert result.ok, result.summary()
        removed = tuple(sorted(result.outcomes.removed))
        assert removed, result.summary()
        assert ("memq_remove.yml", removed) in prov.plays
        assert prov.probes == [removed]  # each ran a job: asked itself before it went
        assert not set(removed) & set(QUEUE.hosts)
        assert {i.name for i in cloud.list_workers()} == set(QUEUE.hosts)
    finally:
        journal.close()


def test_a_driver_that_cannot_bind_leaves_a_job_interrupted_too_often_as_it_is_said_once(
    memq: tuple[Path, FakeCloud, QueueProvisioner], caplog: pytest.LogCaptureFixture
) -> None:
    """``BindsOnDemand`` is optional: without it, a job spot interruptions sent back more often
    than ``policy.spot_interruptions_allowed`` waits as it is, named once in a warning."""
    path, cloud, prov = memq
    cfg = load_config(path)
    journal = Journal(cfg.journal_path)
    driver = factory.make_scheduler(cfg, journal)
    assert not isinstance(driver, BindsOnDemand)
    for t in range(3):  # three interruptions requeued job 7: one more than allowed (2)
        journal.count_interruptions([7], NOW - 300 + t)
    QUEUE.submit(7)
    bal = Balancer(cfg, scheduler=driver, journal=journal, cloud=cloud, provisioner=prov, clock=Clock(NOW))
    try:
        with caplog.at_level(logging.WARNING, logger="elb"):
            assert bal.run_pass().ok
            assert bal.run_pass().ok
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job 7:")]
        assert said == [
            "job 7: requeued by 3 spot interruptions (more than 2); MemQ cannot bind a job to on-demand nodes: "
            "it may land on spot again"
        ]
        assert bal.counters.moved_on_demand == 0
        assert journal.count_interruptions([7], NOW + 1) == [(7, 4, True)]  # marked: not said again
    finally:
        journal.close()


def test_the_driver_reads_its_own_section_of_the_config_typed(
    memq: tuple[Path, FakeCloud, QueueProvisioner], tmp_path: Path
) -> None:
    """``memq: {queue: short}`` is memq's ``CONFIG_SECTION``: the driver shows its hosts in that
    queue; a config without the key has the section's defaults."""
    path, _cloud, _prov = memq
    cfg = load_config(path)
    assert section(cfg, MemqSettings) == MemqSettings(queue="short")
    QUEUE.hosts["node001"] = SLOTS
    journal = Journal(tmp_path / "journal.sqlite")
    try:
        read = factory.make_scheduler(cfg, journal).read([], NOW)
    finally:
        journal.close()
    assert [q.queue for h in read.snapshot.hosts for q in h.queues] == ["short"]
    assert section(parse_config({"scheduler": "memq"}), MemqSettings) == MemqSettings()


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("memq: {queue: 5}", "line 4, column 8: memq.queue: Input should be a valid string"),
        ("memq: {queu: short}", "line 4, column 8: memq.queu: unknown key"),
        ("memq: short", "line 4, column 1: memq: Input should be a valid dictionary or instance of MemqSettings"),
    ],
)
def test_a_wrong_value_in_the_section_is_one_config_error_at_its_key(
    memq: tuple[Path, FakeCloud, QueueProvisioner], line: str, error: str
) -> None:
    path, _cloud, _prov = memq
    path.write_text(path.read_text().replace("memq: {queue: short}", line))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"config {path}: {error}"


def test_the_section_of_a_scheduler_not_configured_is_refused_saying_whose(
    memq: tuple[Path, FakeCloud, QueueProvisioner],
) -> None:
    path, _cloud, _prov = memq
    path.write_text(path.read_text().replace("scheduler: memq", "scheduler: sge"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"config {path}: line 4, column 1: memq: the settings of the memq scheduler; this config's scheduler is sge"
    )


def test_a_scheduler_named_as_a_built_in_keeps_the_built_ins_section(
    memq: tuple[Path, FakeCloud, QueueProvisioner], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered as ``slurm``, memq's module does not take ``slurm:``: Slurm's typed section
    reads it, and memq's section has its defaults."""
    monkeypatch.setitem(SCHEDULERS, "slurm", __name__)
    cfg = parse_config({"scheduler": "slurm", "slurm": {"timeout": 5}})
    assert slurm_settings(cfg).timeout == 5.0
    assert section(cfg, MemqSettings) == MemqSettings()
    with pytest.raises(ConfigError, match=r"slurm\.queue: unknown key"):
        parse_config({"scheduler": "slurm", "slurm": {"queue": "short"}})


def test_a_section_that_is_not_a_section_model_is_the_modules_error(
    memq: tuple[Path, FakeCloud, QueueProvisioner], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CONFIG_SECTION", dict)
    with pytest.raises(TypeError, match=r"test_third_scheduler\.CONFIG_SECTION: not a subclass of Section"):
        parse_config({"scheduler": "memq"})


def test_validate_runs_the_registered_schedulers_checks(memq: tuple[Path, Any, Any]) -> None:
    path, _cloud, _prov = memq
    assert factory.scheduler_timeout(load_config(path)) == (1.0, "policy.poll_interval")
    assert [c.what for c in factory.scheduler_checks(load_config(path))] == ["memq"]


def test_elb_init_writes_the_registered_schedulers_config(
    memq: tuple[Path, FakeCloud, QueueProvisioner], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "init.yml"
    assert main(["init", "--offline", "--scheduler", "memq", "-c", str(path)]) == Exit.OK
    assert "memq: nothing more to set" in capsys.readouterr().out
    assert load_config(path).scheduler == "memq"


# -------------------------------------------------- elb's own provisioner, for memq


class InventoryRunner:
    """Stands in for ``ansible_runner.runner.Runner``: keeps the inventory of each run."""

    inventories: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, config: Any, event_handler: Any = None, cancel_callback: Any = None) -> None:
        self.config = config

    def run(self) -> tuple[str, int]:
        inventory = json.loads(Path(self.config.inventory).read_text())
        InventoryRunner.inventories.append(inventory)
        (Path(self.config.artifact_dir) / "stdout").write_text("PLAY RECAP\n")
        return "successful", 0


def role_vars(inventories: Sequence[Mapping[str, Any]]) -> list[dict[str, object]]:
    """The vars of ``all`` of each inventory but the connection's (``ansible_*``)."""
    return [{k: v for k, v in i["all"]["vars"].items() if not k.startswith("ansible_")} for i in inventories]


BOOT_EXTRA_VARS = {
    "etc_hosts_master_address": "10.77.0.1",
    "memq_exec_spool": "/var/spool/memq",
    "sge_exec_root": "/opt/sge",  # another scheduler's role: never in memq's boot document
    "munge_key": "SECRET-KEY",
}


def memq_provisioner(tmp_path: Path, **boot: object) -> Any:
    """elb's provisioner built for memq by the factory (``provision.mode: boot``), with a playbook
    directory of memq's remove play."""
    books = tmp_path / "playbooks"
    books.mkdir(exist_ok=True)
    (books / "memq_remove.yml").write_text("---\n")
    cfg = parse_config(
        {
            "scheduler": "memq",
            "state_dir": str(tmp_path / "state"),
            "cluster": {"master": "localhost", "user": "hpc"},
            "cloud": {"provider": "local"},
            "provision": {
                "mode": "boot",
                "boot": boot,
                "playbook_dir": str(books),
                "private_data_dir": str(tmp_path / "ansible"),
                "extra_vars": BOOT_EXTRA_VARS,
            },
        }
    )
    return MAKE_PROVISIONER(cfg)


def test_elbs_provisioner_gives_memqs_plays_and_boot_what_its_module_declares(
    memq: tuple[Path, FakeCloud, QueueProvisioner], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ansible_runner.runner, "Runner", InventoryRunner)
    InventoryRunner.inventories = []
    prov = memq_provisioner(tmp_path)

    # A play: memq's settings are vars of all, beside the cluster's.
    prov.remove_nodes(MemQ.remove_playbook, [NodeSpec("node001", "10.77.0.11")], [])
    assert role_vars(InventoryRunner.inventories) == [{"cluster_user_name": "hpc", "memq_exec_queue": "memq"}]

    # A node's boot: memq's playbook, with its role's variables and those every node's roles read.
    plan = prov.boot_plans(["node001"])["node001"]
    assert plan.argv[-1] == str(tmp_path / "playbooks" / "memq_boot.yml")
    assert yaml.safe_load(plan.files[BOOT_INVENTORY])["all"]["vars"] == {
        "cluster_user_name": "hpc",
        "etc_hosts_master_address": "10.77.0.1",
        "memq_exec_queue": "memq",
        "memq_exec_spool": "/var/spool/memq",
        "node_boot_batch": "node001",
    }


def test_a_scheduler_that_declares_nothing_gets_no_variables_and_boots_only_the_configured_playbook(
    memq: tuple[Path, FakeCloud, QueueProvisioner], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(sys.modules[__name__], "node_plays")
    monkeypatch.setattr(ansible_runner.runner, "Runner", InventoryRunner)
    InventoryRunner.inventories = []
    prov = memq_provisioner(tmp_path)
    prov.remove_nodes(MemQ.remove_playbook, [NodeSpec("node001", "10.77.0.11")], [])
    assert role_vars(InventoryRunner.inventories) == [{"cluster_user_name": "hpc"}]
    with pytest.raises(ValueError, match=r"ships no playbook for a node.s boot: set provision\.boot\.playbook"):
        prov.boot_plans(["node001"])

    prov = memq_provisioner(tmp_path, playbook="/opt/memq/boot.yml")
    plan = prov.boot_plans(["node001"])["node001"]
    assert plan.argv[-1] == "/opt/memq/boot.yml"
    assert yaml.safe_load(plan.files[BOOT_INVENTORY])["all"]["vars"] == {
        "cluster_user_name": "hpc",
        "etc_hosts_master_address": "10.77.0.1",
        "node_boot_batch": "node001",
    }
