"""A broker goes away mid-drain while ``relayd sweep`` runs and an engine keeps committing.

Kafka (tansu): every connection is cut by the TCP proxy the broker advertises to its clients.
NATS: the server is stopped and started again on the same port and store directory. While the
broker is away the backlog is held (nothing acked, the backlog gauge above 0) and ``/readyz``
answers 503 naming the sink; when it is back everything is delivered. The ledger is built from
what the broker holds (Kafka's ``relayd-id`` header, JetStream's ``Nats-Msg-Id``) and printed.
"""

from __future__ import annotations

import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from faults.harness import RecordProperty, RelayProcess, sample, seed_backlog
from nats.js.api import StreamConfig
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


def readyz(relay: RelayProcess) -> tuple[int, str]:
    """(status, body) of the relay's /readyz; (0, "") while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{relay.metrics_port}/readyz", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


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


def test_kafka_connection_cut_mid_drain_holds_the_backlog_then_delivers_everything(
    redis_process: RedisServer, kafka_behind_proxy, tmp_path: Path, record_property: RecordProperty
) -> None:
    broker, proxy = kafka_behind_proxy
    prefix, topic = "kcut", "kcut.relay"
    broker.create_topic(topic, partitions=4)
    seeded = seed_backlog(
        redis_process.client(), prefix, outbox=SEEDED_OUTBOX, spawns=300, timers=300, fire_at=time.time() - 60
    )
    workload = Workload(
        RedisStore(redis_process.client(), prefix=prefix), rate_per_s=40, executions=6, seed=4
    )
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", prefix, *RELAY_FLAGS,
            "--sink", f"kafka:{broker.bootstrap}?topic={topic}&timeout_s=3",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip

    relay.start()
    workload.start()
    try:
        seconds_until(lambda: readyz(relay)[0] == 200, 30, "the relay ready")
        seconds_until(lambda: outbox_left(redis_process, prefix) < SEEDED_OUTBOX, 30, "the drain under way")
        proxy.set_mode("cut")
        seconds_until(lambda: readyz(relay)[0] == 503, 30, "/readyz 503 while the broker is cut off")
        status, reason = readyz(relay)
        held = redis_process.client().hlen(f"{prefix}:outbox")
        time.sleep(OUTAGE_S)
        still_held = redis_process.client().hlen(f"{prefix}:outbox")
        gauge = seconds_until(lambda: backlog_gauge(relay, prefix) > 0, 30, "the backlog gauge above 0")
        proxy.set_mode("pass")
        healed = time.monotonic()
        ledger_in = workload.stop()
        committed = [*seeded.committed, *ledger_in.committed]
        seconds_until(
            lambda: set(committed) <= set(kafka_ids(broker, topic)), 120, "everything in the broker"
        )
        recover_s = time.monotonic() - healed
        seconds_until(lambda: readyz(relay)[0] == 200, 30, "/readyz 200 again")
    finally:
        workload.stop()
        relay.stop()

    ledger = compute_ledger("kafka-cut", committed, kafka_ids(broker, topic), recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(
        f"while cut: readyz={status} {reason!r} held={held}->{still_held} gauge_above_0_after_s={gauge:.1f}"
    )
    assert "sink not ready" in reason
    assert "kafka" in reason
    assert still_held >= held > 0, "nothing acked while the broker is cut off"
    assert gauge < 30
    assert_ledger(ledger)


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
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


async def test_nats_server_restarted_mid_drain_holds_the_backlog_then_delivers_everything(
    redis_process: RedisServer, nats_server: NatsServer, tmp_path: Path, record_property: RecordProperty
) -> None:
    prefix = "nstop"
    connection = await nats.connect(nats_server.url)
    await connection.jetstream().add_stream(StreamConfig(name=prefix, subjects=[f"{prefix}.>"]))
    await connection.close()
    seeded = seed_backlog(
        redis_process.client(), prefix, outbox=SEEDED_OUTBOX, spawns=300, timers=300, fire_at=time.time() - 60
    )
    workload = Workload(
        RedisStore(redis_process.client(), prefix=prefix), rate_per_s=40, executions=6, seed=5
    )
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", prefix, *RELAY_FLAGS,
            "--sink", f"nats:{nats_server.url}?subject={prefix}.{{kind}}.{{target}}&timeout_s=3",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip

    relay.start()
    workload.start()
    try:
        seconds_until(lambda: readyz(relay)[0] == 200, 30, "the relay ready")
        seconds_until(lambda: outbox_left(redis_process, prefix) < SEEDED_OUTBOX, 30, "the drain under way")
        nats_server.stop()
        seconds_until(lambda: readyz(relay)[0] == 503, 30, "/readyz 503 while the server is down")
        status, reason = readyz(relay)
        held = redis_process.client().hlen(f"{prefix}:outbox")
        time.sleep(OUTAGE_S)
        still_held = redis_process.client().hlen(f"{prefix}:outbox")
        gauge = seconds_until(lambda: backlog_gauge(relay, prefix) > 0, 30, "the backlog gauge above 0")
        nats_server.start()
        healed = time.monotonic()
        ledger_in = workload.stop()
        committed = [*seeded.committed, *ledger_in.committed]
        deadline = time.monotonic() + 120
        delivered = await nats_ids(nats_server, prefix)
        while not set(committed) <= set(delivered) and time.monotonic() < deadline:
            time.sleep(0.5)
            delivered = await nats_ids(nats_server, prefix)
        recover_s = time.monotonic() - healed
        seconds_until(lambda: readyz(relay)[0] == 200, 30, "/readyz 200 again")
    finally:
        workload.stop()
        relay.stop()

    ledger = compute_ledger("nats-restart", committed, delivered, recover_s=recover_s)
    report_ledger(ledger, record_property)
    print(
        f"while down: readyz={status} {reason!r} held={held}->{still_held} gauge_above_0_after_s={gauge:.1f}"
    )
    assert "sink not ready" in reason
    assert "nats" in reason
    assert still_held >= held > 0, "nothing acked while the server is down"
    assert gauge < 30
    assert_ledger(ledger, max_duplicates=0)  # Nats-Msg-Id: JetStream keeps one of each
