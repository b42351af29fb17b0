"""Every relative link in README.md and docs/**/*.md points to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def relative_links(text: str) -> list[str]:
    """The targets of `](target)` links outside fenced code, without their #anchor; web links left out."""
    out = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(line):
            path = target.split("#", 1)[0]
            if path and not re.match(r"^[a-z][a-z0-9+.-]*:", path):
                out.append(path)
    return out


def test_relative_links_are_found_and_web_links_and_code_left_out() -> None:
    text = "see [a](docs/a.md#x), [b](https://x.org/b.md), [c](#here)\n```\n[d](nowhere.md)\n```\n[e](../e.md)\n"
    assert relative_links(text) == ["docs/a.md", "../e.md"]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [t for t in relative_links(page.read_text(encoding="utf-8")) if not (page.parent / t).exists()]
    assert broken == [], f"{page.relative_to(REPO)}: links to missing files: {broken}"
