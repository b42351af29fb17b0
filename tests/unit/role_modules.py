"""The roles' own Ansible modules (``roles/<role>/library/<name>.py``) loaded as Python modules,
for the unit tests that call their functions and run their files as Ansible does."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


def run(module: Path, tmp_path: Path, **args: Any) -> tuple[int, dict[str, Any]]:
    """Run a module file as Ansible's module debugging does (its arguments in a JSON file): its
    exit code and the JSON it answered."""
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run(
        [sys.executable, str(module), str(args_file)], capture_output=True, text=True, timeout=60, check=False
    )
    return proc.returncode, json.loads(proc.stdout)
