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
from functools import cache
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

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


def take(
    data: Mapping[str, Any],
    *,
    table: dict[str, str],
    configured: object,
    builtin: Collection[str],
    what: str,
    owner: str,
) -> tuple[dict[str, Any], Section | None]:
    """``data`` (the mapping that holds the sections: the config's top level for a scheduler,
    ``cloud`` for a cloud) without the configured module's section, and that section read by its
    model (None when the module declares none). ``table``: the registry's names; ``configured``:
    the name the config gives (a name the registry lacks is left to its own check); ``builtin``:
    the keys that are not sections; ``what``: the kind of module, ``owner``: the key that names
    it, for an error. A ``ValidationError`` places each error at its key."""
    if not isinstance(configured, str) or configured not in table:
        return dict(data), None
    others = [k for k in data if k in table and k != configured and k not in builtin]
    if others:
        raise ValidationError.from_exception_data(
            "Config",
            [
                {
                    "type": PydanticCustomError(
                        "other_section", f"the settings of the {k} {what}; this config's {owner} is {configured}"
                    ),
                    "loc": (k,),
                    "input": data[k],
                }
                for k in others
            ],
        )
    if configured in builtin:
        return dict(data), None
    model = declared(load(table, configured, what), "CONFIG_SECTION", Section)
    if model is None:
        return dict(data), None
    rest = dict(data)
    given = rest.pop(configured, {})
    held = given if isinstance(given, model) else _keyed(model).validate_python({configured: given})[configured]
    return rest, held
