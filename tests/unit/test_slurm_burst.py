"""The Slurm burst benchmark's count of the cloud nodes a run may be given (no controller: sinfo's
answer is given)."""

from __future__ import annotations

import pytest

from elbdev.testcluster import slurm_burst

SINFO = "\n".join(
    [
        "node001|idle~|none",
        "node002|drain~|elb: held: no room within max_nodes 1",
        "node003|drain~|an admin's maintenance",
        "node004|idle%|none",
        "node005|drain%|elb: held: no room within max_nodes 1",
        "node006|idle|none",
    ]
)


def test_free_nodes_counts_the_open_and_elbs_held_names_powered_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open and powered down, or held by the run before (its next run's elb opens them): free; an
    admin's drain, a node powering down or up: not."""
    monkeypatch.setattr(slurm_burst, "_slurm_out", lambda argv: SINFO)
    assert slurm_burst.free_nodes() == 2
