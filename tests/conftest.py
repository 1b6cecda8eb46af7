"""Shared fixtures: one behavioural suite over fakeredis (with lupa, so Lua runs) and a real
``redis-server`` started on a free loopback port.

A missing ``redis-server`` skips the real half locally; under ``CI`` every skip is a failure
(``support.ci_rules``, loaded below): in CI the real server is required.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis
import structlog
from support.kafka import KafkaBroker, start_kafka
from support.moto import MotoServer, start_moto
from support.nats import NatsServer, start_nats
from support.pubsub import PubSubEmulator, start_pubsub
from support.rabbitmq import RabbitServer, start_rabbitmq
from support.redis_server import RedisServer, start_redis_server

pytest_plugins = ["support.ci_rules"]

BACKENDS = ["fake", "real"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the whole session (per xdist worker); tests isolate by prefix."""
    server = start_redis_server()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def rabbitmq_server() -> Iterator[RabbitServer]:
    """One RabbitMQ node for the session (per xdist worker; it boots in seconds); tests isolate by
    exchange and queue names. A test that stops it starts it again before it ends."""
    server = start_rabbitmq()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto server (SQS, SNS, Kinesis) for the session; tests isolate by queue, topic and
    stream names. A test that stops it starts it again before it ends (empty: moto keeps nothing)."""
    server = start_moto()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[PubSubEmulator]:
    """One Pub/Sub emulator for the session; tests isolate by topic."""
    emulator = start_pubsub()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """One Kafka-protocol broker (tansu) for the session (per xdist worker); tests isolate by topic."""
    broker = start_kafka()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """One nats-server with JetStream for the session (per xdist worker); tests isolate by stream."""
    server = start_nats()
    yield server
    server.cleanup()


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A redis-server owned by one test, for tests that stop, restart or break it."""
    server = start_redis_server()
    yield server
    server.cleanup()


@pytest.fixture
def prefix() -> str:
    """A unique key prefix per test (an identifier, so harel accepts it too)."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which Redis the test runs against: ``fake`` (fakeredis + lupa) or ``real``."""
    return str(request.param)


@pytest.fixture
def fake_server() -> fakeredis.FakeServer:
    return fakeredis.FakeServer()


@pytest.fixture
def sync_client(backend: str, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A sync redis-py client on the parametrised backend."""
    if backend == "real":
        server: RedisServer = request.getfixturevalue("redis_server")
        client = server.client()
    else:
        client = fakeredis.FakeRedis(server=request.getfixturevalue("fake_server"))
    yield client
    client.close()


@pytest.fixture
async def async_client(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[aioredis.Redis]:
    """An asyncio redis-py client on the parametrised backend (same server as ``sync_client``)."""
    if backend == "real":
        server: RedisServer = request.getfixturevalue("redis_server")
        client = aioredis.Redis(port=server.port)
    else:
        client = fakeredis.FakeAsyncRedis(server=request.getfixturevalue("fake_server"))
    yield client
    await client.aclose()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """A test that runs a CLI command (which configures logging) leaves logging as it found it,
    so later tests' ``capture_logs`` still sees debug lines."""
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
