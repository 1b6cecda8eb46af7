"""The ``null`` sink: reports every envelope delivered and keeps nothing (for benchmarks)."""

from __future__ import annotations

from collections.abc import Sequence

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.sinks.base import DELIVERED, Outcome, ReadyByReason, SinkOptions
from relayd.sinks.spec import SinkSpec


class NullSink(ReadyByReason):
    """Discard every envelope; ``delivered`` counts them so a benchmark can check its total."""

    name = "null"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        if spec.target or spec.params:
            raise ConfigError("sink 'null' takes no argument")
        self.delivered = 0

    async def start(self) -> None:
        """Nothing to open."""

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        self.delivered += len(batch)
        return [DELIVERED] * len(batch)

    def not_ready_reason(self) -> str | None:
        return None

    async def close(self) -> None:
        """Nothing to release."""
