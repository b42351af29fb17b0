"""The roles' own Ansible modules (``roles/<role>/library/<name>.py``) loaded as Python modules,
for the unit tests that call their functions and run their files as Ansible does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.unit.loadfile import load_file

ROLES = Path(__file__).resolve().parents[2] / "roles"


def module_path(role: str, name: str) -> Path:
    return ROLES / role / "library" / f"{name}.py"


def load(role: str, name: str) -> ModuleType:
    return load_file(module_path(role, name), name)


def run(module: Path, tmp_path: Path, **args: Any) -> tuple[int, dict[str, Any]]:
    """Run a module file as Ansible's module debugging does (its arguments in a JSON file): its
    exit code and the JSON it answered."""
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run(
        [sys.executable, str(module), str(args_file)], capture_output=True, text=True, timeout=60, check=False
    )
    return proc.returncode, json.loads(proc.stdout)
