"""Fixtures for the CLI tests: a Redis reachable over TCP on either backend, and a clean env."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from support.redis_server import free_port, start_redis_server

from relayd.demo.embedded import EmbeddedRedis


@pytest.fixture(autouse=True)
def _no_relayd_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own RELAYD_* variables must not change what a test sees (httpx's lesson)."""
    for name in list(os.environ):
        if name.startswith("RELAYD_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """CliRunner points logging at its own stderr, closed after each invoke: undo that per test."""
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


@pytest.fixture
def tcp_fake_redis() -> Iterator[str]:
    """fakeredis (with lupa) served over TCP on a free loopback port; yields its URL."""
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture
def redis_url(backend: str, request: pytest.FixtureRequest) -> str:
    """The URL of a Redis on the parametrised backend: TCP fakeredis or the real server."""
    if backend == "real":
        return str(request.getfixturevalue("redis_server").url)
    return str(request.getfixturevalue("tcp_fake_redis"))


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    return free_port()


@dataclass
class PasswordRedis:
    url: str
    password: str
    port: int


@pytest.fixture
def password_redis(tmp_path: Path) -> Iterator[PasswordRedis]:
    """A real redis-server requiring a password (``right-pw``), owned by one test."""
    server = start_redis_server("--requirepass", "right-pw")
    try:
        yield PasswordRedis(url=server.url, password="right-pw", port=server.port)
    finally:
        server.cleanup()
