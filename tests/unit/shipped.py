"""The models of the shipped schedulers' and clouds' own settings (each its module's
``CONFIG_SECTION``), with their keys in the config file: for the tests that walk every option."""

from __future__ import annotations

from elb.core.registry import SHIPPED_CLOUDS, SHIPPED_SCHEDULERS, declared, load
from elb.core.sections import Section


def shipped_sections() -> list[tuple[tuple[str, ...], type[Section]]]:
    """(key path, model) of each section a shipped scheduler or cloud declares."""
    out = []
    for prefix, table, what in (((), SHIPPED_SCHEDULERS, "scheduler"), (("cloud",), SHIPPED_CLOUDS, "cloud provider")):
        for name in table:
            model = declared(load(table, name, what), "CONFIG_SECTION", Section)
            if model is not None:
                out.append(((*prefix, name), model))
    return out
