"""README.md names the virtualenv of each development command: ``python -m build`` and ``python
-m elbdev`` fail under a system python3 (no build module, no elbdev), so the README writes
``.venv/bin/python -m ...`` (the checkout's, which scripts/bootstrap makes)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_development_command_in_the_readme_names_the_checkouts_virtualenv() -> None:
    text = " ".join(README.read_text().split())  # a command folded over two lines is one
    bare = [
        m.group(0)
        for m in re.finditer(r"(\S*)python3? -m (build|elbdev|pytest)\b", text)
        if m.group(1) != ".venv/bin/" and not m.group(0).startswith("`.venv/bin/")
    ]
    assert not bare, bare
    assert ".venv/bin/python -m build" in text and ".venv/bin/python -m elbdev" in text
