"""Benchmark: what ``--format cloudevents`` costs the relay against ``--format relayd``, alternating.

Each round drains one ``--backlog`` of outbox entries per format, in turn, with ``relayd
bench``'s own drain (``Bench.relay_drain``: seed, then ``run_relay(once=True)`` into the sink)
on one throwaway redis-server: the default trimmed stream on it, or a Kafka topic (tansu), a
JetStream stream or a RabbitMQ queue on a broker this script starts. Alternating in one run
puts both formats under the same machine load; it prints every run, then the medians:
entries/s, the relay's CPU per entry, and cloudevents/relayd.

Run under the bench lock: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_cloudevents.py
stream [--backlog 100000] [--rounds 3] [--mode binary]`` (or ``kafka``, ``nats``, ``amqp``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support

from relayd.bench.drain import relay_drain
from relayd.bench.harness import DEFAULT_SINK, Bench, BenchConfig
from relayd.bench.server import throwaway_redis_server
from relayd.observability.logs import configure_logging
from relayd.sinks.base import SinkOptions

FORMATS: tuple[Literal["relayd", "cloudevents"], ...] = ("relayd", "cloudevents")


@contextlib.contextmanager
def sink_spec(sink: str) -> Iterator[str]:
    """The sink's spec (the bench fills ``{redis_url}`` and ``{prefix}`` in), its broker started."""
    if sink == "stream":
        yield DEFAULT_SINK
        return
    if sink == "nats":
        yield from _nats()
        return
    if sink == "amqp":
        yield from _amqp()
        return
    from support.kafka import start_kafka

    broker = start_kafka()
    try:
        broker.create_topic("bench", partitions=4)
        yield f"kafka:{broker.bootstrap}?topic=bench"
    finally:
        broker.stop()


def _nats() -> Iterator[str]:
    """A JetStream server with a stream on ``bench.>`` (limits: the oldest messages go)."""
    import nats
    from nats.js.api import StreamConfig
    from support.nats import start_nats

    server = start_nats()

    async def create() -> None:
        connection = await nats.connect(server.url)
        await connection.jetstream().add_stream(
            StreamConfig(name="bench", subjects=["bench.>"], max_msgs=10_000)
        )
        await connection.close()

    try:
        asyncio.run(create())
        yield f"nats:{server.url}?subject=bench.events"
    finally:
        server.cleanup()


def _amqp() -> Iterator[str]:
    """A RabbitMQ node with an exchange and one queue bound to everything (at most 10,000 kept)."""
    import aiormq
    from support.rabbitmq import start_rabbitmq

    rabbit = start_rabbitmq()

    async def declare() -> None:
        connection = await aiormq.connect(rabbit.url.replace("guest@", "guest:guest@"))
        channel = await connection.channel()
        await channel.exchange_declare("bench", exchange_type="topic", durable=True)
        await channel.queue_declare("bench", durable=True, arguments={"x-max-length": 10_000})
        await channel.queue_bind("bench", "bench", routing_key="#")
        await connection.close()

    try:
        asyncio.run(declare())
        yield f"amqp:{rabbit.url}?exchange=bench&routing_key={{kind}}.{{target}}"
    finally:
        rabbit.cleanup()


def main(sink: str, backlog: int, rounds: int, mode: Literal["binary", "structured"]) -> None:
    configure_logging(log_format="console", log_level="warning", secrets=())
    with throwaway_redis_server() as (_, port), sink_spec(sink) as spec:
        asyncio.run(measure(spec, f"redis://127.0.0.1:{port}/0", backlog=backlog, rounds=rounds, mode=mode))


async def measure(
    spec: str, url: str, *, backlog: int, rounds: int, mode: Literal["binary", "structured"]
) -> None:
    benches = {
        output_format: Bench(
            BenchConfig(
                redis_url=url,
                sink=spec,
                backlog=backlog,
                baseline=False,
                sink_options=SinkOptions(output_format=output_format, cloudevents_mode=mode),
            ),
            url,
        )
        for output_format in FORMATS
    }
    await relay_drain(benches["relayd"], "outbox", min(backlog, 10_000))  # warm-up, unmeasured
    rates: dict[str, list[float]] = {name: [] for name in FORMATS}
    cpu: dict[str, list[float]] = {name: [] for name in FORMATS}
    for n in range(rounds):
        for output_format, bench in benches.items():
            figures = await relay_drain(bench, "outbox", backlog)
            assert figures.left == 0, f"{output_format} left {figures.left} entries"
            rates[output_format].append(backlog / figures.duration_s)
            cpu[output_format].append(figures.cpu_s / backlog * 1e6)
            print(
                f"round {n + 1} {output_format}: {rates[output_format][-1]:,.0f} entries/s, "
                f"{cpu[output_format][-1]:.2f} us CPU/entry"
            )
    for bench in benches.values():
        await bench.close()
    rate = {name: statistics.median(values) for name, values in rates.items()}
    per_entry = {name: statistics.median(values) for name, values in cpu.items()}
    print(
        f"{spec.partition(':')[0]} ({mode}) medians over {rounds} rounds of {backlog}: "
        + ", ".join(f"{name} {rate[name]:,.0f}/s ({per_entry[name]:.2f} us CPU/entry)" for name in FORMATS)
        + f"; cloudevents/relayd rate {rate['cloudevents'] / rate['relayd']:.3f}, "
        f"CPU {per_entry['cloudevents'] / per_entry['relayd']:.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sink", choices=["stream", "kafka", "nats", "amqp"])
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=["binary", "structured"], default="binary")
    args = parser.parse_args()
    main(args.sink, args.backlog, args.rounds, args.mode)
