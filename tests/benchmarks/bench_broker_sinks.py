"""Benchmark: a broker or cloud sink's relay drain against its client baseline, alternating.

``relayd bench --sink SPEC`` measures the same against a server you run; this script starts the
sink's server itself (RabbitMQ, or moto for AWS) and a redis-server on loopback, and empties the
destination before every run (moto slows down as a queue grows, so without that whichever runs
last is slowest). It alternates, ``--rounds`` times:

- the relay: ``relayd bench``'s own drain (``relayd.bench.drain.relay_drain``: seed ``--backlog`` outbox
  entries, ``run_relay(once=True)`` into the sink), wall time and this process's CPU;
- the baseline: ``relayd.bench.baselines.<scheme>.publish`` sending the bodies the relay
  delivered (recorded in an unmeasured warm-up drain) with the sink's own client library.

It prints every run, then the medians: entries/s, CPU per entry, and relay/baseline.

Run under the bench lock: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_broker_sinks.py
amqp [--backlog 20000] [--rounds 3]`` (or ``sqs``, ``sns``, ``kinesis`` with a small backlog).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support

from relayd.bench.baselines import baseline_for
from relayd.bench.drain import relay_drain
from relayd.bench.harness import Bench, BenchConfig
from relayd.bench.meter import TimingSink
from relayd.bench.server import throwaway_redis_server
from relayd.envelope.batch import Batch
from relayd.observability.logs import configure_logging
from relayd.sinks import resolve_sink
from relayd.sinks.base import Outcome, SinkOptions


class Recorder:
    """A sink wrapper that keeps the bodies and ordering keys it delivered (warm-up only)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[attr-defined]
        self.bodies: list[bytes] = []
        self.keys: list[str | None] = []

    async def start(self) -> None:
        await self.inner.start()  # type: ignore[attr-defined]

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        self.bodies += batch.render()
        self.keys += batch.keys()
        return await self.inner.deliver(batch)  # type: ignore[attr-defined,no-any-return]

    def ready(self) -> bool:
        return self.inner.ready()  # type: ignore[attr-defined,no-any-return]

    async def close(self) -> None:
        await self.inner.close()  # type: ignore[attr-defined]


@contextlib.contextmanager
def sink_server(scheme: str) -> Iterator[tuple[str, object]]:
    """Start what the sink publishes to; yield the spec and a handle to reset between runs."""
    if scheme == "amqp":
        from support.rabbitmq import declare, start_rabbitmq

        rabbit = start_rabbitmq()
        exchange, queue = f"bench-{uuid.uuid4().hex[:6]}", f"bench-{uuid.uuid4().hex[:6]}"
        asyncio.run(declare(rabbit.url, exchange, {queue: "#"}))
        try:
            yield f"amqp:{rabbit.url}?exchange={exchange}&routing_key={{kind}}.{{target}}", (rabbit, queue)
        finally:
            rabbit.cleanup()
        return
    from support.moto import start_moto

    moto = start_moto()
    try:
        yield moto.bench_spec(scheme), moto
    finally:
        moto.stop()


async def reset(scheme: str, handle: object) -> None:
    """Empty the destination so every run publishes into the same state."""
    if scheme == "amqp":
        import aiormq

        rabbit, queue = cast("tuple[Any, str]", handle)
        connection = await aiormq.connect(rabbit.url.replace("guest@", "guest:guest@"))
        channel = await connection.channel()
        await channel.queue_purge(queue)
        await connection.close()
    else:
        handle.reset(scheme)  # type: ignore[attr-defined]


def main(scheme: str, backlog: int, rounds: int, batch: int) -> None:
    configure_logging(log_format="console", log_level="warning", secrets=())
    with throwaway_redis_server() as (_, port), sink_server(scheme) as (spec, handle):
        url = f"redis://127.0.0.1:{port}/0"
        asyncio.run(measure(scheme, spec, handle, url, backlog=backlog, rounds=rounds, batch=batch))


async def measure(
    scheme: str, spec: str, handle: object, url: str, *, backlog: int, rounds: int, batch: int
) -> None:
    """Alternate relay drains and baseline publishes; print each and the medians."""
    baseline = baseline_for(spec)
    assert baseline is not None, f"no baseline for {scheme}"
    publish = baseline.publish
    assert publish is not None, f"{scheme}'s baseline drains, it does not publish"
    bench = Bench(BenchConfig(redis_url=url, sink=spec, backlog=backlog, batch=batch, baseline=False), url)
    recorder = Recorder(resolve_sink(spec, SinkOptions()))
    original = bench.sink_for
    bench.sink_for = lambda prefix, **_: TimingSink(recorder)  # type: ignore[method-assign,arg-type]
    warm = await relay_drain(bench, "outbox", backlog)
    bench.sink_for = original  # type: ignore[method-assign]
    print(f"warm-up: {warm.delivered}/{backlog} delivered, {len(recorder.bodies)} bodies recorded")
    relay_rates, relay_cpu, base_rates, base_cpu = [], [], [], []
    for n in range(rounds):
        await reset(scheme, handle)
        figures = await relay_drain(bench, "outbox", backlog)
        assert figures.delivered == backlog, f"relay delivered {figures.delivered}/{backlog}"
        relay_rates.append(backlog / figures.duration_s)
        relay_cpu.append(figures.cpu_s / backlog * 1e6)
        await reset(scheme, handle)
        cpu, wall = time.process_time(), time.monotonic()
        acked = await publish(spec, recorder.bodies, recorder.keys, SinkOptions())
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        assert acked == len(recorder.bodies), f"baseline confirmed {acked}/{len(recorder.bodies)}"
        base_rates.append(acked / wall)
        base_cpu.append(cpu / acked * 1e6)
        print(
            f"round {n + 1}: relay {relay_rates[-1]:,.0f}/s ({relay_cpu[-1]:.0f} us CPU/entry), "
            f"baseline {base_rates[-1]:,.0f}/s ({base_cpu[-1]:.0f} us CPU/entry), "
            f"ratio {relay_rates[-1] / base_rates[-1]:.2f}"
        )
    await bench.close()
    relay, base = statistics.median(relay_rates), statistics.median(base_rates)
    print(
        f"{scheme} medians over {rounds} rounds of {backlog}: relay {relay:,.0f}/s "
        f"({statistics.median(relay_cpu):.0f} us CPU/entry), baseline {base:,.0f}/s "
        f"({statistics.median(base_cpu):.0f} us CPU/entry), relay/baseline {relay / base:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scheme", choices=["amqp", "sqs", "sns", "kinesis"])
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    main(args.scheme, args.backlog, args.rounds, args.batch)
