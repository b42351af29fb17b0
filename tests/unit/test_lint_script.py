"""scripts/lint, what scripts/test and CI run for the linters: every linter runs whatever the
others said, and the script fails when any of them failed. The linters are stand-ins here (small
programs first on PATH that note their arguments and exit as told): the real ones are run by
scripts/test itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINTERS = ("ruff", "mypy", "yamllint", "ansible-lint")
# Each stand-in's name and first argument, in the order scripts/lint runs them.
EVERY_LINTER = ["ruff check", "ruff format", "mypy ", "yamllint -s", "ansible-lint --profile"]


def _run_lint(tmp_path: Path, failing: str | None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """scripts/lint with stand-in linters, and what they were called with; ``failing``: the
    stand-in that exits 1 (its name, or its name and first argument)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name in LINTERS:
        tool = bin_dir / name
        tool.write_text(
            "#!/bin/sh\n"
            'echo "$(basename "$0") $1" >> "$ELB_LINT_CALLS"\n'
            'case "$(basename "$0") $1" in "$ELB_LINT_FAILING") exit 1;; esac\n'
            'case "$(basename "$0")" in "$ELB_LINT_FAILING") exit 1;; esac\n'
            "exit 0\n"
        )
        tool.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", ELB_LINT_CALLS=str(calls))
    env["ELB_LINT_FAILING"] = failing or "-"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "lint")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return proc, calls.read_text().splitlines()


@pytest.mark.parametrize("failing", ["ruff check", "ruff format", "mypy", "yamllint", "ansible-lint"])
def test_any_failing_linter_fails_the_script_and_the_others_still_run(tmp_path: Path, failing: str) -> None:
    proc, calls = _run_lint(tmp_path, failing)
    assert proc.returncode == 1, proc
    assert f"lint FAILED: {failing}" in proc.stderr
    assert calls == EVERY_LINTER


def test_the_script_passes_when_every_linter_passes(tmp_path: Path) -> None:
    proc, calls = _run_lint(tmp_path, None)
    assert proc.returncode == 0, proc
    assert calls == EVERY_LINTER
    assert "FAILED" not in proc.stderr
