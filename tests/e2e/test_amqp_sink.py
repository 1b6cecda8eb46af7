"""``relayd sweep --once --sink amqp:...`` drains a backlog harel committed into a real RabbitMQ."""

from __future__ import annotations

import asyncio
import uuid

import orjson
from support.harel_backlog import assert_backlog_empty, commit_harel_backlog, order_violations
from support.rabbitmq import RabbitServer, declare, drain
from support.redis_server import RedisServer

from tests.e2e.conftest import run_relayd


def test_sweep_once_publishes_a_harel_backlog_in_per_queue_order_and_empties_it(
    redis_server: RedisServer, rabbitmq_server: RabbitServer, prefix: str
) -> None:
    client = redis_server.client()
    backlog = commit_harel_backlog(client, prefix, executions=40, emits=6)
    exchange, stem = f"x-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex[:8]}"
    queues = {f"{stem}-{kind}": f"{prefix}.{kind}.#" for kind in ("outbox", "spawn", "timer")}
    asyncio.run(declare(rabbitmq_server.url, exchange, queues))
    spec = f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key={{prefix}}.{{kind}}.{{target}}"

    result = run_relayd(
        "sweep",
        "--once",
        "--redis-url",
        redis_server.url,
        "--prefix",
        prefix,
        "--sink",
        spec,
        "--batch",
        "100",
    )

    assert result.returncode == 0, result.stderr[-2000:]
    received = {queue: asyncio.run(drain(rabbitmq_server.url, queue)) for queue in queues}
    for queue, messages in received.items():
        kind = queue.rsplit("-", 1)[1]
        envelopes = [orjson.loads(m.body) for m in messages]
        assert [e["id"] for e in envelopes] == [m.message_id for m in messages]
        assert {e["kind"] for e in envelopes} == {kind}
        assert {e["v"] for e in envelopes} == {"relayd/1"}
        assert sorted(m.message_id or "" for m in messages) == sorted(backlog.of_kind(kind))
        assert order_violations(envelopes) == []
    outbox = [orjson.loads(m.body) for m in received[f"{stem}-outbox"]]
    assert [e["seq"] for e in outbox] == sorted(e["seq"] for e in outbox)  # one queue: seq order
    assert_backlog_empty(client, backlog)
