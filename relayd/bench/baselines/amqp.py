"""The ``amqp`` sink's baseline: aiormq alone publishing the same bodies, confirmed (``publish``).

What the sink's own client must do at the least: one connection, one confirm channel, every
body a persistent ``mandatory`` message with its ``message_id``, a batch's publishes in flight
together (the relay's default batch size) and all their confirms awaited, batch after batch.
The routing key is the spec's template filled in for each body, as the sink fills it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

import aiormq
import orjson
from aiormq import spec as amqp_spec

from relayd.security.tls import verified_context
from relayd.sinks.amqp.options import AmqpOptions
from relayd.sinks.amqp.target import parse_amqp_target
from relayd.sinks.base import SinkOptions
from relayd.sinks.routing import fill

#: Publishes in flight at once: the relay's default ``--batch``.
IN_FLIGHT: Final = 1000


async def publish(
    spec: str, bodies: Sequence[bytes], keys: Sequence[str | None], options: SinkOptions
) -> int:
    """Publish every body to the spec's exchange with confirms; return how many were acked."""
    target = parse_amqp_target(spec.removeprefix("amqp:"))
    own = options.own_options(AmqpOptions)
    ca_file = str(own.ca_file) if own.ca_file is not None else None
    context = verified_context(ca_file=ca_file) if target.tls else None
    password = own.password.value if own.password is not None else None
    connection = aiormq.Connection(target.connection_url(password), context=context)
    connection.vhost = target.vhost
    await connection.connect()
    acked = 0
    try:
        channel = await connection.channel(publisher_confirms=True)
        for start in range(0, len(bodies), IN_FLIGHT):
            chunk = bodies[start : start + IN_FLIGHT]
            routing, ids = [], []
            for body, key in zip(chunk, keys[start : start + IN_FLIGHT], strict=True):
                envelope = orjson.loads(body)
                routing.append(
                    fill(target.routing_key, target=key, kind=envelope["kind"], prefix=envelope["prefix"])
                )
                ids.append(envelope["id"])
            replies = await asyncio.gather(
                *(
                    channel.basic_publish(
                        body,
                        exchange=target.exchange,
                        routing_key=routing_key,
                        properties=amqp_spec.Basic.Properties(
                            content_type="application/json", delivery_mode=2, message_id=entry_id
                        ),
                        mandatory=True,
                    )
                    for body, routing_key, entry_id in zip(chunk, routing, ids, strict=True)
                )
            )
            acked += sum(isinstance(reply, amqp_spec.Basic.Ack) for reply in replies)
    finally:
        await connection.close()
    return acked
