"""Shared fixtures: one behavioural suite over fakeredis (with lupa, so Lua runs) and a real
``redis-server`` started on a free loopback port.

A missing ``redis-server`` skips the real half locally and fails when ``CI`` is set
(dramatiq's rule): in CI the real server is required.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
import redis.asyncio as aioredis
from support.binaries import require_binaries

BACKENDS = ["fake", "real"]


def free_port() -> int:
    """Return a TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A real redis-server process on loopback, owned by the test session."""

    port: int
    dir: Path
    args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--loglevel",
            "warning",
            *self.args,
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=self.port, socket_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self) -> None:
        """Stop the server and remove its working directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)


def require_redis_server() -> str:
    """Return the redis-server path; skip locally, fail in CI, when it is missing."""
    return require_binaries("redis-server")["redis-server"]


def start_redis_server(*args: str) -> RedisServer:
    """Start a fresh redis-server on a free loopback port (caller stops it)."""
    require_redis_server()
    server = RedisServer(port=free_port(), dir=Path(tempfile.mkdtemp(prefix="relayd-redis-")), args=args)
    server.start()
    return server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the whole session (per xdist worker); tests isolate by prefix."""
    server = start_redis_server()
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
