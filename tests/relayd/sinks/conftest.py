"""Envelope builders for the sink tests, written from docs/sinks.md (independent of the engine's)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
from support.tls import tls_redis_server

from relayd.envelope import Envelope
from relayd.envelope.batch import Batch
from relayd.sinks import Outcome, Sink
from relayd.sinks.testing import outbox_envelope

SinkT = TypeVar("SinkT", bound=Sink)

# a fixture imported into a conftest is registered for the tests below it
__all__ = ["tls_redis_server"]

RELAYED_AT = 1_700_000_000.0


def outbox(prefix: str, seq: int, target: str | None, event: dict[str, Any] | None = None) -> Envelope:
    """An outbox envelope for ``seq`` to ``target`` (the contract suite's); ``event`` replaces its event."""
    envelope = outbox_envelope(prefix, seq, target)
    if event is not None:
        envelope.body["event"] = event
    return envelope


def timer(prefix: str, execution_id: str, path: str, fire_at: float) -> Envelope:
    """A timer envelope whose event is the engine's Timeout (docs/sinks.md)."""
    event_id = f"timeout:{execution_id}:{path}:{fire_at}"
    body: dict[str, object] = {
        "v": "relayd/1",
        "kind": "timer",
        "id": event_id,
        "prefix": prefix,
        "attempt": 1,
        "relayed_at": RELAYED_AT,
        "execution_id": execution_id,
        "path": path,
        "fire_at": fire_at,
        "event": {"id": event_id, "kind": "Timeout", "data": {"path": path, "fire_at": fire_at}},
    }
    return Envelope(id=event_id, kind="timer", prefix=prefix, attempt=1, body=body, ordering_key=execution_id)


def spawn(
    prefix: str, seq: int, parent: str, child: str, *, root_path: str, context: dict[str, Any]
) -> Envelope:
    """A spawn envelope: ``parent`` asks for ``child`` running ``root_path``."""
    id_ = f"{prefix}:spawn:{seq}"
    body: dict[str, object] = {
        "v": "relayd/1",
        "kind": "spawn",
        "id": id_,
        "prefix": prefix,
        "attempt": 1,
        "relayed_at": RELAYED_AT,
        "seq": seq,
        "parent_id": parent,
        "child_id": child,
        "root_path": root_path,
        "context": context,
    }
    return Envelope(id=id_, kind="spawn", prefix=prefix, attempt=1, body=body, ordering_key=child)


@pytest.fixture
def hprefix(prefix: str) -> str:
    """The per-test prefix (already a harel-valid identifier)."""
    return prefix


def kind_runs(envelopes: list[Envelope]) -> list[Batch]:
    """``envelopes`` cut into batches of one kind each, in order (a sink gets one kind per call)."""
    runs: list[list[Envelope]] = []
    for envelope in envelopes:
        if runs and runs[-1][0].kind == envelope.kind:
            runs[-1].append(envelope)
        else:
            runs.append([envelope])
    return [Batch.of(run) for run in runs]


async def deliver_runs(sink: Sink, envelopes: list[Envelope]) -> list[Outcome]:
    """Deliver ``envelopes`` one kind-run at a time (``kind_runs``); every outcome, in order."""
    return [outcome for run in kind_runs(envelopes) for outcome in await sink.deliver(run)]


@pytest.fixture
async def started() -> AsyncIterator[Callable[[SinkT], Awaitable[SinkT]]]:
    """Start a sink for the test and close it afterwards (every sink the test started)."""
    sinks: list[Sink] = []

    async def start(sink: SinkT) -> SinkT:
        await sink.start()
        sinks.append(sink)
        return sink

    yield start
    for sink in sinks:
        await sink.close()
