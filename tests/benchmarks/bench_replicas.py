"""Benchmark: aggregate drain throughput of 1, 2 and 4 ``relayd sweep`` processes over 16 prefixes.

Starts its own redis-server on a free loopback port. For each replica count it seeds 16 hash-
tagged prefixes (``{shard-0}`` … ``{shard-15}``) with ``--per-prefix`` outbox entries each in the
engine's exact wire shape, starts the processes with ``--prefix '{shard-0..15}' --sink null``
and samples the remaining backlog and the lease holders every 100 ms until all is drained.

It prints, per replica count: the wall time from start to drained, the steady throughput once
the shares were fair (entries/s, from the backlog samples), the final shares, and the CPU
seconds the relays and redis-server burned (from /proc), which says what the limit was.

Run: ``python tests/benchmarks/bench_replicas.py [--per-prefix 20000] [--counts 1,2,4]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

import orjson
import redis

from relayd.bench.server import throwaway_redis_server

SHARDS = [f"{{shard-{i}}}" for i in range(16)]
#: Lease TTL of the relays (s): shares settle within about one of these after the last start.
LEASE_TTL_S = 2.0
SAMPLE_S = 0.1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _seed(client: redis.Redis, per_prefix: int) -> int:
    for shard in SHARDS:
        for start in range(1, per_prefix + 1, 5000):
            pipe = client.pipeline(transaction=False)
            for seq in range(start, min(start + 5000, per_prefix + 1)):
                event = orjson.dumps({"id": f"e{seq}", "kind": "Ping", "data": {"n": seq}}).decode()
                pipe.hset(f"{shard}:outbox", str(seq), orjson.dumps({"t": f"x{seq % 64}", "e": event}))
            pipe.execute()
        client.set(f"{shard}:outbox:seq", per_prefix)
    return per_prefix * len(SHARDS)


def _remaining(client: redis.Redis) -> int:
    pipe = client.pipeline(transaction=False)
    for shard in SHARDS:
        pipe.hlen(f"{shard}:outbox")
    return sum(pipe.execute())


def _shares(client: redis.Redis) -> Counter[str]:
    pipe = client.pipeline(transaction=False)
    for shard in SHARDS:
        pipe.get(f"{shard}:relay:lease")
    return Counter(token.decode().rsplit("/", 1)[0] for token in pipe.execute() if token)


def _fair(counts: Counter[str], replicas: int) -> bool:
    base, extra = divmod(len(SHARDS), replicas)
    return sorted(counts.values()) == sorted([base + 1] * extra + [base] * (replicas - extra))


@dataclass
class Result:
    replicas: int
    entries: int
    wall_s: float
    steady_per_s: float
    shares: list[int]
    relay_cpu_s: float
    redis_cpu_s: float


def run(replicas: int, *, port: int, redis_pid: int, per_prefix: int, batch: int) -> Result:
    client = redis.Redis(port=port)
    client.flushall()
    entries = _seed(client, per_prefix)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    argv = [
        sys.executable, "-m", "relayd", "sweep",
        "--redis-url", f"redis://127.0.0.1:{port}/0",
        "--prefix", "{shard-0..15}",
        "--sink", "null",
        "--batch", str(batch),
        "--lease-ttl", str(LEASE_TTL_S),
        "--poll-interval", "0.2",
        "--log-level", "warning",
        "--log-format", "json",
    ]  # fmt: skip
    redis_cpu_before = _cpu_s(redis_pid)
    started = time.monotonic()
    procs = [
        subprocess.Popen([*argv, "--metrics-addr", "127.0.0.1:0"], env=env, stdout=subprocess.DEVNULL)
        for _ in range(replicas)
    ]
    fair_at: tuple[float, int] | None = None
    relay_cpu_s = 0.0
    try:
        while True:
            left = _remaining(client)
            now = time.monotonic()
            if fair_at is None and _fair(_shares(client), replicas):
                fair_at = (now, left)
            if left == 0:
                break
            relay_cpu_s = sum(_cpu_s(p.pid) for p in procs)
            if now - started > 600:
                raise RuntimeError(f"not drained in 600 s ({left} left)")
            time.sleep(SAMPLE_S)
        finished = time.monotonic()
        shares = sorted(_shares(client).values(), reverse=True)
        relay_cpu_s = max(relay_cpu_s, sum(_cpu_s(p.pid) for p in procs))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    if fair_at is None or fair_at[1] == 0:
        steady = entries / (finished - started)  # drained before the shares settled
    else:
        steady = fair_at[1] / max(finished - fair_at[0], 1e-9)
    return Result(
        replicas,
        entries,
        finished - started,
        steady,
        shares,
        relay_cpu_s,
        _cpu_s(redis_pid) - redis_cpu_before,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-prefix", type=int, default=20_000)
    parser.add_argument("--counts", default="1,2,4")
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not on PATH")
    with throwaway_redis_server() as (server, port):
        print(f"{len(SHARDS)} prefixes x {args.per_prefix} outbox entries, sink null, batch {args.batch},")
        print(f"one redis-server, {os.cpu_count()} CPUs; steady = entries/s once the shares were fair")
        print(f"{'relays':>6} {'entries':>8} {'wall s':>7} {'steady/s':>9} {'shares':<22} {'relay cpu s':>11}"
              f" {'redis cpu s':>11}")  # fmt: skip
        for count in (int(c) for c in args.counts.split(",")):
            r = run(count, port=port, redis_pid=server.pid, per_prefix=args.per_prefix, batch=args.batch)
            print(
                f"{r.replicas:>6} {r.entries:>8} {r.wall_s:>7.2f} {r.steady_per_s:>9.0f}"
                f" {'/'.join(map(str, r.shares)):<22} {r.relay_cpu_s:>11.1f} {r.redis_cpu_s:>11.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
