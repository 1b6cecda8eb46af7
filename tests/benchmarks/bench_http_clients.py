"""Benchmark: async HTTP clients POSTing the same bodies to one local server, interleaved rounds.

Run: ``python tests/benchmarks/bench_http_clients.py [COUNT] [ROUNDS]``. Starts the bench's own
HTTP target (``relayd.bench.http_target``, aiohttp's server in its own process), then per round
POSTs ``COUNT`` ~300-byte bodies with each installed candidate at 16 in flight over one
keep-alive pool (the webhook sink's default concurrency), and prints requests/s and client CPU
per request. Candidates: aiohttp, httpx (its own httpcore transport), httpx over aiohttp's
transport (``httpx-aiohttp``), niquests and aiosonic; a missing one is skipped.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from relayd.bench.http_target import http_target

CONCURRENCY = 16
BODY = b'{"v":"relayd/1","kind":"outbox","id":"bench:outbox:%d","prefix":"bench","attempt":1,' + (
    b'"relayed_at":1764446400.12,"seq":1,"target_id":"t","event":{"id":"e","kind":"Ping","data":{"n":"'
    + b"x" * 150
    + b'"}}}'
)
HEADERS = {"Content-Type": "application/json", "Idempotency-Key": "bench:outbox:1"}

Post = Callable[[bytes], Awaitable[int]]


async def _drive(post: Post, bodies: Sequence[bytes]) -> int:
    next_index, ok = 0, 0

    async def worker() -> None:
        nonlocal next_index, ok
        while next_index < len(bodies):
            body = bodies[next_index]
            next_index += 1
            status = await post(body)
            ok += 200 <= status < 300

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return ok


async def run_aiohttp(url: str, bodies: Sequence[bytes]) -> int:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post(body: bytes) -> int:
            async with session.post(url, data=body, headers=HEADERS) as response:
                await response.read()
                return response.status

        return await _drive(post, bodies)


async def run_httpx(url: str, bodies: Sequence[bytes]) -> int:
    import httpx

    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(limits=limits) as client:

        async def post(body: bytes) -> int:
            return (await client.post(url, content=body, headers=HEADERS)).status_code

        return await _drive(post, bodies)


async def run_httpx_aiohttp(url: str, bodies: Sequence[bytes]) -> int:
    import aiohttp
    import httpx
    from httpx_aiohttp import AiohttpTransport

    transport = AiohttpTransport(
        client=lambda: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY))
    )
    async with httpx.AsyncClient(transport=transport) as client:

        async def post(body: bytes) -> int:
            return (await client.post(url, content=body, headers=HEADERS)).status_code

        return await _drive(post, bodies)


async def run_niquests(url: str, bodies: Sequence[bytes]) -> int:
    import niquests

    async with niquests.AsyncSession(pool_connections=1, pool_maxsize=CONCURRENCY) as session:

        async def post(body: bytes) -> int:
            response = await session.post(url, data=body, headers=HEADERS)
            if response.status_code is None:
                raise RuntimeError(f"niquests: {response.raw!r}")
            return int(response.status_code)

        return await _drive(post, bodies)


async def run_aiosonic(url: str, bodies: Sequence[bytes]) -> int:
    import aiosonic
    from aiosonic.pools import PoolConfig

    connector = aiosonic.TCPConnector(pool_configs={":default": PoolConfig(size=CONCURRENCY)})
    client = aiosonic.HTTPClient(connector=connector)
    try:

        async def post(body: bytes) -> int:
            response = await client.post(url, data=body, headers=HEADERS)
            await response.content()
            return int(response.status_code)

        return await _drive(post, bodies)
    finally:
        await client.aclose()


CANDIDATES = {
    "aiohttp": run_aiohttp,
    "httpx": run_httpx,
    "httpx+aiohttp": run_httpx_aiohttp,
    "niquests": run_niquests,
    "aiosonic": run_aiosonic,
}


def main(count: int, rounds: int) -> None:
    bodies = [BODY % n for n in range(count)]
    rates: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    with http_target("aiohttp") as url:
        for round_ in range(rounds):
            for name, run in CANDIDATES.items():
                cpu0, wall0 = time.process_time(), time.monotonic()
                try:
                    ok = asyncio.run(run(url, bodies))
                except ImportError:
                    continue
                wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
                if ok != count:
                    print(f"{name}: only {ok} of {count} answered 2xx")
                rates.setdefault(name, []).append(count / wall)
                cpus.setdefault(name, []).append(cpu / count * 1e6)
                rate, cpu_us = count / wall, cpu / count * 1e6
                print(f"round {round_ + 1} {name:14} {rate:8,.0f} req/s  {cpu_us:6.0f} us CPU/req")
    print("\nmedians:")
    for name, rounds_rates in rates.items():
        print(
            f"{name:14} {statistics.median(rounds_rates):8,.0f} req/s  "
            f"{statistics.median(cpus[name]):6.0f} us CPU/req (client process)"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
