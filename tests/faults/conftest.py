"""Fixtures of the fault-injection suite: real redis-server and relayd processes only.

Every case prints its ledger line (``pytest -s`` shows it; it is also attached to the report
as the ``ledger`` property).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.binaries import require_binaries
from support.redis_server import RedisServer


@pytest.fixture(autouse=True)
def _binaries() -> None:
    require_binaries("redis-server", "redis-cli", "relayd")


@pytest.fixture
def redis_process(tmp_path: Path) -> Iterator[RedisServer]:
    """A plain redis-server (no persistence) owned by the test."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.kill()
