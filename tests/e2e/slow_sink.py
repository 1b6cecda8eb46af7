"""A jsonl sink that pauses before each batch, so a test can signal or kill relayd mid-drain.

Used as ``python:tests.e2e.slow_sink:SlowJsonl?path=FILE&delay_s=0.05`` by subprocesses started
with the repository root on ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from relayd.sinks import Batch, Outcome, SinkOptions, SinkSpec, resolve_sink


class SlowJsonl:
    name = "slow-jsonl"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        self._inner = resolve_sink(f"jsonl:{spec.params['path']}", options)
        self._delay_s = float(spec.params.get("delay_s", "0.05"))

    async def start(self) -> None:
        await self._inner.start()

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        await asyncio.sleep(self._delay_s)
        return await self._inner.deliver(batch)

    def ready(self) -> bool:
        return self._inner.ready()

    async def close(self) -> None:
        await self._inner.close()
