"""The harel workflows of the harel end-to-end test, importable by the worker process.

``flow`` forks two orthogonal regions; each region's ``Finished`` reaches the parent through
the outbox (an emit to another execution), the join leads to ``Waiting`` with a ``timeout``.
``timed`` waits in ``Armed`` on a ``timeout``; its Timeout is what relayd relays from the timers
zset. Entering a final state runs ``note_done`` (a dotted action path: the worker imports this
module, so ``PYTHONPATH`` must hold ``tests/e2e``), which records the pid of the process that
ran it, so the test can tell the worker process did the work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SOURCE = """
event Go {}
event A {}
event B {}
machine flow {
  initial Idle
  state Idle {}
  orthogonal Fork {
    state RegionA {
      initial WaitA
      state WaitA {}
      final DoneA success
      from WaitA to DoneA on A
    }
    state RegionB {
      initial WaitB
      state WaitB {}
      final DoneB success
      from WaitB to DoneB on B
    }
  }
  state Waiting { timeout 1 }
  final Finished success { on enter harel_workflow.note_done }
  final Failed failed
  from Idle to Fork on Go
  from Fork join all to Waiting else to Failed
  from Waiting to Finished on Timeout
}
machine timed {
  initial Armed
  state Armed { timeout 1 }
  final Expired success { on enter harel_workflow.note_done }
  from Armed to Expired on Timeout
}
"""

MACHINES = ("flow", "timed")


def note_done(proxy: Any, event: Any, **inputs: Any) -> None:
    """Record which process finished the execution (its context is committed with the step)."""
    proxy.execution_ctx["done_by_pid"] = os.getpid()


def write_definitions(directory: Path) -> Path:
    """Write the machines as ``workflows.stm`` for harel's worker (``HAREL_DEFINITIONS_DIR``)."""
    path = directory / "workflows.stm"
    path.write_text(SOURCE)
    return path
