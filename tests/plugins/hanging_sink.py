"""A sink that declares a timeout and ignores it: its ``deliver`` waits forever.

Used as ``python:tests.plugins.hanging_sink:HangingSink?timeout_s=0.5`` by relayd processes
started with the repository root on ``PYTHONPATH`` (tests/faults/test_hung_sink.py): a call past
its own timeout plus ``--hung-sink-grace`` is a hung process, and ``/healthz`` says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from relayd.sinks import Batch, Outcome, SinkOptions, SinkSpec


class HangingSink:
    name = "hanging"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        #: what this sink promises and does not keep (``relayd.observability.inflight.timeout_of``)
        self.timeout_s = float(spec.params.get("timeout_s", "0.5"))
        self._never = asyncio.Event()

    async def start(self) -> None:
        """Nothing to open."""

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        await self._never.wait()  # no timeout of its own: the bug this sink stands for
        raise AssertionError("unreachable: nothing sets the event")

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        """Nothing to release."""
