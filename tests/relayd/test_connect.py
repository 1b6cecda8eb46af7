"""connect: retry with backoff while Redis is away, no retry on bad credentials, never the password."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from relayd.config.settings import load_settings
from relayd.connect import BRIEF, RetryPolicy, connect
from relayd.errors import RedisUnreachable

pytestmark = pytest.mark.usefixtures("no_relayd_env", "reset_logging")


def test_retry_delay_doubles_up_to_the_cap():
    policy = RetryPolicy(attempts=None, base_s=0.5, cap_s=3.0)

    assert [policy.delay_s(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


async def test_unreachable_redis_is_retried_then_exit_code_3(closed_port: int):
    settings = load_settings(redis_url=f"redis://:hunter2@127.0.0.1:{closed_port}/0")
    slept: list[float] = []

    async def fake_sleep(delay_s: float) -> None:
        slept.append(delay_s)

    failures: list[str] = []

    with capture_logs() as logs, pytest.raises(RedisUnreachable) as excinfo:
        await connect(settings, BRIEF, sleep=fake_sleep, on_failure=failures.append)

    assert excinfo.value.exit_code == 3
    assert slept == [0.2, 0.4, 0.8, 1.6]
    assert failures == ["ConnectionError"] * 5  # /readyz hears each failed attempt, class name only
    assert [e["attempt"] for e in logs if e["event"] == "redis_unreachable"] == [1, 2, 3, 4, 5]
    assert "hunter2" not in str(excinfo.value)
    assert "hunter2" not in repr(logs)


async def test_stop_ends_the_endless_retry(closed_port: int):
    settings = load_settings(redis_url=f"redis://127.0.0.1:{closed_port}/0")
    stop = asyncio.Event()
    stop.set()

    with pytest.raises(RedisUnreachable, match="stopped"):
        await connect(settings, RetryPolicy(attempts=None), stop=stop)


async def test_wrong_password_fails_at_once_with_exit_code_3(tmp_path: Path, password_redis):
    password = tmp_path / "pw"
    password.write_text("wrong-pw\n")
    settings = load_settings(redis_url=password_redis.url, redis_password_file=password)

    with capture_logs() as logs, pytest.raises(RedisUnreachable, match="rejected the credentials") as excinfo:
        await connect(settings, RetryPolicy(attempts=None))

    assert excinfo.value.exit_code == 3
    assert not [e for e in logs if e["event"] == "redis_unreachable"]
    assert "wrong-pw" not in str(excinfo.value)


async def test_right_password_connects(tmp_path: Path, password_redis):
    password = tmp_path / "pw"
    password.write_text("right-pw\n")
    settings = load_settings(redis_url=password_redis.url, redis_password_file=password)

    client = await connect(settings, BRIEF)
    try:
        assert await client.ping()
    finally:
        await client.aclose()
