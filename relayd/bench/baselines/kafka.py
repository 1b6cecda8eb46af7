"""The kafka sink's client baseline: librdkafka's own producer publishing the same bodies.

The producer is configured as the sink's (``acks=all``, idempotence on, the same bootstrap
servers and topic); the bodies go in chunks of ``CHUNK`` (the sink never has more than one
batch in flight), each with its ordering key as the record key and the same two headers, and
each chunk is flushed: librdkafka's documented produce-then-flush pattern. A new producer per
call, as the bench starts a new sink per relay drain: both pay a producer's start-up
(connection, producer id), so a backlog of 100,000 or more shows the steady state. A topic
template is filled from the first body (``{kind}``, ``{prefix}``) and each key (``{target}``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson

from relayd.sinks.base import SinkOptions
from relayd.sinks.kafka.config import producer_config
from relayd.sinks.kafka.target import parse_kafka_target
from relayd.sinks.routing import fill_targets, fill_template
from relayd.sinks.spec import parse_sink_spec

#: Bodies in flight at once: relayd's default ``--batch``, what the sink has in flight.
CHUNK = 1000


async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int:
    """Produce every body and wait for every delivery report; the number confirmed."""
    from confluent_kafka import Producer

    parsed = parse_sink_spec(spec)
    target = parse_kafka_target(parsed.target)
    producer = Producer(producer_config(parsed, SinkOptions()))
    first = orjson.loads(bodies[0]) if bodies else {}
    template = fill_template(
        target.topic, kind=str(first.get("kind", "")), prefix=str(first.get("prefix", ""))
    )
    confirmed = 0

    def on_delivery(error: object, message: object) -> None:
        nonlocal confirmed
        confirmed += error is None

    topics = fill_targets(template, list(keys))
    for start in range(0, len(bodies), CHUNK):
        for n in range(start, min(start + CHUNK, len(bodies))):
            body = bodies[n]
            envelope = orjson.loads(body)
            headers = [("relayd-id", envelope["id"]), ("relayd-kind", envelope["kind"])]
            producer.produce(topics[n], value=body, key=keys[n], headers=headers, on_delivery=on_delivery)
        await asyncio.to_thread(producer.flush, target.timeout_s)
    return confirmed
