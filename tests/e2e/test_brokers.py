"""``relayd sweep --once`` into a real Kafka-protocol broker (tansu) and a real NATS JetStream.

A backlog committed by harel's own store (events to many targets, spawns, due and future
timers) is drained; the consumer side holds every due envelope once, as its relayd/1 JSON with
its dedupe id (Kafka header ``relayd-id``, NATS ``Nats-Msg-Id``), in per-target order (per
partition, per subject); the backlog is empty and the exit code 0.
"""

from __future__ import annotations

from collections import defaultdict

import nats
import orjson
import pytest
from nats.js.api import StreamConfig
from support.harel_backlog import assert_backlog_empty, assert_relayed, commit_harel_backlog, order_violations

from tests.e2e.conftest import run_relayd

pytestmark = pytest.mark.slow


def test_sweep_once_drains_a_harel_backlog_into_kafka(redis_server, kafka_broker, prefix):
    client = redis_server.client()
    backlog = commit_harel_backlog(client, prefix)
    kafka_broker.create_topic(f"{prefix}.relay", partitions=4)

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
        "--sink", f"kafka:{kafka_broker.bootstrap}?topic={{prefix}}.relay", "--batch", "200",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-2000:]
    records = kafka_broker.read_topic(f"{prefix}.relay", len(backlog.due))
    assert_relayed(
        prefix,
        backlog,
        [r.value() for r in records],
        [dict(r.headers())["relayd-id"].decode() for r in records],
    )
    per_partition: dict[int, list[dict[str, object]]] = defaultdict(list)
    for record in records:
        envelope = orjson.loads(record.value())
        assert dict(record.headers())["relayd-kind"].decode() == envelope["kind"]
        per_partition[record.partition()].append(envelope)
    assert len(per_partition) > 1, "targets spread over the partitions"
    assert [wrong for stream in per_partition.values() for wrong in order_violations(stream)] == []
    assert_backlog_empty(client, backlog)
    client.close()


async def test_sweep_once_drains_a_harel_backlog_into_nats_jetstream(redis_server, nats_server, prefix):
    client = redis_server.client()
    backlog = commit_harel_backlog(client, prefix)
    connection = await nats.connect(nats_server.url)
    js = connection.jetstream()
    await js.add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))

    result = run_relayd(
        "sweep", "--once", "--redis-url", redis_server.url, "--prefix", prefix,
        "--sink", f"nats:{nats_server.url}?subject={{prefix}}.{{kind}}.{{target}}", "--batch", "200",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-2000:]
    info = await js.stream_info(prefix)
    messages = [await js.get_msg(prefix, seq) for seq in range(1, info.state.last_seq + 1)]
    await connection.close()
    assert_relayed(prefix, backlog, [m.data for m in messages], [m.headers["Nats-Msg-Id"] for m in messages])
    per_subject: dict[str, list[dict[str, object]]] = defaultdict(list)
    for message in messages:
        envelope = orjson.loads(message.data)
        target = envelope.get("target_id", envelope.get("child_id", envelope.get("execution_id"))) or "_"
        assert message.subject == f"{prefix}.{envelope['kind']}.{target}"
        per_subject[message.subject].append(envelope)
    assert [wrong for stream in per_subject.values() for wrong in order_violations(stream)] == []
    assert_backlog_empty(client, backlog)
    client.close()
