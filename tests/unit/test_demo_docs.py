"""The demos' example runs in the docs are runs with the defaults (the prose says so, and the
jobs, their length and the cap in the output are the parser's defaults) and end with the
summary the demo prints, its ``launches:`` line included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elb.service.journal import Journal
from elbdev.cli import build_parser
from elbdev.demo_steps import launch_line

DOCS = Path(__file__).resolve().parents[2] / "docs"


def example(doc: str) -> tuple[str, str]:
    """The code block of ``doc`` that holds a demo's summary, and the paragraph before it."""
    lines = (DOCS / doc).read_text().splitlines()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    for start, end in zip(fences[::2], fences[1::2], strict=True):
        block = "\n".join(lines[start + 1 : end])
        if "\nsummary\n" in block:
            return block, "\n".join(lines[:start]).rstrip().rsplit("\n\n", 1)[-1]
    raise AssertionError(f"{doc}: no demo run with a summary")


@pytest.mark.parametrize(("doc", "scheduler"), [("testcluster.md", "sge"), ("slurm.md", "slurm")])
def test_the_example_is_a_run_with_the_defaults_and_its_whole_summary(doc: str, scheduler: str, tmp_path: Path) -> None:
    block, before = example(doc)
    defaults = build_parser().parse_args(["demo", "--scheduler", scheduler])
    assert "with its defaults" in before or "with the defaults" in before, before
    assert f"submitted {defaults.jobs} jobs of {defaults.job_seconds} s" in block
    assert f"max {defaults.max_nodes} nodes" in block
    journal = Journal(tmp_path / "journal.sqlite")
    shape = re.escape(launch_line(journal, None)).replace("0", r"\d+")
    journal.close()
    assert re.search(f"^{shape}$", block, re.MULTILINE), block
