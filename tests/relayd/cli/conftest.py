"""Fixtures for the CLI tests: a Redis reachable over TCP on either backend, and a clean env.

``closed_port`` and ``password_redis`` come from ``tests/relayd/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from relayd.demo.embedded import EmbeddedRedis


@pytest.fixture(autouse=True)
def _clean(no_relayd_env: None, reset_logging: None) -> None:
    """Every CLI test: no RELAYD_* variables from the developer's shell, logging reset after."""


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
