"""Every config option is documented in docs/configuration.md, with its default."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from elb.core.config import Config
from tests.unit.shipped import shipped_sections

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def option_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out += option_keys(kind, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def documented(text: str) -> set[str]:
    """Keys named in backticks in the first column of the reference's option tables."""
    keys = set()
    ec2 = False
    for line in text.splitlines():
        if line.startswith("| key (`cloud.ec2.`)"):
            ec2 = True
        elif not line.startswith("|"):
            ec2 = False
        if line.startswith("|"):
            first = line.split("|")[1]
            for key in re.findall(r"`([\w.]+)`", first):
                keys.add(f"cloud.ec2.{key}" if ec2 else key)
    return keys


def test_every_option_is_in_the_reference_tables() -> None:
    keys = option_keys(Config) + [
        k for path, model in shipped_sections() for k in option_keys(model, ".".join(path) + ".")
    ]
    assert "unreachable_timeout" in keys and "cloud.ec2.spot" in keys  # the walk reaches every level
    missing = sorted(set(keys) - documented(REFERENCE.read_text()))
    assert missing == [], f"options missing from docs/configuration.md's tables: {missing}"
