"""Schedulers and clouds by name: what a config's ``scheduler`` and ``cloud.provider`` may say, and
the module that serves each. One entry each; nothing else in elb compares their names.

What each module provides is ``elb.core.drivers``'s ``SchedulerModule`` and ``CloudModule``; the
modules are imported when first asked for (``elb.core.drivers.scheduler_module``, ``cloud_module``),
so that a dry run loads neither boto3 nor ansible-runner and the local provider needs no AWS
library. The tables below name them as data: ``elb.core`` imports none of them.

A driver or an adapter that elb does not ship registers itself (``register_scheduler``,
``register_cloud``) before the config is read; the config then accepts its name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import TypeVar

# What a config that names none has (``scheduler``, ``cloud.provider``), and whose options a node
# group read without a config takes (``elb.core.groups.NodeGroup``).
DEFAULT_SCHEDULER = "sge"
DEFAULT_CLOUD = "ec2"

SCHEDULERS: dict[str, str] = {
    "sge": "elb.schedulers.sge.driver",
    "slurm": "elb.schedulers.slurm.driver",
}
CLOUDS: dict[str, str] = {
    "ec2": "elb.clouds.ec2.entry",
    "local": "elb.clouds.local",
}
# The modules elb ships, under their names whatever is registered since: a config may hold the
# settings of each (``elb.core.sections``), the configured one or not.
SHIPPED_SCHEDULERS: Mapping[str, str] = MappingProxyType(dict(SCHEDULERS))
SHIPPED_CLOUDS: Mapping[str, str] = MappingProxyType(dict(CLOUDS))


T = TypeVar("T")


def register_scheduler(name: str, module: str) -> None:
    """Make ``scheduler: NAME`` mean the driver of ``module`` (a ``SchedulerModule``)."""
    SCHEDULERS[name] = module


def register_cloud(name: str, module: str) -> None:
    """Make ``cloud.provider: NAME`` mean the adapter of ``module`` (a ``CloudModule``)."""
    CLOUDS[name] = module


def known(table: Mapping[str, str], name: str, what: str) -> str:
    """``name`` if ``table`` has it, else ``ValueError`` naming the ones it has."""
    if name not in table:
        raise ValueError(f"unknown {what} {name!r} (known: {', '.join(sorted(table))})")
    return name


def load(table: Mapping[str, str], name: str, what: str) -> ModuleType:
    """The module ``table`` has for ``name``, imported when first asked for (``ValueError`` for
    an unknown name, as ``known``)."""
    return importlib.import_module(table[known(table, name, what)])


def declared(module: ModuleType, name: str, base: type[T]) -> type[T] | None:
    """The class ``module`` declares as ``name`` at its top level (``GROUP_OPTIONS``,
    ``CONFIG_SECTION``): a subclass of ``base``, or None when it declares none (``TypeError``
    naming the module when what it declares is not one)."""
    given: object = vars(module).get(name)
    if given is None:
        return None
    if not (isinstance(given, type) and issubclass(given, base)):
        raise TypeError(f"{module.__name__}.{name}: not a subclass of {base.__name__}")
    return given
