"""Fixtures for the CLI tests: a Redis reachable over TCP on either backend, and a clean env."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import structlog
from support.binaries import require_binaries

from relayd.embedded import EmbeddedRedis


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    require_binaries("redis-server")
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(tmp_path), "--requirepass", "right-pw", "--loglevel", "warning"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=port, password="right-pw", socket_timeout=0.5).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield PasswordRedis(url=f"redis://127.0.0.1:{port}/0", password="right-pw", port=port)
    finally:
        proc.terminate()
        proc.wait(5)
