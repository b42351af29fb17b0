"""The settings of a scheduler or a cloud in the config file: the module serving its name
(``elb.core.registry``) declares them, at its top level, as ``CONFIG_SECTION``: its model of
them, a subclass of ``Section`` (frozen, refusing unknown keys). The config file has them under
the module's name: a scheduler's at the top level (``sge: {...}``, ``pbs: {server: ...}``), a
cloud's under ``cloud`` (``cloud: {provider: ec2, ec2: {...}}``). Each is validated by its model
(an error is placed at its key, as every config error).

The configured scheduler's and cloud's sections are read (their defaults when the file has
none), and those of the modules elb ships (``SHIPPED_SCHEDULERS``, ``SHIPPED_CLOUDS``) that the
file has, configured or not: a config may keep Grid Engine's and Slurm's settings both. The
section of another registered module that is not the configured one is refused, saying whose it
is. A shipped name is read by the shipped module's model: a module registered under it has its
section's defaults.

A module reads its settings with ``section(cfg, Model)``: the config's instance of ``Model``,
or ``Model()`` when the file has none. A section may refuse what the rest of the config
contradicts, or set what it names elsewhere, once the whole config is read (``Section.settled``),
and name its keys that a node group sets itself (``GROUP_KEYS``: refused beside ``node_groups``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter
from typing_extensions import TypedDict

from elb.core.keyerrors import refused
from elb.core.registry import declared, load


class Section(BaseModel):
    """A registered module's own settings: its ``CONFIG_SECTION`` subclasses it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The keys of this section that a node group sets itself: refused, when set, beside
    # ``node_groups`` (``elb.core.config.Config``).
    GROUP_KEYS: ClassVar[tuple[str, ...]] = ()

    def settled(self, key: str, config: Any) -> Any:
        """``config`` (an ``elb.core.config.Config``, holding this section at ``key``) as this
        section settles it once all of it is read: ``ValueError("KEY: problem")`` for what the
        rest contradicts, else the config, with what this section sets elsewhere. By default:
        as it is."""
        return config


S = TypeVar("S", bound=Section)


class HoldsSections(Protocol):
    """A config (``elb.core.config.Config``): the sections it read of its scheduler and its cloud."""

    @property
    def sections(self) -> tuple[Section, ...]: ...


def section(cfg: HoldsSections, model: type[S]) -> S:
    """The settings ``cfg`` has of the module whose ``CONFIG_SECTION`` is ``model`` (its
    defaults when the file has none)."""
    for held in cfg.sections:
        if isinstance(held, model):
            return held
    made = _defaults(model)
    assert isinstance(made, model)
    return made


@cache
def _defaults(model: type[Section]) -> Section:
    """``model()``, made once: a section is frozen."""
    return model()


@cache
def _reader(models: tuple[tuple[str, type[Section]], ...]) -> TypeAdapter[dict[str, Section]]:
    """The sections ``models`` name, read together (their errors placed at their keys)."""
    keyed = TypedDict("Sections", {name: model for name, model in models})  # type: ignore[misc]
    return TypeAdapter(keyed)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Holder:
    """A mapping of the config that holds the sections of registered modules: the config's top
    level a scheduler's, ``cloud`` a cloud's. ``table``: the registry's names; ``shipped``: those
    elb ships and their modules; ``key``: the key of the mapping that names the configured one,
    ``default`` when it is not given; ``what``: the kind of module and ``owner``: the setting that
    names it, for an error."""

    table: Mapping[str, str]
    shipped: Mapping[str, str]
    key: str
    default: str
    what: str
    owner: str


def take(
    data: Mapping[str, Any], holder: Holder, fields: Collection[str]
) -> tuple[dict[str, Any], dict[str, Any], TypeAdapter[dict[str, Section]] | None]:
    """``data`` (a mapping ``holder`` describes) without the sections it holds; those sections
    (by name, the configured one's ``{}`` when not given), and their reader (None: none). ``fields``:
    the keys that are not sections. A name the registry lacks is left to its own check."""
    table, what, owner = holder.table, holder.what, holder.owner
    configured = data.get(holder.key, holder.default)
    if not isinstance(configured, str) or configured not in table:
        return dict(data), {}, None
    others = {
        k: f"the settings of the {k} {what}; this config's {owner} is {configured}"
        for k in data
        if k in table and k != configured and k not in holder.shipped and k not in fields
    }
    if others:
        raise refused("Config", "other_section", others, data)
    names = [k for k in holder.shipped if k in data and k not in fields]
    if configured not in names and configured not in fields:
        names.append(configured)
    models = tuple((name, model) for name in names if (model := _model(holder, name)) is not None)
    if not models:
        return dict(data), {}, None
    rest = {k: v for k, v in data.items() if k not in dict(models)}
    return rest, {name: data.get(name, {}) for name, _ in models}, _reader(models)


def _model(holder: Holder, name: str) -> type[Section] | None:
    """The ``CONFIG_SECTION`` of the module serving ``name`` (the shipped one's for a shipped name)."""
    table = holder.shipped if name in holder.shipped else holder.table
    return declared(load(table, name, holder.what), "CONFIG_SECTION", Section)
