"""The nats sink's client baseline: nats-py's own JetStream publishing the same bodies.

One connection; the bodies go in chunks of ``CHUNK`` (the sink never has more than one batch
in flight), each body with ``publish_async`` to the same subject (a template is filled from the
first body and each key) and its ``Nats-Msg-Id``, then the chunk's PubAcks are awaited:
nats-py's documented asynchronous-publish pattern.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson

from relayd.sinks.nats.target import parse_nats_target
from relayd.sinks.routing import fill_targets, fill_template
from relayd.sinks.spec import parse_sink_spec

#: Bodies in flight at once: relayd's default ``--batch``, what the sink has in flight.
CHUNK = 1000


async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int:
    """Publish every body to JetStream and await every PubAck; the number confirmed."""
    import nats

    target = parse_nats_target(parse_sink_spec(spec).target)
    connection = await nats.connect(list(target.servers))
    try:
        stream = connection.jetstream(timeout=target.timeout_s)
        first = orjson.loads(bodies[0]) if bodies else {}
        template = fill_template(
            target.subject, kind=str(first.get("kind", "")), prefix=str(first.get("prefix", ""))
        )
        subjects = fill_targets(template, list(keys))
        confirmed = 0
        for start in range(0, len(bodies), CHUNK):
            futures = [
                await stream.publish_async(
                    subjects[n], bodies[n], headers={"Nats-Msg-Id": orjson.loads(bodies[n])["id"]}
                )
                for n in range(start, min(start + CHUNK, len(bodies)))
            ]
            done, _ = await asyncio.wait(futures, timeout=target.timeout_s)
            confirmed += sum(1 for future in done if future.exception() is None)
        return confirmed
    finally:
        await connection.close()
