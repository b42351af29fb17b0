"""``elb.core.gcpause.paused``: the collector paused meanwhile, what a kept work made set aside,
and a reference cycle set aside collected at the next sweep."""

from __future__ import annotations

import gc
import weakref

import pytest

from elb.core import gcpause
from elb.core.gcpause import paused


class Cell:
    def __init__(self) -> None:
        self.other: object = self


def test_the_collector_is_paused_meanwhile_and_as_it_was_after() -> None:
    assert gc.isenabled()
    for keep in (False, True):
        with paused(keep=keep):
            assert not gc.isenabled()
        assert gc.isenabled()
    gc.disable()
    try:
        with paused(keep=True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_a_kept_work_made_is_set_aside_and_a_cycle_dropped_later_goes_at_the_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gcpause, "SWEEP_EVERY", 3)
    monkeypatch.setattr(gcpause, "_kept", 0)
    try:
        with paused(keep=True):
            cycle = Cell()
        assert gc.get_freeze_count() > 0  # set aside: no collection walks it
        gone = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert gone() is not None  # a cycle set aside waits for the sweep
        with paused(keep=True):
            pass
        assert gone() is not None
        with paused(keep=True):  # the third kept work: the sweep
            pass
        assert gone() is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_an_error_meanwhile_leaves_the_collector_running() -> None:
    with pytest.raises(RuntimeError), paused(keep=True):
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.unfreeze()
