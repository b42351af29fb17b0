"""The built distribution: an sdist and, built from that sdist, a wheel (``python -m build``).

Built once per session into a temporary directory, so the wheel tests also prove that the sdist
carries everything the wheel needs (MANIFEST.in).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (found,) = out.glob("elb-*.whl")
    return found
