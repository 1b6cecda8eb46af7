"""Benchmark: the kafka and nats sinks against their clients' own baselines, in one run.

For each broker (tansu for the Kafka protocol, nats-server with JetStream), started on a free
loopback port beside a throwaway redis-server: rounds alternate a relay drain (``run_relay``
with ``once=True``, the real engine reading, delivering and acking an outbox backlog) and the
baseline (``relayd.bench.baselines.<scheme>.publish``: the broker's own client publishing the
very bodies the relay delivered, at its documented concurrency). Prints per round the rates,
the ratio and CPU per entry (process CPU: the client libraries' own threads included).

Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_brokers.py [ENTRIES] [ROUNDS]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import nats
import redis
import redis.asyncio as aioredis
from nats.js.api import StreamConfig
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.kafka import start_kafka
from support.nats import start_nats

from relayd.batch import Batch
from relayd.bench.baselines import baseline_for
from relayd.bench.seed import live_count, seed
from relayd.bench.server import throwaway_redis_server
from relayd.engine.loop import run_relay
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS
from relayd.health import Health
from relayd.logs import configure_logging
from relayd.metrics import RelayMetrics
from relayd.sinks import DELIVERED, Outcome, Sink, SinkOptions, resolve_sink
from relayd.sinks.base import all_delivered

BATCH = 1000


class Recorder:
    """Wraps the sink under test and keeps each batch (rendered after the timed drain).

    The sink is started once and stays open across rounds, as in a running relay: a client's
    start-up (a Kafka producer's connection and producer id take up to a second) is not part
    of a drain. The baseline keeps its client the same way, and both are warmed up first.
    """

    def __init__(self, inner: Sink) -> None:
        self.inner, self.name = inner, inner.name
        self.batches: list[Batch] = []
        self.started = False

    async def start(self) -> None:
        if not self.started:
            await self.inner.start()
            self.started = True

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        self.batches.append(batch)
        outcomes = await self.inner.deliver(batch)
        if not all_delivered(outcomes, len(batch)):
            print("not delivered:", {str(o) for o in outcomes if o != DELIVERED}, flush=True)
        return outcomes

    def ready(self) -> bool:
        return self.inner.ready()

    async def close(self) -> None:
        """Kept open for the next round; ``shut`` closes it."""

    async def shut(self) -> None:
        await self.inner.close()


async def relay_round(
    sink: Recorder, url: str, entries: int
) -> tuple[float, float, list[bytes], list[str | None]]:
    prefix = "b" + uuid.uuid4().hex[:10]
    sync = redis.Redis.from_url(url)
    seed(sync, prefix, "outbox", entries, clock=time.time)
    sink.batches.clear()
    client = aioredis.Redis.from_url(url)
    started, cpu = time.perf_counter(), time.process_time()
    await run_relay(
        SweepOptions(prefixes=(prefix,), batch=BATCH, once=True),
        redis=client,
        sinks=dict.fromkeys(KINDS, sink),
        metrics=RelayMetrics(CollectorRegistry()),
        health=Health(),
        stop=asyncio.Event(),
    )
    wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    assert live_count(sync, prefix, "outbox") == 0, "the relay left entries behind"
    bodies = [body for batch in sink.batches for body in batch.render()]
    keys: list[str | None] = []
    for batch in sink.batches:
        keys += batch.keys()
    await client.aclose()
    sync.close()
    return wall_s, cpu_s, bodies, keys


async def baseline_round(spec: str, bodies: list[bytes], keys: list[str | None]) -> tuple[float, float]:
    publish = baseline_for(spec)
    assert publish is not None
    started, cpu = time.perf_counter(), time.process_time()
    confirmed = await publish(spec, bodies, keys)
    wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    assert confirmed == len(bodies), f"the baseline confirmed {confirmed} of {len(bodies)}"
    return wall_s, cpu_s


async def compare(name: str, url: str, spec: str, entries: int, rounds: int) -> None:
    ratios = []
    sink = Recorder(resolve_sink(spec, SinkOptions()))
    _, _, bodies, keys = await relay_round(sink, url, 1000)  # warm-up, both sides
    await baseline_round(spec, bodies, keys)
    for n in range(rounds):
        relay_s, relay_cpu_s, bodies, keys = await relay_round(sink, url, entries)
        base_s, base_cpu_s = await baseline_round(spec, bodies, keys)
        relay_rate, base_rate = entries / relay_s, entries / base_s
        ratios.append(relay_rate / base_rate)
        print(
            f"{name} round {n + 1}: "
            f"relay {relay_rate:,.0f}/s ({relay_cpu_s / entries * 1e6:.1f} us CPU/entry)  "
            f"baseline {base_rate:,.0f}/s ({base_cpu_s / entries * 1e6:.1f} us CPU/entry)  "
            f"ratio {relay_rate / base_rate:.2f}",
            flush=True,
        )
    await sink.shut()
    print(f"{name}: median ratio {statistics.median(ratios):.2f} over {rounds} rounds of {entries} entries")


async def main(entries: int, rounds: int) -> None:
    configure_logging(log_format="console", log_level="warning", secrets=())
    with throwaway_redis_server() as (_, redis_port):
        url = f"redis://127.0.0.1:{redis_port}/0"
        kafka = start_kafka()
        try:
            kafka.create_topic("bench", partitions=4)
            await compare("kafka", url, f"kafka:{kafka.bootstrap}?topic=bench", entries, rounds)
        finally:
            kafka.stop()
        server = start_nats()
        try:
            connection = await nats.connect(server.url)
            await connection.jetstream().add_stream(StreamConfig(name="bench", subjects=["bench.>"]))
            await connection.close()
            await compare("nats", url, f"nats:{server.url}?subject=bench.{{target}}", entries, rounds)
        finally:
            server.cleanup()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(*(args + [20_000, 3][len(args) :])))
