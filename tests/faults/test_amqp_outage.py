"""RabbitMQ stopped and restarted while ``relayd sweep`` drains into it: held, not ready, then delivered.

The engine keeps committing (``Workload``) on top of a seeded backlog, so the relay has work
for the whole outage whatever its speed: the outage is mid-drain by construction, not by
timing. While the broker is down ``/readyz`` must answer 503 naming the amqp sink and why, and
the backlog must hold; after the restart every committed entry must be in the (durable) queue.
The ledger compares committed ids with the ``message_id`` of every message the queue holds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import orjson
import pytest
from faults.harness import RecordProperty, RelayProcess, sample, seed_backlog
from support.harel_backlog import order_violations
from support.health import readyz
from support.ledger import assert_ledger, compute_ledger, report_ledger
from support.rabbitmq import RabbitServer, declare, drain
from support.redis_server import RedisServer
from support.waiting import seconds_until
from support.workload import Workload, stored_ids

from store import RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "mq"


def test_rabbitmq_stopped_and_restarted_mid_drain_loses_nothing(
    redis_process: RedisServer,
    rabbitmq_server: RabbitServer,
    tmp_path: Path,
    record_property: RecordProperty,
) -> None:
    exchange, queue = f"x-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex[:8]}"
    asyncio.run(declare(rabbitmq_server.url, exchange, {queue: "#"}))
    client = redis_process.client()
    seeded = seed_backlog(client, PREFIX, outbox=3000, spawns=300, timers=300, fire_at=time.time() - 60)
    workload = Workload(RedisStore(client, prefix=PREFIX), rate_per_s=40, executions=6, seed=5)
    spec = f"amqp:{rabbitmq_server.url}?exchange={exchange}&routing_key={{kind}}.{{target}}"
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", spec, "--batch", "200",
            "--max-attempts", "1000", "--retry-cap", "1", "--poll-interval", "0.2", "--log-level", "warning",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    arrived: list[dict[str, object]] = []

    def take() -> int:
        got = [
            (m.message_id, orjson.loads(m.body))
            for m in asyncio.run(drain(rabbitmq_server.url, queue, limit=1000))
        ]
        assert all(message_id == envelope["id"] for message_id, envelope in got)
        arrived.extend(envelope for _, envelope in got)
        return len(got)

    workload.start()
    relay.start()
    try:
        seconds_until(lambda: take() > 0, 60, "first messages in the queue")
        rabbitmq_server.stop()
        down_for = time.monotonic()
        seconds_until(
            lambda: readyz(relay.metrics_port)[0] == 503, 30, "/readyz 503 while the broker is down"
        )
        status, reason = readyz(relay.metrics_port)
        # the workload commits about 40 events a second: they pile up while the broker is down
        seconds_until(
            lambda: client.hlen(f"{PREFIX}:outbox") >= 20, 30, "outbox entries held during the outage"
        )
        held = client.hlen(f"{PREFIX}:outbox")
        backlog_gauge = sample(relay.metrics(), "relayd_backlog_entries", prefix=PREFIX, kind="outbox")
        rabbitmq_server.start()
        down_s = time.monotonic() - down_for
        ledger_in = workload.stop()
        committed = [*seeded.committed, *ledger_in.committed]
        delivered_ids = lambda: {str(e["id"]) for e in arrived}  # noqa: E731
        seconds_until(
            lambda: take() >= 0 and set(committed) <= delivered_ids(), 120, "every entry in the queue"
        )
        recovered_s = time.monotonic() - down_for - down_s
        seconds_until(lambda: readyz(relay.metrics_port)[0] == 200, 30, "/readyz 200 after the restart")
    finally:
        workload.stop()
        relay.stop()
        if rabbitmq_server.proc is None:
            rabbitmq_server.start()  # the session's broker stays up for the next test

    ledger = compute_ledger("amqp-restart", committed, (str(e["id"]) for e in arrived), recover_s=recovered_s)
    report_ledger(ledger, record_property)
    print(f"amqp outage: down {down_s:.1f}s, held {held} entries, readyz {status} {reason!r}")
    assert_ledger(ledger)
    assert status == 503
    assert "amqp" in reason
    assert "connection" in reason or "unreachable" in reason
    assert held >= 20
    assert backlog_gauge is not None
    assert order_violations(arrived) == []
    assert stored_ids(client, PREFIX) == set()
