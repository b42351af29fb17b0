"""The drain races' submit times (tests/faults/support.py): a short run covers the whole window."""

from __future__ import annotations

import random

import pytest

from tests.faults.support import race_offsets

BEFORE, AFTER = (-2.0, -0.2), (0.0, 0.2)


@pytest.mark.parametrize("races", [2, 4, 5, 10, 50])
def test_one_race_in_ten_is_after_and_the_others_cover_the_window_in_equal_parts(races: int) -> None:
    for seed in range(20):
        offsets = race_offsets(races, BEFORE, AFTER, random.Random(seed))
        assert len(offsets) == races
        after = [o for o in offsets if o >= 0]
        assert len(after) == max(1, round(races / 10))
        assert all(AFTER[0] <= o <= AFTER[1] for o in after)
        before = sorted(o for o in offsets if o < 0)
        part = (BEFORE[1] - BEFORE[0]) / len(before)
        for k, o in enumerate(before):
            assert BEFORE[0] + k * part <= o <= BEFORE[0] + (k + 1) * part, (seed, k, o)


def test_a_single_race_is_drawn_before_the_drain() -> None:
    (offset,) = race_offsets(1, BEFORE, AFTER, random.Random(0))
    assert BEFORE[0] <= offset <= BEFORE[1]
