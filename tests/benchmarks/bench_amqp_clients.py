"""Benchmark: the two asyncio AMQP clients the amqp sink could be built on, publishing the same bodies.

aiormq (the protocol client) and aio-pika (its higher-level wrapper, same author), each on a
confirm channel: ``--count`` persistent ``mandatory`` messages of ``--size`` bytes with a
``message_id``, ``IN_FLIGHT`` published together and all their confirms awaited, to a topic
exchange bound to one durable queue on a throwaway RabbitMQ. Rounds alternate the clients
(purging the queue before each run); prints every run and the medians (messages/s, CPU per
message).

Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_amqp_clients.py [--count 10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support

import aio_pika
import aiormq
from aiormq import spec as amqp_spec
from support.rabbitmq import declare, start_rabbitmq

IN_FLIGHT = 1000
EXCHANGE, QUEUE = "bench-clients", "bench-clients-q"


async def with_aiormq(url: str, bodies: list[bytes]) -> int:
    connection = await aiormq.connect(url)
    channel = await connection.channel(publisher_confirms=True)
    acked = 0
    for start in range(0, len(bodies), IN_FLIGHT):
        replies = await asyncio.gather(
            *(
                channel.basic_publish(
                    body,
                    exchange=EXCHANGE,
                    routing_key="ev.a",
                    properties=amqp_spec.Basic.Properties(
                        content_type="application/json", delivery_mode=2, message_id=f"id-{start + n}"
                    ),
                    mandatory=True,
                )
                for n, body in enumerate(bodies[start : start + IN_FLIGHT])
            )
        )
        acked += sum(isinstance(r, amqp_spec.Basic.Ack) for r in replies)
    await connection.close()
    return acked


async def with_aio_pika(url: str, bodies: list[bytes]) -> int:
    connection = await aio_pika.connect(url)
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    exchange = await channel.get_exchange(EXCHANGE, ensure=False)
    acked = 0
    for start in range(0, len(bodies), IN_FLIGHT):
        replies = await asyncio.gather(
            *(
                exchange.publish(
                    aio_pika.Message(
                        body,
                        content_type="application/json",
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        message_id=f"id-{start + n}",
                    ),
                    routing_key="ev.a",
                    mandatory=True,
                )
                for n, body in enumerate(bodies[start : start + IN_FLIGHT])
            )
        )
        acked += sum(isinstance(r, amqp_spec.Basic.Ack) for r in replies)
    await connection.close()
    return acked


async def purge(url: str) -> None:
    connection = await aiormq.connect(url)
    channel = await connection.channel()
    await channel.queue_purge(QUEUE)
    await connection.close()


async def run(url: str, count: int, size: int, rounds: int) -> None:
    bodies = [b'{"v":"relayd/1","pad":"' + b"x" * size + b'"}' for _ in range(count)]
    clients: dict[str, Callable[[str, list[bytes]], Awaitable[int]]] = {
        "aiormq": with_aiormq,
        "aio-pika": with_aio_pika,
    }
    rates: dict[str, list[float]] = {name: [] for name in clients}
    cpus: dict[str, list[float]] = {name: [] for name in clients}
    for n in range(rounds):
        for name, client in clients.items():
            await purge(url)
            cpu, wall = time.process_time(), time.monotonic()
            acked = await client(url, bodies)
            wall, cpu = time.monotonic() - wall, time.process_time() - cpu
            assert acked == count, f"{name} confirmed {acked}/{count}"
            rates[name].append(count / wall)
            cpus[name].append(cpu / count * 1e6)
            print(f"round {n + 1} {name}: {rates[name][-1]:,.0f}/s, {cpus[name][-1]:.0f} us CPU/message")
    for name in clients:
        print(
            f"{name}: median {statistics.median(rates[name]):,.0f}/s, "
            f"{statistics.median(cpus[name]):.0f} us CPU/message"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rabbit = start_rabbitmq()
    try:
        asyncio.run(declare(rabbit.url, EXCHANGE, {QUEUE: "ev.#"}))
        url = rabbit.url.replace("guest@", "guest:guest@")
        asyncio.run(run(url, args.count, args.size, args.rounds))
    finally:
        rabbit.cleanup()


if __name__ == "__main__":
    main()
