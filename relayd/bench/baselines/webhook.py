"""The webhook baseline: a plain aiohttp client POSTing the same bodies at the sink's concurrency.

The same requests the sink sends (body, ``Content-Type``, ``Idempotency-Key`` and, with a
signing secret, the signature headers), ``--webhook-concurrency`` in flight over one
keep-alive pool, no per-key order: the least an HTTP client must do to deliver these bodies.
A 2xx answer counts as confirmed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import aiohttp
import orjson

from relayd.sinks.base import SinkOptions
from relayd.sinks.webhook.http_policy import sign
from relayd.sinks.webhook.options import WebhookOptions


async def publish(
    spec: str, bodies: Sequence[bytes], keys: Sequence[str | None], options: SinkOptions
) -> int:
    """POST every body to the spec's URL; return how many got a 2xx answer."""
    del keys  # a raw client keeps no order
    url = spec.partition(":")[2]
    own = options.own_options(WebhookOptions)
    secret = own.secrets.value[0] if own.secrets is not None and own.secrets.value else None
    concurrency = own.concurrency
    next_index = 0
    confirmed = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal next_index, confirmed
            while next_index < len(bodies):
                body = bodies[next_index]
                next_index += 1
                headers = {"Content-Type": "application/json", "Idempotency-Key": _id_of(body)}
                if secret is not None:
                    timestamp_s = int(time.time())
                    headers["X-Relayd-Timestamp"] = str(timestamp_s)
                    headers["X-Relayd-Signature"] = sign(secret, timestamp_s, body)
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    confirmed += 200 <= response.status < 300

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return confirmed


def _id_of(body: bytes) -> str:
    """The envelope id (a client sending these bodies knows it; here it is read back)."""
    envelope_id: str = orjson.loads(body)["id"]
    return envelope_id
