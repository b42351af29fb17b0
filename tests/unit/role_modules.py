"""The roles' own Ansible modules (``roles/<role>/library/<name>.py``) loaded as Python modules,
for the unit tests that call their functions and run their files as Ansible does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROLES = Path(__file__).resolve().parents[2] / "roles"


def module_path(role: str, name: str) -> Path:
    return ROLES / role / "library" / f"{name}.py"


def load(role: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, module_path(role, name))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module
