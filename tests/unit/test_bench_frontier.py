"""benchmarks/bench_frontier.py writes docs/results/frontiers.md anew from its replays, and keeps
what is written by hand below its marker (what the figures were found to mean)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.loadfile import load_file

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_frontier.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_file(BENCHMARK, "bench_frontier")


def test_a_page_written_again_keeps_the_part_written_by_hand(bench: ModuleType, tmp_path: Path) -> None:
    page = tmp_path / "frontiers.md"
    bench.write_page(page, "# old figures")
    page.write_text(page.read_text() + "\n## Where the cost goes\n\nwritten by hand\n")
    bench.write_page(page, "# new figures")
    text = page.read_text()
    assert text.startswith("# new figures\n")
    assert "old figures" not in text
    assert text.endswith(bench.KEPT + "\n\n## Where the cost goes\n\nwritten by hand\n")


def test_a_new_page_ends_with_the_marker(bench: ModuleType, tmp_path: Path) -> None:
    page = tmp_path / "frontiers.md"
    bench.write_page(page, "# figures")
    assert page.read_text() == "# figures\n" + bench.KEPT + "\n"


def test_the_shared_page_has_the_marker(bench: ModuleType) -> None:
    """The page in the repository was written with the marker, so its hand-written part is kept."""
    assert bench.KEPT in (Path(__file__).resolve().parents[2] / "docs" / "results" / "frontiers.md").read_text()
