"""An in-process long-running relay for engine tests: ``run_relay`` in a task, one sink for all."""

from __future__ import annotations

import asyncio
from typing import Any

from relayd.engine.loop import RunSummary, run_relay
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import Sink


def start_relay(
    options: SweepOptions,
    client: Any,
    sink: Sink,
    *,
    metrics: RelayMetrics,
    health: Health,
    stop: asyncio.Event,
) -> asyncio.Task[RunSummary]:
    """Start ``run_relay`` over ``client`` with ``sink`` for every kind; set ``stop`` to end it."""
    sinks = dict.fromkeys(KINDS, sink)
    return asyncio.create_task(
        run_relay(options, redis=client, sinks=sinks, metrics=metrics, health=health, stop=stop)
    )
