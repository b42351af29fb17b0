"""benchmarks/bench_frontier.py writes docs/results/frontiers.md anew from its replays, and keeps
what is written by hand below its marker (what the figures were found to mean)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_frontier.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_frontier", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


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
