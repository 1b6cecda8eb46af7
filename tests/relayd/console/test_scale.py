"""The dead-letter page costs one page's reads: as fast at a million dead letters as at a thousand."""

from __future__ import annotations

import pytest
from benchmarks.bench_console import LARGE, SMALL, measure
from support.redis_server import RedisServer


@pytest.mark.slow
def test_the_dead_letter_page_at_a_million_is_as_fast_as_at_a_thousand(own_redis_server: RedisServer) -> None:
    client = own_redis_server.client()
    try:
        small_ms, large_ms = measure(own_redis_server.url, client, rounds=9)
    finally:
        client.close()
    print(f"dead-letter page: {SMALL:,} -> {small_ms:.1f} ms, {LARGE:,} -> {large_ms:.1f} ms")

    assert large_ms / small_ms < 2
