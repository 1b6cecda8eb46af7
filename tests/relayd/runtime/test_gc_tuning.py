"""relay_gc: a larger gen0 threshold and frozen start-up objects while relays run, restored after."""

from __future__ import annotations

import gc

from relayd.runtime.gc_tuning import GEN0_THRESHOLD, relay_gc


def test_sets_and_restores_the_threshold() -> None:
    before = gc.get_threshold()
    with relay_gc():
        assert gc.get_threshold() == (max(GEN0_THRESHOLD, before[0]), *before[1:])
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_overlapping_relays_restore_once_the_last_one_ends() -> None:
    before = gc.get_threshold()
    first, second = relay_gc(), relay_gc()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first relay ends while the second still runs
    assert gc.get_threshold()[0] == max(GEN0_THRESHOLD, before[0])
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
