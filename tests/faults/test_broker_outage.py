"""A broker goes away mid-drain while ``relayd sweep`` runs and an engine keeps committing.

Kafka (tansu): every connection is cut by the TCP proxy the broker advertises to its clients.
NATS: the server is stopped and started again on the same port and store directory. While the
broker is away the backlog is held (nothing acked, the backlog gauge above 0) and ``/readyz``
answers 503 naming the sink; when it is back everything is delivered. The ledger is built from
what the broker holds (Kafka's ``relayd-id`` header, JetStream's ``Nats-Msg-Id``) and printed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from faults.harness import RecordProperty, RelayProcess, sample, seed_backlog
from nats.js.api import StreamConfig
from support.health import readyz
from support.kafka import KafkaBroker, start_kafka
from support.ledger import assert_ledger, compute_ledger, report_ledger
from support.nats import NatsServer, start_nats
from support.ports import pick_ports
from support.proxy import TcpProxy
from support.redis_server import RedisServer
from support.waiting import seconds_until
from support.workload import Workload

from store import RedisStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: Seconds the broker stays away once the relay has noticed.
OUTAGE_S = 4.0
SEEDED_OUTBOX = 20_000
RELAY_FLAGS = ("--batch", "100", "--max-attempts", "1000", "--retry-cap", "1", "--poll-interval", "0.2")


def outbox_left(server: RedisServer, prefix: str) -> int:
    return int(server.client().hlen(f"{prefix}:outbox"))


def backlog_gauge(relay: RelayProcess, prefix: str) -> float:
    return sample(relay.metrics(), "relayd_backlog_entries", prefix=prefix, kind="outbox") or 0.0


@pytest.fixture
def kafka_behind_proxy() -> Iterator[tuple[KafkaBroker, TcpProxy]]:
    """tansu advertising the proxy's port, so every client connection (metadata too) goes through it."""
    port = pick_ports(1, random.Random())[0]
    with TcpProxy(port) as proxy:
        broker = start_kafka(port=port, advertised_port=proxy.port)
        yield broker, proxy
        broker.stop()


def kafka_ids(broker: KafkaBroker, topic: str) -> list[str]:
    return [dict(r.headers())["relayd-id"].decode() for r in broker.read_topic(topic)]


@dataclass(frozen=True)
class Outage:
    """How one broker is taken away and brought back, and what it holds."""

    name: str
    sink: str  # the sink spec
    cut: Callable[[], None]
    heal: Callable[[], None]
    delivered: Callable[[], list[str]]  # the dedupe ids the broker holds


def drain_through(
    outage: Outage,
    redis_process: RedisServer,
    prefix: str,
    tmp_path: Path,
    record_property: RecordProperty,
    *,
    seed: int,
    max_duplicates: int | None = None,
) -> None:
    """Seed a backlog, run ``relayd sweep`` with an engine committing, cut the broker mid-drain,
    check the backlog is held and ``/readyz`` says why, heal it, and check the ledger."""
    seeded = seed_backlog(
        redis_process.client(), prefix, outbox=SEEDED_OUTBOX, spawns=300, timers=300, fire_at=time.time() - 60
    )
    workload = Workload(
        RedisStore(redis_process.client(), prefix=prefix), rate_per_s=40, executions=6, seed=seed
    )
    relay = RelayProcess(
        ["--redis-url", redis_process.url, "--prefix", prefix, *RELAY_FLAGS, "--sink", outage.sink],
        tmp_path / "relay.log",
    )
    relay.start()
    workload.start()
    try:
        seconds_until(lambda: readyz(relay.metrics_port)[0] == 200, 30, "the relay ready")
        seconds_until(lambda: outbox_left(redis_process, prefix) < SEEDED_OUTBOX, 30, "the drain under way")
        outage.cut()
        seconds_until(
            lambda: readyz(relay.metrics_port)[0] == 503, 30, "/readyz 503 while the broker is away"
        )
        status, reason = readyz(relay.metrics_port)
        held = outbox_left(redis_process, prefix)
        time.sleep(OUTAGE_S)
        still_held = outbox_left(redis_process, prefix)
        gauge = seconds_until(lambda: backlog_gauge(relay, prefix) > 0, 30, "the backlog gauge above 0")
        outage.heal()
        healed = time.monotonic()
        ledger_in = workload.stop()
        committed = [*seeded.committed, *ledger_in.committed]
        seconds_until(lambda: set(committed) <= set(outage.delivered()), 120, "everything in the broker")
        recover_s = time.monotonic() - healed
        seconds_until(lambda: readyz(relay.metrics_port)[0] == 200, 30, "/readyz 200 again")
    finally:
        workload.stop()
        relay.stop()

    ledger = compute_ledger(outage.name, committed, outage.delivered(), recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(
        f"while away: readyz={status} {reason!r} held={held}->{still_held} gauge_above_0_after_s={gauge:.1f}"
    )
    assert "sink not ready" in reason or " open since " in reason  # the sink's own word, or its breaker's
    assert outage.sink.partition(":")[0] in reason
    assert still_held >= held > 0, "nothing acked while the broker is away"
    assert gauge < 30
    assert_ledger(ledger, max_duplicates=max_duplicates)


def test_kafka_connection_cut_mid_drain_holds_the_backlog_then_delivers_everything(
    redis_process: RedisServer, kafka_behind_proxy, tmp_path: Path, record_property: RecordProperty
) -> None:
    broker, proxy = kafka_behind_proxy
    topic = "kcut.relay"
    broker.create_topic(topic, partitions=4)
    outage = Outage(
        "kafka-cut",
        f"kafka:{broker.bootstrap}?topic={topic}&timeout_s=3",
        cut=lambda: proxy.set_mode("cut"),
        heal=lambda: proxy.set_mode("pass"),
        delivered=lambda: kafka_ids(broker, topic),
    )

    drain_through(outage, redis_process, "kcut", tmp_path, record_property, seed=4)


@pytest.fixture
def own_nats_server() -> Iterator[NatsServer]:
    """A nats-server owned by this test, which stops and starts it."""
    server = start_nats()
    yield server
    server.cleanup()


async def nats_ids(server: NatsServer, stream: str) -> list[str]:
    connection = await nats.connect(server.url)
    try:
        js = connection.jetstream()
        info = await js.stream_info(stream)
        return [
            (await js.get_msg(stream, seq)).headers["Nats-Msg-Id"]
            for seq in range(1, info.state.last_seq + 1)
        ]
    finally:
        await connection.close()


def test_nats_server_restarted_mid_drain_holds_the_backlog_then_delivers_everything(
    redis_process: RedisServer, own_nats_server: NatsServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    prefix = "nstop"
    asyncio.run(add_stream(own_nats_server, prefix))
    outage = Outage(
        "nats-restart",
        f"nats:{own_nats_server.url}?subject={prefix}.{{kind}}.{{target}}&timeout_s=3",
        cut=own_nats_server.stop,
        heal=own_nats_server.start,
        delivered=lambda: asyncio.run(nats_ids(own_nats_server, prefix)),
    )

    # Nats-Msg-Id: JetStream keeps one of each, so no duplicate may reach the stream
    drain_through(outage, redis_process, prefix, tmp_path, record_property, seed=5, max_duplicates=0)


async def add_stream(server: NatsServer, stream: str) -> None:
    connection = await nats.connect(server.url)
    try:
        await connection.jetstream().add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    finally:
        await connection.close()
