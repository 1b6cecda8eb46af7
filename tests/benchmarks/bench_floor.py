"""Benchmark: the relay against the floor, the least one Python process must do per outbox entry.

The floor drains an outbox backlog to a Redis stream on the relay's own stack (redis.asyncio
with the hiredis packer, orjson, the redis-stream sink's ``XADD_BATCH`` script, the same
``relayd/1`` body) and nothing else: no gap-tolerant reader (it knows the seqs are 1..N), no
per-target ordering or hold-back, no attempt records, no ``Envelope`` objects, no metrics, no
lease. Per entry it does what the relay does: parse the stored value, check the event, splice
the event's text into the body as stored. One connection; each window's script calls go out in
one write with the next window's HMGET, whose envelopes are built while Redis runs the scripts,
and with the last window's HDEL (so no write waits for an ack). It is not a relay (it would lose
order and entries on the first failure): it is the ceiling a Python relay on this machine could
reach, and the relay's distance to it is what its guarantees cost.

Rounds alternate (floor, relay, floor, relay, ...) on one throwaway redis-server, so both see
the same minutes of a noisy machine. Prints every drain, then the medians: entries/s, the
process's CPU and redis-server's CPU per entry, and relay/floor.

Run: ``python tests/benchmarks/bench_floor.py [--backlog 100000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
import orjson
import redis
import redis.asyncio as aioredis

from relayd.bench.drain import relay_drain
from relayd.bench.harness import Bench, BenchConfig, new_prefix
from relayd.bench.seed import seed
from relayd.bench.server import delete_prefix, server_cpu_s, throwaway_redis_server
from relayd.observability.logs import configure_logging
from relayd.runtime.packing import use_hiredis_packing
from relayd.sinks.redis_stream.sink import CALL_SIZE, XADD_BATCH
from store import Keyspace

WINDOW = 1000
#: The trim of the bench's default stream sink (``relayd.bench.harness.DEFAULT_SINK``): the same Redis work.
MAXLEN = "10000"
#: The check the relay makes of each passed-through event: one JSON document, not built.
_CHECK_JSON = msgspec.json.Decoder(msgspec.Raw)
_SHA = hashlib.sha1(XADD_BATCH.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Drain:
    method: str
    entries_per_s: float
    cpu_us: float  # this process, per entry
    redis_cpu_us: float  # redis-server, per entry


def _envelopes(prefix: str, fields: Sequence[str], values: Sequence[bytes], now: float) -> list[bytes | str]:
    """The relay's outbox body for each entry, rendered; ids follow the envelopes in the args.

    The least the contract lets a relay do per entry, as the relay does it: parse the stored
    value, check that its event is JSON (a relay must not pass on what is not) and splice the
    event's text into the body as stored, never parsing or serialising it again.
    """
    head = b'{"v":"relayd/1","kind":"outbox","id":' + orjson.dumps(f"{prefix}:outbox:")[:-1]
    middle = b'","prefix":%b,"attempt":1,"relayed_at":%b,"seq":' % (orjson.dumps(prefix), orjson.dumps(now))
    loads, check = orjson.loads, _CHECK_JSON.decode
    out: list[bytes | str] = []
    for field, value in zip(fields, values, strict=True):
        stored = loads(value)
        event = stored["e"].encode()
        check(event)
        seq = field.encode()
        target = orjson.dumps(stored["t"])
        out += (
            b"".join((head, seq, middle, seq, b',"target_id":', target, b',"event":', event, b"}")),
            f"{prefix}:outbox:{field}",
        )
    return out


async def floor_drain(url: str, prefix: str, count: int, stream: str) -> None:
    client = aioredis.Redis.from_url(url)
    use_hiredis_packing(client)
    await client.script_load(XADD_BATCH)
    outbox = Keyspace(prefix).outbox
    windows = [[str(s) for s in range(a, min(a + WINDOW, count + 1))] for a in range(1, count + 1, WINDOW)]
    conn = await client.connection_pool.get_connection()
    try:
        await conn.send_packed_command(conn.pack_command("HMGET", outbox, *windows[0]), check_health=False)
        args = _envelopes(prefix, windows[0], await conn.read_response(), time.time())
        acking: list[str] = []  # the last window's fields: its HDEL goes out with the next write
        for n, fields in enumerate(windows):
            following = windows[n + 1] if n + 1 < len(windows) else None
            packed = conn.pack_command("HDEL", outbox, *acking) if acking else []
            if following:
                packed += conn.pack_command("HMGET", outbox, *following)
            calls = range(0, len(args), 2 * CALL_SIZE)
            for start in calls:
                packed += conn.pack_command(
                    "EVALSHA", _SHA, 1, stream, MAXLEN, "outbox", "", *args[start : start + 2 * CALL_SIZE]
                )
            await conn.send_packed_command(packed, check_health=False)
            if acking:
                await conn.read_response()
            if following:  # Redis runs this window's scripts meanwhile
                args = _envelopes(prefix, following, await conn.read_response(), time.time())
            for _ in calls:
                if await conn.read_response():  # the positions of entries the script refused
                    raise SystemExit("floor: an XADD failed")
            acking = fields
        await conn.send_packed_command(conn.pack_command("HDEL", outbox, *acking), check_health=False)
        await conn.read_response()
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()


async def measure_floor(url: str, sync: redis.Redis, count: int) -> Drain:
    prefix = new_prefix()
    try:
        seed(sync, prefix, "outbox", count, clock=time.time)
        redis_cpu, cpu, wall = server_cpu_s(sync) or 0.0, time.process_time(), time.monotonic()
        await floor_drain(url, prefix, count, f"{prefix}:floor:stream")
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        redis_cpu = (server_cpu_s(sync) or 0.0) - redis_cpu
        left = sync.hlen(Keyspace(prefix).outbox)
        streamed = sync.xinfo_stream(f"{prefix}:floor:stream")["entries-added"]  # trimmed: count the adds
        if left or streamed != count:
            raise SystemExit(f"floor: {left} entries left, {streamed} of {count} streamed")
        return Drain("floor", count / wall, cpu / count * 1e6, redis_cpu / count * 1e6)
    finally:
        delete_prefix(sync, prefix)


async def measure_relay(bench: Bench, count: int) -> Drain:
    run = await relay_drain(bench, "outbox", count)
    if run.left or run.delivered < count:
        raise SystemExit(f"relay: {run.left} entries left, {run.delivered} of {count} delivered")
    return Drain("relay", run.rate_per_s, run.cpu_s / count * 1e6, (run.redis_cpu_s or 0.0) / count * 1e6)


def _line(drain: Drain) -> str:
    return (
        f"{drain.method:<6} {drain.entries_per_s:>9,.0f} entries/s   CPU {drain.cpu_us:5.2f} µs/entry"
        f"   Redis CPU {drain.redis_cpu_us:5.2f} µs/entry"
    )


async def main(backlog: int, rounds: int) -> None:
    with throwaway_redis_server() as (_, port):
        url = f"redis://127.0.0.1:{port}/0"
        sync = redis.Redis.from_url(url)
        bench = Bench(BenchConfig(backlog=backlog, kinds=("outbox",)), url)
        drains: list[Drain] = []
        try:
            for _ in range(rounds):
                for measure in (
                    lambda: measure_floor(url, sync, backlog),
                    lambda: measure_relay(bench, backlog),
                ):
                    drain = await measure()
                    drains.append(drain)
                    print(_line(drain), flush=True)
        finally:
            await bench.close()
            sync.close()
    medians = {
        method: Drain(
            method,
            *(
                statistics.median(getattr(d, f) for d in drains if d.method == method)
                for f in ("entries_per_s", "cpu_us", "redis_cpu_us")
            ),
        )
        for method in ("floor", "relay")
    }
    floor, relay = medians["floor"], medians["relay"]
    print(f"\nmedians of {rounds} rounds, backlog {backlog:,} outbox entries to one stream:")
    print(_line(floor), _line(relay), sep="\n")
    rate, cpu = relay.entries_per_s / floor.entries_per_s, relay.cpu_us / floor.cpu_us
    print(f"relay/floor: {rate:.2f} of the rate, {cpu:.2f}x the CPU per entry")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    configure_logging(log_format="console", log_level="warning")  # as ``relayd bench`` does
    if ns.backlog < WINDOW or ns.rounds < 1:
        sys.exit("--backlog must be at least 1000 and --rounds at least 1")
    asyncio.run(main(ns.backlog, ns.rounds))
