"""A registered scheduler's or cloud's own settings in the config file, beside the built-in
sections (``sge``, ``slurm``, ``cloud.ec2``, ``cloud.local``, typed fields of
``elb.core.config``).

The module of a scheduler driver or a cloud adapter (``elb.core.registry``) may declare, at its
top level, ``CONFIG_SECTION``: its model of its settings, a subclass of ``Section`` (frozen,
refusing unknown keys). The config file then has them under the module's name: a scheduler's
at the top level (``pbs: {server: ...}``), a cloud's under ``cloud`` (``cloud: {provider:
memcloud, memcloud: {...}}``). Only the configured scheduler's and cloud's section is read,
validated by its model (an error is placed at its key, as every config error); the section of a
registered module that is not the configured one is refused, saying whose it is. A name that is
a built-in key (a scheduler registered as ``slurm``, a cloud as ``local``) keeps the built-in
key's meaning: its module's section then has its defaults.

The module reads its settings with ``section(cfg, Model)``: the config's instance of ``Model``,
or ``Model()`` when the file has none.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter

from elb.core.keyerrors import refused
from elb.core.registry import declared, load


class Section(BaseModel):
    """A registered module's own settings: its ``CONFIG_SECTION`` subclasses it."""

    model_config = ConfigDict(extra="forbid", frozen=True)


S = TypeVar("S", bound=Section)


class HoldsSections(Protocol):
    """A config (``elb.core.config.Config``): the sections it read of its scheduler and its cloud."""

    @property
    def sections(self) -> tuple[Section, ...]: ...


def section(cfg: HoldsSections, model: type[S]) -> S:
    """The settings ``cfg`` has of the module whose ``CONFIG_SECTION`` is ``model`` (its
    defaults when the file has none, or when that module is not the configured one)."""
    for held in cfg.sections:
        if isinstance(held, model):
            return held
    return model()


@cache
def _keyed(model: type[Section]) -> TypeAdapter[dict[str, Section]]:
    return TypeAdapter(dict[str, model])  # type: ignore[valid-type]


@dataclass(frozen=True, slots=True)
class Holder:
    """A mapping of the config that holds a registered module's section: the config's top level
    a scheduler's, ``cloud`` a cloud's. ``table``: the registry's names; ``key``: the key of the
    mapping that names the configured one, ``default`` when it is not given; ``what``: the kind of
    module and ``owner``: the setting that names it, for an error."""

    table: dict[str, str]
    key: str
    default: str
    what: str
    owner: str


def take(data: Mapping[str, Any], holder: Holder, builtin: Collection[str]) -> tuple[dict[str, Any], Section | None]:
    """``data`` (a mapping ``holder`` describes) without the configured module's section, and that
    section read by its model (None when the module declares none). ``builtin``: the keys that are
    not sections. A name the registry lacks is left to its own check. A ``ValidationError``
    places each error at its key."""
    table, what, owner = holder.table, holder.what, holder.owner
    configured = data.get(holder.key, holder.default)
    if not isinstance(configured, str) or configured not in table:
        return dict(data), None
    others = {
        k: f"the settings of the {k} {what}; this config's {owner} is {configured}"
        for k in data
        if k in table and k != configured and k not in builtin
    }
    if others:
        raise refused("Config", "other_section", others, data)
    if configured in builtin:
        return dict(data), None
    model = declared(load(table, configured, what), "CONFIG_SECTION", Section)
    if model is None:
        return dict(data), None
    rest = dict(data)
    given = rest.pop(configured, {})
    held = given if isinstance(given, model) else _keyed(model).validate_python({configured: given})[configured]
    return rest, held
