"""Benchmark: the least CPU a relay in Python pays under a steady writer, per event loop.

A minimal relay, not relayd: a keyspace subscription wakes it; each pass starts at least
``--linger`` after the last began, reads the new outbox seqs with the last pass's ``HDEL``,
``GET`` of the counter and ``HMGET`` in one write, and appends each entry to a stream with
``XADD`` in a second; hiredis parses, nothing else runs (no fencing, metrics, lanes or sink
interface). Its subscription is a plain socket, used one of two ways:

- **woken**: the event loop watches it always, and every pass waits for a message;
- **polled**: while passes find work the loop does not watch it; each pass reads what it holds
  (one ``recv``) and starts on time without waiting for a message.

It runs as its own process against ``relayd.bench.writer`` (the steady suite's paced writer) on a
throwaway redis-server, once per event loop, mode and linger, alternating round by round, and
prints its CPU (``getrusage`` after the warm-up), passes and commit-to-delivery median.

The figures bound what relayd can reach on a host: a pass of relayd does all of this and more.
The baseline is the standard library's loop, woken; ``uvloop`` runs when it is installed (it is
not a dependency of relayd: ``pip install uvloop``).

Run: ``flock /tmp/relayd-bench.lock python tests/benchmarks/bench_loop_floor.py [--rate 1000]
[--lingers 0.002,0.003] [--seconds 8] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import json
import resource
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import hiredis
import orjson
import redis

from relayd.bench.server import throwaway_redis_server
from relayd.bench.writer import command as _command

WARMUP_S = 2.0


class _Connection(asyncio.Protocol):
    """One Redis connection: pipelined calls answered through a future."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.replies: list[Any] = []
        self.wanted = 0
        self.waiter: asyncio.Future[list[Any]] | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            self.replies.append(reply)
            if len(self.replies) == self.wanted and self.waiter is not None:
                self.waiter.set_result(self.replies)

    def call(self, payload: bytes, wanted: int) -> asyncio.Future[list[Any]]:
        self.replies, self.wanted = [], wanted
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(payload)
        return self.waiter


async def _pass(
    connection: _Connection, prefix: str, next_seq: int, acks: list[bytes], latencies: list[float]
) -> list[bytes]:
    """One pass: ack the last pass's entries and read the new ones, then append them to a stream;
    returns the fields to ack next."""
    hash_key, seq_key = f"{prefix}:outbox".encode(), f"{prefix}:outbox:seq".encode()
    fields = [b"%d" % seq for seq in range(next_seq, next_seq + 64)]
    read = _command(b"HDEL", hash_key, *acks) if acks else b""
    read += _command(b"GET", seq_key) + _command(b"HMGET", hash_key, *fields)
    values = (await connection.call(read, 3 if acks else 2))[-1]
    appends, read_fields = [], []
    for field, value in zip(fields, values, strict=True):
        if value is None:
            break
        outer = orjson.loads(value)
        appends.append(
            _command(b"XADD", b"bench:floor", b"*", b"t", outer["t"].encode(), b"e", outer["e"].encode())
        )
        read_fields.append(field)
        latencies.append(time.time() - orjson.loads(outer["e"])["data"]["committed_at"])
    if appends:
        await connection.call(b"".join(appends), len(appends))
    return read_fields


async def _relay(port: int, prefix: str, linger_s: float, seconds: float, mode: str) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    hash_key = f"{prefix}:outbox".encode()
    wake = asyncio.Event()
    subscriber = socket.create_connection(("127.0.0.1", port))
    subscriber.sendall(_command(b"SUBSCRIBE", b"__keyspace@0__:" + hash_key))
    subscriber.setblocking(False)
    messages = hiredis.Reader()

    def read_messages() -> None:  # whatever the socket holds now
        with contextlib.suppress(BlockingIOError):
            while data := subscriber.recv(1 << 16):
                messages.feed(data)
        while messages.gets() is not False:
            wake.set()

    polled = mode == "polled"
    busy = False
    if not polled:
        loop.add_reader(subscriber, read_messages)
    connection = _Connection()
    await loop.create_connection(lambda: connection, "127.0.0.1", port)
    next_seq, passes, started_s = 1, 0, 0.0
    acks: list[bytes] = []
    latencies: list[float] = []
    end_s = time.monotonic() + WARMUP_S + seconds
    measured: tuple[resource.struct_rusage, float, int] | None = None
    while (now_s := time.monotonic()) < end_s:
        if measured is None and now_s > end_s - seconds:
            measured, latencies = (resource.getrusage(resource.RUSAGE_SELF), now_s, passes), []
        if polled and busy:
            read_messages()
        elif not wake.is_set():
            if polled:
                loop.add_reader(subscriber, read_messages)
            try:
                await asyncio.wait_for(wake.wait(), 0.1)
            except TimeoutError:
                continue
            finally:
                if polled:
                    loop.remove_reader(subscriber)
        wake.clear()
        if (wait_s := started_s + linger_s - time.monotonic()) > 0:
            await asyncio.sleep(wait_s)
        started_s, passes = time.monotonic(), passes + 1
        acks = await _pass(connection, prefix, next_seq, acks, latencies)
        busy, next_seq = bool(acks), next_seq + len(acks)
    assert measured is not None
    usage, since_s, passes_before = measured
    after = resource.getrusage(resource.RUSAGE_SELF)
    elapsed_s = time.monotonic() - since_s
    cpu_s = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    return {
        "cpu_pct": 100 * cpu_s / elapsed_s,
        "passes_per_s": (passes - passes_before) / elapsed_s,
        "cpu_us_per_pass": 1e6 * cpu_s / max(1, passes - passes_before),
        "p50_ms": 1e3 * statistics.median(latencies),
    }


def _run_relay(argv: list[str]) -> None:
    loop_name, mode, port, prefix, linger, seconds = argv
    factory = importlib.import_module("uvloop").new_event_loop if loop_name == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        print(json.dumps(runner.run(_relay(int(port), prefix, float(linger), float(seconds), mode))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="commits/s")
    parser.add_argument("--lingers", default="0.002,0.003", help="seconds, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured stretch per run")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    loops = ["asyncio"] + (["uvloop"] if importlib.util.find_spec("uvloop") else [])
    ways = [(loop_name, mode) for loop_name in loops for mode in ("woken", "polled")]
    figures: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    with throwaway_redis_server() as (_server, port):
        redis.Redis(port=port).config_set("notify-keyspace-events", "Khz")
        url = f"redis://127.0.0.1:{port}/0"
        runs = 0
        for round_ in range(args.rounds):
            for linger in args.lingers.split(","):
                for loop_name, mode in ways if round_ % 2 == 0 else ways[::-1]:
                    runs += 1
                    prefix, total_s = f"floor{runs}", WARMUP_S + args.seconds
                    writer = subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "relayd.bench.writer",
                            url,
                            prefix,
                            str(args.rate),
                            str(total_s + 1),
                        ],
                        stdout=subprocess.DEVNULL,
                    )
                    relay = [sys.executable, __file__, "--relay", loop_name, mode, str(port), prefix, linger]
                    done = subprocess.run(
                        [*relay, str(args.seconds)], check=True, capture_output=True, text=True
                    )
                    run = json.loads(done.stdout)
                    writer.wait()
                    figures.setdefault((linger, loop_name, mode), []).append(run)
                    print(
                        f"round {round_ + 1} linger {linger} {loop_name} {mode} " + json.dumps(run),
                        flush=True,
                    )
    print(f"\n{args.rate:,} commits/s, medians over {args.rounds} rounds:")
    for (linger, loop_name, mode), runs_of in sorted(figures.items()):
        cpu = statistics.median(run["cpu_pct"] for run in runs_of)
        base = statistics.median(run["cpu_pct"] for run in figures[(linger, "asyncio", "woken")])
        per_pass = statistics.median(run["cpu_us_per_pass"] for run in runs_of)
        p50 = statistics.median(run["p50_ms"] for run in runs_of)
        print(
            f"  linger {linger} {loop_name:<8} {mode:<7} cpu {cpu:5.1f} % ({cpu / base:.2f}x asyncio woken), "
            f"{per_pass:4.0f} µs per pass, p50 {p50:.2f} ms"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--relay"]:
        _run_relay(sys.argv[2:])
    else:
        main()
