"""Where the tests find the project's real job logs (SWF), which are not in the repository: in
``../shared/traces`` beside a checkout, or ``$ELB_TRACES``. A test that needs them skips without
them, saying so in pytest's summary; the simulator's other tests run on logs they make."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("ELB_TRACES", REPO.parent / "shared" / "traces"))
KTH = TRACES / "KTH-SP2-1996-2.2-cln.swf.gz"
NASA = TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz"
MISSING = (
    f"needs the real job logs (KTH, NASA), not in a clone: put them in {TRACES} or set ELB_TRACES "
    "(a skip that loses nothing else: the simulator's other tests replay logs they make)"
)


def needs(*logs: Path) -> pytest.MarkDecorator:
    """Skip the test unless every one of ``logs`` is there."""
    return pytest.mark.skipif(not all(log.exists() for log in logs), reason=MISSING)
