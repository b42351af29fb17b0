"""Errors placed at keys of a mapping that is being validated: ``refused``.

pydantic places an error a validator raises (``ValueError``, ``PydanticCustomError``) at the
validator's own location: a model validator's error is the whole group's or the whole config's,
not the key's. A key a model does not declare but that another registered module does (a
setting of another scheduler's node groups, another scheduler's section) is refused at its own
key, so that a config error names it at its line: such an error is made here, with
``ValidationError.from_exception_data`` (pydantic-core's constructor of an error at a chosen
location); pydantic prefixes the location of the mapping when the validator raises it.

Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


def refused(title: str, kind: str, reasons: Mapping[str, str], data: Mapping[str, Any]) -> ValidationError:
    """A ``ValidationError`` titled ``title`` with one error of type ``kind`` at each key of
    ``reasons``, its message the reason, its input the key's value in ``data``."""
    errors: list[InitErrorDetails] = [
        {"type": PydanticCustomError(kind, reason), "loc": (key,), "input": data[key]}
        for key, reason in reasons.items()
    ]
    return ValidationError.from_exception_data(title, errors)
