"""Operational events (``--events-sink SPEC``): a CloudEvent for each thing an operator is told.

    dev.relayd.sink.breaker.opened       a sink's breaker opened (subject: the sink)
    dev.relayd.sink.breaker.half_opened  its cool-down is over: a probe goes
    dev.relayd.sink.breaker.closed       the sink answers again
    dev.relayd.entry.dead_lettered       an entry was parked (subject: its id)
    dev.relayd.paused                    an operator's pause took effect (subject: the prefix)
    dev.relayd.resumed                   and was lifted
    dev.relayd.lease.acquired            this replica took a prefix over (subject: the prefix)
    dev.relayd.secret.refused            a changed secret or certificate file was refused

Each is a structured CloudEvent (``specversion`` 1.0, ``id``, ``source`` ``relayd://HOST``,
``type``, ``subject``, ``time``, ``datacontenttype`` and ``data``), handed to the events sink as
the JSON of an envelope of its own; any sink spec works, always in relayd's own format (the
event is the body). The events never slow or block delivery: ``emit`` only appends to a bounded
queue (``MAX_QUEUED``) and returns; one task sends what is queued, a batch at a time, each call
bounded by ``SEND_TIMEOUT_S``. What does not fit, fails or times out is dropped and counted
(``relayd_events_total{outcome}``). The events sink has no breaker, so nothing about it becomes
an event: nothing is fed back into itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import Final

import structlog
from prometheus_client import Counter

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.sinks.base import DELIVERED, Sink

log = structlog.get_logger(__name__)

#: Events waiting to be sent at most; a newer one that does not fit is dropped.
MAX_QUEUED: Final = 1000
#: Events handed to the sink in one call at most.
BATCH: Final = 100
#: Longest one call to the events sink may take (seconds) before its events are dropped.
SEND_TIMEOUT_S: Final = 10.0


class OperationalEvents:
    """The queue and the sender of one process's operational events."""

    def __init__(self, sink: Sink, counter: Counter) -> None:
        self.sink = sink
        self.counter = counter
        self.source = f"relayd://{socket.gethostname()}"
        self._queue: deque[Envelope] = deque()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        for outcome in ("sent", "dropped", "failed"):
            counter.labels(outcome)

    def emit(self, type_: str, subject: str, data: dict[str, object]) -> None:
        """Queue one event; never waits (dropped and counted when the queue is full)."""
        if len(self._queue) >= MAX_QUEUED:
            self.counter.labels("dropped").inc()
            return
        event_id = str(uuid.uuid4())
        body: dict[str, object] = {
            "specversion": "1.0",
            "id": event_id,
            "source": self.source,
            "type": f"dev.relayd.{type_}",
            "subject": subject,
            "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "datacontenttype": "application/json",
            "data": data,
        }
        self._queue.append(Envelope(event_id, "outbox", "", 1, body))
        self._ready.set()
        if self._task is None:
            with contextlib.suppress(RuntimeError):  # no running loop: sent once one runs
                self._task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        started_sink = False
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                started = time.monotonic()
                try:
                    async with asyncio.timeout(SEND_TIMEOUT_S):
                        if not started_sink:  # a sink that cannot start fails its events, not the relay
                            await self.sink.start()
                            started_sink = True
                        outcomes = await self.sink.deliver(Batch.of(batch))
                except Exception as exc:  # the events sink failing must never reach delivery
                    self.counter.labels("failed").inc(len(batch))
                    log.warning("events_failed", count=len(batch), error=type(exc).__name__)
                    continue
                sent = sum(1 for outcome in outcomes if outcome == DELIVERED)
                self.counter.labels("sent").inc(sent)
                if sent < len(batch):
                    self.counter.labels("failed").inc(len(batch) - sent)
                log.debug("events_sent", count=sent, duration_s=round(time.monotonic() - started, 6))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        with contextlib.suppress(Exception):
            await self.sink.close()


_current: OperationalEvents | None = None


def install(events: OperationalEvents | None) -> None:
    """Make ``events`` the process's emitter (None: events are off)."""
    global _current  # noqa: PLW0603 - one emitter per process, as ``relayd.observability.inflight.DELIVERIES``
    _current = events


def emit(type_: str, subject: str, **data: object) -> None:
    """Queue an operational event when an events sink is configured; else nothing."""
    if _current is not None:
        _current.emit(type_, subject, dict(data))
