"""The dead-letter page costs one page's reads: as fast at a million dead letters as at a thousand.

The cause is asserted (a page runs no more HSCAN steps at a million than at a thousand) beside
the effect (the median page time)."""

from __future__ import annotations

import pytest
from benchmarks.bench_console import LARGE, SMALL, measure
from support.redis_server import RedisServer


@pytest.mark.slow
def test_the_dead_letter_page_at_a_million_is_as_fast_as_at_a_thousand(own_redis_server: RedisServer) -> None:
    client = own_redis_server.client()
    try:
        cost = measure(own_redis_server.url, client, rounds=9)
    finally:
        client.close()
    print(f"dead-letter page: {SMALL:,} -> {cost.small_ms:.1f} ms, {LARGE:,} -> {cost.large_ms:.1f} ms")
    print(f"HSCAN per page: {SMALL:,} -> {cost.small_hscans}, {LARGE:,} -> {cost.large_hscans}")

    assert 1 <= cost.large_hscans <= cost.small_hscans
    assert cost.large_ms / cost.small_ms < 2
