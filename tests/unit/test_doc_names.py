"""Every module, class or function of elb that a page of the docs names in backticks
(``elb.core.planner.plan_pass``) exists: a rename or a move shows here, not in a reader's search."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
NAME = re.compile(r"`(elb(?:\.\w+)+)(?:\(\))?`")
NOT_PYTHON = ("elb.cluster", "elb.yml", "elb.recipe")  # the collection, the config file, an image label


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_a_page_gives_exists(page: Path) -> None:
    names = {m for m in NAME.findall(page.read_text()) if not m.startswith(NOT_PYTHON)}
    assert sorted(n for n in names if not resolves(n)) == []
