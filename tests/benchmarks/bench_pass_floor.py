"""Benchmark: the client CPU of a steady pass's two round-trips, redis-py against a raw socket.

Under a steady writer a pass makes two round-trips: the read (the last pass's fenced ack, ``HLEN``,
``GET``, ``HMGET`` of the new seqs, the spawns counter's ``GET``) and the sink's call (one
``EVALSHA`` appending the window to a stream). This times exactly those two, ``--passes`` times,
with ``--entries`` entries per pass, on a throwaway redis-server, in one process, two ways
alternating round by round:

- **redis-py**: relayd's own round-trip (``store.round_trip`` on a pooled ``redis.asyncio``
  connection with hiredis packing, ``relayd.runtime.packing``), then an ``EVALSHA`` through
  ``execute_command``: what the relay pays before any of its own work;
- **raw**: the same bytes over one ``asyncio`` stream, packed and parsed by hiredis, no client
  library: the least an asyncio process can pay.

It prints each way's CPU and wall time per pass (medians of the rounds) and what they allow: at
one pass every ``P`` ms a commit waits ``P / 2`` on average for the next pass to start, so a
median commit-to-delivery of 2 ms needs a pass at least every ~3 ms (about 330 passes a second),
and a tenth of one core then leaves ``0.1 / 330`` s of CPU for everything a pass does (printed).

Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_pass_floor.py [--passes 3000]
[--entries 10] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import hiredis
import redis.asyncio as aioredis

from relayd.bench.server import throwaway_redis_server
from relayd.connect import SOCKET_TIMEOUT_S
from relayd.runtime.packing import use_hiredis_packing
from store.round_trip import round_trip

#: The fenced ack's stand-in: deletes the fields given (none of them exist).
ACK = "return redis.call('HDEL', KEYS[1], unpack(ARGV))"
#: The sink's stand-in: appends each argument to a capped stream.
APPEND = (
    "for i = 1, #ARGV do redis.call('XADD', KEYS[1], 'MAXLEN', '~', 10000, '*', 'e', ARGV[i]) end "
    "return #ARGV"
)
#: A median commit-to-delivery of 2 ms needs about this many passes a second (see the docstring).
PASSES_FOR_2_MS = 330
#: Of one core.
CPU_BUDGET = 0.10

Pass = Callable[[int], Awaitable[None]]
Close = Callable[[], Awaitable[None]]


async def _redis_py(url: str, shas: tuple[str, str], entries: int) -> tuple[Pass, Close]:
    client = aioredis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_S)  # as relayd connects
    use_hiredis_packing(client)
    ack, append = shas
    fields = [str(n) for n in range(entries)]
    bodies = ["x" * 300] * entries

    async def one(seq: int) -> None:
        await round_trip(
            client,
            [
                ("EVALSHA", ack, 1, "floor:outbox", *fields),
                ("HLEN", "floor:outbox"),
                ("GET", "floor:outbox:seq"),
                ("HMGET", "floor:values", *fields),
                ("GET", "floor:spawns:seq"),
            ],
        )
        await client.execute_command("EVALSHA", append, 1, "floor:stream", *bodies)

    return one, client.aclose


async def _raw(port: int, shas: tuple[str, str], entries: int) -> tuple[Pass, Close]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    parser = hiredis.Reader()
    ack, append = shas
    fields = [str(n) for n in range(entries)]
    read_commands = b"".join(
        hiredis.pack_command(command)
        for command in (
            ("EVALSHA", ack, 1, "floor:outbox", *fields),
            ("HLEN", "floor:outbox"),
            ("GET", "floor:outbox:seq"),
            ("HMGET", "floor:values", *fields),
            ("GET", "floor:spawns:seq"),
        )
    )
    bodies = ["x" * 300] * entries

    async def replies(count: int) -> list[Any]:
        got: list[Any] = []
        while len(got) < count:
            reply = parser.gets()
            if reply is False:
                parser.feed(await reader.read(1 << 16))
                continue
            got.append(reply)
        return got

    async def one(seq: int) -> None:
        writer.write(read_commands)
        await replies(5)
        writer.write(hiredis.pack_command(("EVALSHA", append, 1, "floor:stream", *bodies)))
        await replies(1)

    async def close() -> None:
        writer.close()
        await writer.wait_closed()

    return one, close


async def _timed(one: Pass, passes: int) -> tuple[float, float]:
    """CPU and wall µs per pass."""
    cpu, wall = time.process_time(), time.perf_counter()
    for seq in range(passes):
        await one(seq)
    return (time.process_time() - cpu) / passes * 1e6, (time.perf_counter() - wall) / passes * 1e6


async def main(passes: int, entries: int, rounds: int) -> None:
    with throwaway_redis_server() as (_, port):
        url = f"redis://127.0.0.1:{port}/0"
        setup = aioredis.Redis.from_url(url)
        shas = (await setup.script_load(ACK), await setup.script_load(APPEND))
        await setup.hset("floor:values", mapping={str(n): "v" * 200 for n in range(entries)})
        await setup.aclose()
        ways = {"redis-py": await _redis_py(url, shas, entries), "raw": await _raw(port, shas, entries)}
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for one, _ in ways.values():  # warm both, uncounted
            await _timed(one, passes // 10)
        for round_ in range(rounds):
            order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
            for name in order:
                figures[name].append(await _timed(ways[name][0], passes))
        for _, close in ways.values():
            await close()
    print(f"{passes} passes x {rounds} rounds, {entries} entries a pass; medians per pass:")
    budget_us = CPU_BUDGET / PASSES_FOR_2_MS * 1e6
    for name, runs in figures.items():
        cpu_us = statistics.median(cpu for cpu, _ in runs)
        wall_us = statistics.median(wall for _, wall in runs)
        share = cpu_us * PASSES_FOR_2_MS / 1e6
        print(
            f"  {name:<9} CPU {cpu_us:6.0f} µs, wall {wall_us:6.0f} µs; at {PASSES_FOR_2_MS} passes/s "
            f"the two round-trips alone take {share:.1%} of a core"
        )
    print(f"a whole pass's budget at {PASSES_FOR_2_MS}/s in {CPU_BUDGET:.0%} of a core: {budget_us:.0f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3000)
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.passes, args.entries, args.rounds))
