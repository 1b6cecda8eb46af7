"""``python -m support.harel_crash_worker``: harel's own worker, killed right after a commit
that carries spawns (before its inline relay creates the children).

The first such commit of the process ends it with ``os._exit`` (no cleanup, as a SIGKILL), once
per ``HAREL_CRASH_MARKER`` file: the file is written before the exit, and a worker started
with the marker already there runs as harel's plain worker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harel import worker
from harel.engine.aio_store.redis import AsyncRedisStore

_commit = AsyncRedisStore.commit


async def _commit_then_die(self: Any, exe: Any, emits: Any, *args: Any, **kwargs: Any) -> list[int]:
    seqs: list[int] = await _commit(self, exe, emits, *args, **kwargs)
    marker = Path(os.environ["HAREL_CRASH_MARKER"])
    if kwargs.get("spawns") and not marker.exists():
        marker.write_text(exe.id)
        os._exit(137)
    return seqs


if __name__ == "__main__":
    AsyncRedisStore.commit = _commit_then_die  # type: ignore[method-assign]
    worker.main()
