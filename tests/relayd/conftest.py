"""Fixtures for the tests of relayd's modules: a clean environment, logging reset, Redis servers."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from support.ports import free_port
from support.redis_server import start_redis_server


@pytest.fixture
def no_relayd_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own RELAYD_* variables must not change what a test sees (httpx's lesson)."""
    for name in list(os.environ):
        if name.startswith("RELAYD_"):
            monkeypatch.delenv(name)


@pytest.fixture
def reset_logging() -> Iterator[None]:
    """Logging configured by a test (or pointed at CliRunner's stderr) is undone after it."""
    yield
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


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
