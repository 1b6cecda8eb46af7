"""A tiny relayd sink registered under ``relayd.sinks`` as ``testsink``; it remembers what it got."""

from __future__ import annotations

from collections.abc import Sequence

from relayd.sinks import DELIVERED, Batch, Outcome, SinkOptions, SinkSpec


class TestSink:
    """Deliver everything and keep the ids; ``target`` is whatever followed ``testsink:``."""

    __test__ = False  # not a pytest test class despite its name
    name = "testsink"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        self.target = spec.target
        self.ids: list[str] = []

    async def start(self) -> None:
        """Nothing to open."""

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        self.ids += batch.ids()
        return [DELIVERED] * len(batch)

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        """Nothing to release."""
