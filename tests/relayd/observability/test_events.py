"""relayd.observability.events: the operational events' sender never fails the relay."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter

from relayd.observability.events import OperationalEvents
from relayd.sinks.memory import MemorySink


class _RefusingOnce(MemorySink):
    """A sink whose first ``start`` is refused (its receiver not up yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1
        if self.starts == 1:
            raise OSError("refused")


async def test_a_sink_that_cannot_start_fails_its_events_and_is_started_again_later() -> None:
    """The first batch is counted failed; the next event starts the sink and is sent; close()
    raises nothing."""
    registry = CollectorRegistry()
    counter = Counter("relayd_events", "events", ["outcome"], registry=registry)
    sink = _RefusingOnce()
    events = OperationalEvents(sink, counter)

    events.emit("breaker.opened", "webhook", {"n": 1})
    for _ in range(100):
        await asyncio.sleep(0)
    events.emit("breaker.closed", "webhook", {"n": 2})
    for _ in range(100):
        await asyncio.sleep(0)
    await events.close()

    assert registry.get_sample_value("relayd_events_total", {"outcome": "failed"}) == 1
    assert registry.get_sample_value("relayd_events_total", {"outcome": "sent"}) == 1
    assert sink.starts == 2
    assert [e.body["type"] for e in sink.delivered] == ["dev.relayd.breaker.closed"]
