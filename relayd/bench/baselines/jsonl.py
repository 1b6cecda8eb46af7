"""The JSONL baseline: the same lines appended with one write and one fsync per batch.

A batch is ``BATCH`` lines, the bench's default ``--batch``: what the relay hands the sink per
call. The file is the spec's own path (``jsonl:PATH``), opened for append.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Final

#: Lines per write and fsync.
BATCH: Final = 1000


async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int:
    """Append every body as a line to the spec's path, fsync'd per batch; return how many."""
    del keys
    path = spec.partition(":")[2]
    await asyncio.to_thread(_append, path, bodies)
    return len(bodies)


def _append(path: str, bodies: Sequence[bytes]) -> None:
    with open(path, "ab") as file:
        for start in range(0, len(bodies), BATCH):
            file.write(b"".join(line + b"\n" for line in bodies[start : start + BATCH]))
            file.flush()
            os.fsync(file.fileno())
