"""A Python file that is no package's module (a benchmark, a role's module or file) loaded as a
module, for the unit tests that call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(path: Path, name: str | None = None, *, bytecode: bool = True) -> ModuleType:
    """``path`` loaded as the module ``name`` (its stem by default), registered in ``sys.modules``
    (dataclasses look their module up there). ``bytecode``: False writes no ``__pycache__`` beside
    it (a file shipped in a role)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, sys.dont_write_bytecode or not bytecode
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module
