"""The ``log`` sink: one structlog line per envelope at info (the whole envelope), then Delivered.

Useful to watch a relay in a terminal or to smoke-test a deployment; it is as durable as the
log pipeline behind it, so production setups use a real sink. It is never a default: a sweep
uses it only when it is named (``--sink log``), since it acks what it logs.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.sinks.base import DELIVERED, Outcome, ReadyByReason, SinkOptions
from relayd.sinks.spec import SinkSpec

log = structlog.get_logger(__name__)


class LogSink(ReadyByReason):
    """Log each envelope (``id``, ``kind``, ``prefix``, ``attempt``, the whole ``envelope``); Delivered."""

    name = "log"

    def __init__(self, spec: SinkSpec, options: SinkOptions) -> None:
        if spec.target or spec.params:
            raise ConfigError("sink 'log' takes no argument")

    async def start(self) -> None:
        """Nothing to open."""

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        for envelope in batch:
            log.info(
                "envelope",
                id=envelope.id,
                kind=envelope.kind,
                prefix=envelope.prefix,
                attempt=envelope.attempt,
                envelope=envelope.body,
            )
        return [DELIVERED] * len(batch)

    def not_ready_reason(self) -> str | None:
        return None

    async def close(self) -> None:
        """Nothing to release."""
