"""Fixtures of the fault-injection suite: real redis-server and relayd processes only.

Every case prints its ledger line (``pytest -s`` shows it; it is also attached to the report
as the ``ledger`` property).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults.harness import RedisProcess


@pytest.fixture(autouse=True)
def _binaries() -> None:
    missing = [binary for binary in ("redis-server", "redis-cli", "relayd") if shutil.which(binary) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} required in CI but not on PATH")
        pytest.skip(f"{', '.join(missing)} not on PATH")


@pytest.fixture
def redis_process(tmp_path: Path) -> Iterator[RedisProcess]:
    """A plain redis-server (no persistence) owned by the test."""
    server = RedisProcess(tmp_path / "redis")
    server.start()
    yield server
    server.kill()
