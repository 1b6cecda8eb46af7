"""The golden tests' fixed input and their recorded files: what each built-in sink sends, byte for byte.

Every golden test resolves its sink as the relay does (flags through ``load_settings``, then
``resolve_sink`` by the entry-point name), delivers the same four batches (``deliveries``), reads
back what reached the destination, and compares it with its file under ``recorded/``
(``check``). A file is JSON: what was sent, in a stable order, every body as its exact text (or
base64 where it is not UTF-8), so a byte that changes shows in the diff.

What cannot be fixed is normalised in the capture itself, field by field, where each test
reads it back (a server's own ids, ports and times; an order that depends on concurrency);
nothing the sink chose is dropped. The sinks' own clock is ``SinkOptions.clock`` (``CLOCK_S``).

``GOLDEN_RECORD=1`` writes the files from what is sent now instead of comparing, for a change
of the bytes that is meant (docs/development.md); it is refused under ``CI``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
from support import golden

from relayd.config.settings import load_settings
from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelopes, spawn_envelope, timer_envelope
from relayd.sinks import DELIVERED, Sink, SinkOptions, resolve_sink
from store import RawEntry, RawTimer
from store.codec import stamp_commit_time

RECORDED: Final = Path(__file__).with_name("recorded")
#: The variable that makes ``check`` write the files instead of comparing (outside ``RELAYD_*``,
#: which relayd refuses when it does not know a name).

#: The prefix of every entry: it is in the bytes, so it is fixed (servers isolate by other names).
PREFIX: Final = "gold"
#: The stamp of the first delivery and of the retried one (``relayed_at``).
RELAYED_AT: Final = 1_764_446_400.125
RETRIED_AT: Final = 1_764_446_431.5
#: The commit times ``store`` stamped on the outbox entries and the spawn (CloudEvents ``time``).
COMMITTED_AT: Final = 1_764_446_399.75
#: The sinks' clock (``SinkOptions.clock``): the webhook's signature timestamp.
CLOCK_S: Final = 1_764_446_460.25
#: A timer's due time.
FIRE_AT: Final = 1_764_446_410.5
#: W3C trace contexts: one ``store`` recorded at commit, one in an event's data, one on the spawn.
STORED_TRACE: Final = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
DATA_TRACE: Final = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SPAWN_TRACE: Final = "00-1c6b2d2a1b7e4f0e9d8c7b6a59483726-a1b2c3d4e5f60718-00"

#: Every recorded case: ``check`` takes no other name, and ``recorded/`` holds no other file.
CASES: Final = frozenset(
    {
        "webhook",
        "webhook-batch",
        "webhook-standard-signatures",
        "webhook-ed25519",
        "webhook-relayd-signature",
        "webhook-gzip",
        "webhook-headers-file",
        "webhook-oauth2",
        "webhook-proxy",
        "webhook-cloudevents-binary",
        "webhook-cloudevents-structured",
        "webhook-cloudevents-batch",
        "jsonl",
        "jsonl-cloudevents",
        "log",
        "redis-stream",
        "redis-stream-cloudevents",
        "harel",
        "harel-spawn",
        "kafka",
        "kafka-cloudevents-binary",
        "kafka-cloudevents-structured",
        "nats",
        "nats-cloudevents-binary",
        "nats-cloudevents-structured",
        "amqp",
        "amqp-cloudevents-binary",
        "amqp-cloudevents-structured",
        "pubsub",
        "pubsub-cloudevents-binary",
        "pubsub-cloudevents-structured",
        "sqs",
        "sqs-fifo",
        "sqs-claim-check",
        "sqs-cloudevents",
        "sns",
        "kinesis",
        "kinesis-cloudevents",
    }
)


def _outbox_value(target: str | None, event: str, **extra: Any) -> bytes:
    """A stored outbox value as ``store`` writes it: the event as its committed text."""
    return orjson.dumps({"t": target, "e": event, **extra})


def outbox_window() -> Batch:
    """Four outbox entries to two targets and none, read as the drain reads them (a window):
    41 carries the trace context ``store`` recorded at commit, 42 a non-ASCII payload with
    quotes and a backslash, 43 a trace context in its event's data, 44 no target and, as an
    entry harel writes, no commit time. 41's event keeps the spacing it was committed with."""
    entries = [
        RawEntry(
            "41",
            41,
            stamp_commit_time(
                _outbox_value(
                    "order-7",
                    '{"id": "ev-41", "kind": "OrderPlaced", "data": {"amount": 12.5, "currency": "EUR"}}',
                    tc={"traceparent": STORED_TRACE, "tracestate": "gold=1,vendor=x"},
                ),
                COMMITTED_AT,
            ),
        ),
        RawEntry(
            "42",
            42,
            stamp_commit_time(
                _outbox_value(
                    "payment-9",
                    orjson.dumps(
                        {
                            "id": "ev-42",
                            "kind": "Paid",
                            "data": {
                                "note": "Grüße aus Zürich — 東京 🚀",
                                "quote": 'say "hi"',
                                "dir": "C:\\tmp",
                            },
                        }
                    ).decode(),
                ),
                COMMITTED_AT,
            ),
        ),
        RawEntry(
            "43",
            43,
            stamp_commit_time(
                _outbox_value(
                    "order-7",
                    orjson.dumps(
                        {
                            "id": "ev-43",
                            "kind": "Shipped",
                            "data": {"traceparent": DATA_TRACE, "tracestate": "in=data"},
                        }
                    ).decode(),
                ),
                COMMITTED_AT + 0.5,
            ),
        ),
        RawEntry("44", 44, _outbox_value(None, '{"id":"ev-44","kind":"Audit","data":{}}')),
    ]
    window, _, malformed = outbox_envelopes(entries, prefix=PREFIX, attempt=1, relayed_at=RELAYED_AT)
    assert not malformed
    return window


def outbox_retried() -> Batch:
    """The same four entries held for a second attempt: restamped, as a plain list of envelopes."""
    window = outbox_window()
    return Batch.of(
        [window[index].restamped(attempt=2, relayed_at=RETRIED_AT) for index in range(len(window))], "outbox"
    )


SPAWN_CHILD: Final = "order-7:Work.Payment:0"


def spawns() -> Batch:
    """One spawn of ``order-7``'s payment region, with a non-ASCII context and a trace context."""
    value = orjson.dumps(
        {
            "p": "order-7",
            "c": SPAWN_CHILD,
            "r": "Work.Payment",
            "x": {"customer": "Zoë Ñúñez", "items": [1, 2.5, None], "express": True},
            "tc": {"traceparent": SPAWN_TRACE},
        }
    )
    entry = RawEntry("45", 45, stamp_commit_time(value, COMMITTED_AT))
    return Batch.of([spawn_envelope(entry, prefix=PREFIX, attempt=1, relayed_at=RELAYED_AT)])


def timers() -> Batch:
    """One due timer of ``order-7``."""
    timer = RawTimer(b"order-7\x00Work.Payment.AwaitPay", FIRE_AT)
    return Batch.of([timer_envelope(timer, prefix=PREFIX, attempt=1, relayed_at=RELAYED_AT)])


def deliveries() -> list[tuple[str, Batch]]:
    """The batches every golden test delivers, in order, each named."""
    return [
        ("outbox", outbox_window()),
        ("outbox retried", outbox_retried()),
        ("spawn", spawns()),
        ("timer", timers()),
    ]


def sink_options(**flags: Any) -> SinkOptions:
    """The sink options ``relayd`` builds from ``flags`` (as ``load_settings`` names them), with
    the sinks' clock fixed at ``CLOCK_S``."""
    return dataclasses.replace(load_settings(**flags).sink_options(), clock=lambda: CLOCK_S)


async def open_sink(spec: str, **flags: Any) -> Sink:
    """A started sink for ``spec``, resolved by its registered name as the relay resolves it."""
    sink = resolve_sink(spec, sink_options(**flags))
    await sink.start()
    return sink


async def deliver_all(sink: Sink, batches: list[tuple[str, Batch]] | None = None) -> None:
    """Deliver each batch in turn (``deliveries`` by default); each entry must be Delivered."""
    for name, batch in batches if batches is not None else deliveries():
        outcomes = await sink.deliver(batch)
        assert list(outcomes) == [DELIVERED] * len(batch), (name, outcomes)


def payload(data: bytes) -> dict[str, str]:
    """Bytes as the files keep them: ``{"text": ...}`` when UTF-8 (the exact text), else base64."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def render(document: object) -> str:
    """A capture as its recorded file's text."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def check(case: str, document: object) -> None:
    """Compare what was sent (``document``) with ``recorded/<case>.json``; on a difference, fail
    with a unified diff. With ``GOLDEN_RECORD=1``, write the file instead."""
    assert case in CASES, f"{case!r} is not one of the golden CASES"
    shown = f"recorded/{case}.json"
    golden.compare(
        RECORDED / f"{case}.json", render(document), shown=shown, what=f"what golden case {case!r} sends"
    )


@pytest.fixture(autouse=True)
def _without_relayd_env(no_relayd_env: None) -> None:
    """A developer's own ``RELAYD_*`` variables must not change what the sinks send."""
