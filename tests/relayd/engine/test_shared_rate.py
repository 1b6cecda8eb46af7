"""The shared token bucket in Redis, and what a process does when Redis fails it."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from relayd.engine.clock import SYSTEM_CLOCK
from relayd.engine.shared_rate import SharedBucket


@pytest.mark.usefixtures("backend")
async def test_two_holders_of_one_key_draw_from_one_bucket(async_client, prefix) -> None:
    """Capacity 10 at 100/s: the first 10 tokens are there, whoever takes them; the next wait."""
    key = f"{prefix}:relay:rate:webhook"
    first = SharedBucket(async_client, key, 100.0, sink="webhook", fallback="process", clock=SYSTEM_CLOCK)
    second = SharedBucket(async_client, key, 100.0, sink="webhook", fallback="process", clock=SYSTEM_CLOCK)

    waits = [await first.reserve(5), await second.reserve(5), await first.reserve(10)]

    assert waits[:2] == [0.0, 0.0]
    assert 0.08 <= waits[2] <= 0.1  # ten tokens owed at 100 a second, less what was earned meanwhile
    assert 0 < await async_client.pttl(key) <= 61_000


class _Down:
    async def eval(self, *args: object) -> object:
        raise RedisConnectionError("down")


async def test_a_failing_bucket_falls_back_to_the_process_own_or_holds() -> None:
    own = SharedBucket(_Down(), "k", 100.0, sink="s", fallback="process", clock=SYSTEM_CLOCK)  # type: ignore[arg-type]
    held = SharedBucket(_Down(), "k", 100.0, sink="s", fallback="hold", clock=SYSTEM_CLOCK)  # type: ignore[arg-type]

    assert await own.reserve(10) == 0.0  # the local bucket starts full
    assert await own.reserve(10) > 0.0
    with pytest.raises(RedisConnectionError):
        await held.reserve(1)
