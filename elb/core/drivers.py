"""What the module of a scheduler driver and of a cloud adapter provides (``SchedulerModule``,
``CloudModule``), what a scheduler's nodes need from the provisioner (``NodePlays``), and the
module serving a name of ``elb.core.registry``, imported when first asked for (the models of
their own settings of a node group: ``elb.core.groupoptions``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from elb.core.registry import CLOUDS, SCHEDULERS, load

if TYPE_CHECKING:
    from elb.core.attribution import JobUse
    from elb.core.checks import Check
    from elb.core.config import Config
    from elb.core.groups import NodeGroup
    from elb.core.interfaces import Cloud, CloudSettings, NoticeSource
    from elb.core.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class InitDraft:
    """What ``elb init`` writes for a scheduler (``SchedulerModule.init``): the config file, what
    could not be read (one line each, said as notes), and lines said after them (what the
    scheduler itself still lacks)."""

    text: str
    notes: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


def _no_vars(group: NodeGroup) -> Mapping[str, object]:
    """A scheduler's nodes take nothing of their group under their roles' names."""
    return {}


@dataclass(frozen=True, slots=True)
class NodePlays:
    """What a scheduler's nodes need from the provisioner, declared by its module's optional
    ``node_plays(cfg)`` (``node_plays`` below); the defaults are what a scheduler whose module
    declares nothing gets.

    - ``variables``: its settings under its roles' variable names, given to every play as vars of
      ``all`` (above the roles' defaults, below ``provision.extra_vars``); default: none;
    - ``boot_playbook``: what its node runs on itself at its first boot (``provision.mode: boot``),
      a file of the playbook directory; default None: it ships none, and a node's boot runs
      ``provision.boot.playbook`` (without it, no boot can be made);
    - ``boot_vars``: the beginnings of the names of its own roles' variables, which a node's boot
      document carries besides those of the roles every node runs (``elb.provision.boot``);
      default: none;
    - ``master_playbooks``: the plays the master runs for its nodes (adding and removing one),
      files the playbook directory must hold; ``admit_playbooks``: those it must hold too with
      ``provision.mode: boot`` (the master's part of a node's boot); default: none;
    - ``group_vars``: a node's variables for its roles from its node group (where it joins the
      scheduler, what it offers there), host vars of the plays' inventory (``NodeSpec.host_vars``);
      default: none.
    """

    variables: Mapping[str, object] = field(default_factory=dict)
    boot_playbook: str | None = None
    boot_vars: tuple[str, ...] = ()
    master_playbooks: tuple[str, ...] = ()
    admit_playbooks: tuple[str, ...] = ()
    group_vars: Callable[[NodeGroup], Mapping[str, object]] = _no_vars

    def needed(self, *, boot: bool) -> tuple[str, ...]:
        """The playbooks elb runs on the master in this mode (``boot``: ``provision.mode: boot``)."""
        return self.master_playbooks + (self.admit_playbooks if boot else ())


@runtime_checkable
class DeclaresNodePlays(Protocol):
    """Optional for the module of a scheduler driver: ``node_plays(cfg)``, what its nodes need
    from the provisioner; asked for by ``isinstance``. Without it: ``NodePlays()``."""

    def node_plays(self, cfg: Config) -> NodePlays: ...


class SchedulerModule(Protocol):
    """What the module of a scheduler driver provides; optionally also ``node_plays(cfg)``
    (``DeclaresNodePlays``), its own settings of a node group (``GROUP_OPTIONS`` and
    ``group_options(cfg)``: ``elb.core.groupoptions``) and of the config file (``CONFIG_SECTION``:
    ``elb.core.sections``)."""

    TITLE: str  # its name in ``elb init``'s sentences, as its users write it

    def make(self, cfg: Config, journal: Any) -> Scheduler:
        """The driver; ``journal``: where a scheduler that asks for nodes by name keeps its asks."""
        ...

    def checks(self, cfg: Config) -> Iterator[Check]:
        """``elb validate``'s checks of this scheduler."""
        ...

    def command_timeout(self, cfg: Config) -> tuple[float, str]:
        """The time-out of one of its commands, and its config key."""
        ...

    def job_uses(self, cfg: Config, since: float, until: float, accounting: Path | None = None) -> list[JobUse]:
        """The job uses in [since, until), for ``elb spend``."""
        ...

    def accounting_note(self, cfg: Config, accounting: Path | None = None) -> str | None:
        """What ``elb spend`` says when ``job_uses`` is empty for a reason of the scheduler's own
        (an accounting file that has no line before a job finishes); None: nothing to say."""
        ...

    def init_answers(self, options: Any) -> str | None:
        """Whether the scheduler answers on this machine, in words ("Slurm's scontrol answers"),
        for ``elb init --scheduler auto``; None: it does not. ``options``: ``elb init``'s parsed
        command line."""
        ...

    def init(self, options: Any, cloud: Sequence[str], tail: Sequence[str]) -> InitDraft:
        """``elb init``'s config for this scheduler from what this machine shows; ``cloud``: the
        cloud's lines (under ``cloud:``), ``tail``: the sections after them."""
        ...


class CloudModule(Protocol):
    """What the module of a cloud adapter provides; optionally also its own settings of a node
    group (``GROUP_OPTIONS`` and ``group_options(cfg)``: ``elb.core.groupoptions``) and of the
    config file (``CONFIG_SECTION``: ``elb.core.sections``)."""

    def settings(self, cfg: Config) -> CloudSettings:
        """What the pass reads of this cloud's section of the config, in the core's words."""
        ...

    def make(self, cfg: Config) -> Cloud:
        """The adapter."""
        ...

    def checks(self, cfg: Config) -> Iterator[Check]:
        """``elb validate``'s checks of this cloud."""
        ...

    def notices(self, cfg: Config) -> NoticeSource | None:
        """The reader of the cloud's notices about its workers, when the config turns it on;
        None: no such reader (the daemon then learns of a node's end from the cloud's list)."""
        ...


def scheduler_module(name: str) -> SchedulerModule:
    """The module of the scheduler named ``name`` (``ValueError`` for an unknown name)."""
    return cast("SchedulerModule", load(SCHEDULERS, name, "scheduler"))


def node_plays(cfg: Config) -> NodePlays:
    """What the configured scheduler's nodes need from the provisioner: its module's
    ``node_plays(cfg)``, or ``NodePlays()`` when it declares none."""
    module = scheduler_module(cfg.scheduler)
    return module.node_plays(cfg) if isinstance(module, DeclaresNodePlays) else NodePlays()


def cloud_module(name: str) -> CloudModule:
    """The module of the cloud named ``name`` (``ValueError`` for an unknown name)."""
    return cast("CloudModule", load(CLOUDS, name, "cloud provider"))


def cloud_settings(cfg: Config) -> CloudSettings:
    """The configured cloud's settings the pass reads (``CloudModule.settings``)."""
    return cloud_module(cfg.cloud.provider).settings(cfg)
