"""relay_gc: a larger gen0 threshold and frozen start-up objects while relays run, restored after;
and the console script leaves its heap out of the collection at exit."""

from __future__ import annotations

import gc
import subprocess
import sys

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


#: Registered before ``main``, so it runs after every exit handler ``main`` registers.
_FROZEN_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))
from relayd.cli.app import main
try:
    main(["--version"])
except SystemExit:
    pass
print("frozen before exit:", gc.get_freeze_count() > 0)
"""


def test_the_console_script_skips_the_collection_at_exit() -> None:
    done = subprocess.run([sys.executable, "-c", _FROZEN_AT_EXIT], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[-3:] == ["frozen before exit: False", "frozen at exit: True", ""]
