"""The ``sqs`` sink's baseline: aiobotocore alone sending the same bodies (``publish``).

What the sink's client must do at the least: one client, SendMessageBatch of 10 with the same
message attributes (and FIFO group and deduplication ids on a FIFO queue), as many requests in
flight as the sink's lanes, and every entry counted only when the reply lists it as successful.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

import orjson
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from relayd.sinks.aws.entries import QUEUE_MAX_ENTRIES, fifo_token
from relayd.sinks.aws.sink import LANES
from relayd.sinks.aws.target import parse_aws_target

#: Requests in flight at once: the sink's lanes.
IN_FLIGHT: Final = LANES


async def publish(spec: str, bodies: Sequence[bytes], keys: Sequence[str | None]) -> int:
    """Send every body to the spec's queue; return how many the replies listed as successful."""
    target = parse_aws_target("sqs", spec.removeprefix("sqs:"))
    entries: list[dict[str, Any]] = []
    for body, key in zip(bodies, keys, strict=True):
        envelope = orjson.loads(body)
        entry: dict[str, Any] = {
            "MessageBody": body.decode(),
            "MessageAttributes": {
                "relayd-id": {"DataType": "String", "StringValue": envelope["id"]},
                "relayd-kind": {"DataType": "String", "StringValue": envelope["kind"]},
            },
        }
        if target.fifo:
            entry["MessageGroupId"] = fifo_token(key or envelope["id"])
            entry["MessageDeduplicationId"] = fifo_token(envelope["id"])
        entries.append(entry)
    requests = [entries[i : i + QUEUE_MAX_ENTRIES] for i in range(0, len(entries), QUEUE_MAX_ENTRIES)]
    config = AioConfig(retries={"total_max_attempts": 1}, max_pool_connections=IN_FLIGHT)
    slots = asyncio.Semaphore(IN_FLIGHT)
    async with get_session().create_client(
        "sqs", region_name=target.region, endpoint_url=target.endpoint_url, config=config
    ) as client:

        async def send(request: list[dict[str, Any]]) -> int:
            numbered = [entry | {"Id": str(n)} for n, entry in enumerate(request)]
            async with slots:
                reply = await client.send_message_batch(QueueUrl=target.name, Entries=numbered)
            return len(reply.get("Successful", ()))

        return sum(await asyncio.gather(*(send(request) for request in requests)))
