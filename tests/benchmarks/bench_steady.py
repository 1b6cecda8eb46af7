"""Benchmark: commit-to-delivery latency and relay CPU under a steady writer, two versions side by side.

A writer process commits to one prefix at a steady rate the way the store does: ``INCR`` of
``P:outbox:seq`` for each commit, then the commit's own ``MULTI`` / ``HSET`` / ``EXEC``, the
commit time (epoch seconds) in the event's data as ``committed_at``. Commits due in the same
millisecond go out in one write (one pipelined INCR round-trip, then their transactions), so one
process keeps up with tens of thousands per second. ``relayd sweep`` runs as its own process
with default settings, delivering into a Redis Stream on the same redis-server, which the
benchmark starts itself and configures with ``notify-keyspace-events Khz``.

Per rate and version: a warm-up, then a measured stretch; latency is the stream entry id's time
minus the commit time, over the commits of the measured stretch; relay CPU is the child's
``utime + stime`` (``/proc/PID/stat``) over that stretch as % of one core and per entry; Redis
CPU from ``INFO cpu``; passes from ``relayd_sweep_duration_seconds_count``. After the writer
stops, the stream must hold every commit exactly once.

Run: ``python tests/benchmarks/bench_steady.py [--old PATH] [--rates 1000,5000,20000]
[--seconds 8] [--warmup 2] [--rounds 1]``, ``PATH`` a checkout of the other version, e.g.
``git worktree add --detach /tmp/steady-base main``. With ``--old`` the versions alternate
(the order flips from rate to rate and round to round).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hiredis
import orjson
import redis

from relayd.bench.server import free_port, throwaway_redis_server

HERE = Path(__file__).resolve().parents[2]
_TICKS = os.sysconf("SC_CLK_TCK")
#: Executions the commits are spread over (each commit targets one).
_TARGETS = 64


# --- the writer ---------------------------------------------------------------------------------


def _command(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


class _RawConnection:
    """A plain socket speaking RESP: the writer's pipelined commands cost it a few µs each."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def call(self, payload: bytes, replies: int) -> list[Any]:
        self.sock.sendall(payload)
        out: list[Any] = []
        while len(out) < replies:
            reply = self.reader.gets()
            if reply is False:
                self.reader.feed(self.sock.recv(1 << 20))
                continue
            out.append(reply)
        return out


def _write(port: int, prefix: str, rate: int, seconds: float, done: Any) -> None:
    """Commit ``rate`` times a second for ``seconds``; put how many commits went out in ``done``."""
    conn = _RawConnection(port)
    seq_key, hash_key = f"{prefix}:outbox:seq".encode(), f"{prefix}:outbox".encode()
    incr, multi, exec_ = _command(b"INCR", seq_key), _command(b"MULTI"), _command(b"EXEC")
    started = time.monotonic()
    sent = 0
    while True:
        elapsed = time.monotonic() - started
        if elapsed >= seconds:
            break
        due = int(rate * elapsed) - sent
        if due <= 0:
            time.sleep(0.0002)
            continue
        seqs = conn.call(incr * due, due)
        now = time.time()
        parts: list[bytes] = []
        for seq in seqs:
            event = {"id": f"e{seq}", "kind": "Tick", "data": {"committed_at": now}}
            value = orjson.dumps({"t": f"exe-{seq % _TARGETS}", "e": orjson.dumps(event).decode()})
            parts += (multi, _command(b"HSET", hash_key, b"%d" % seq, value), exec_)
        conn.call(b"".join(parts), 3 * due)
        sent += due
    done.put(sent)


# --- one run --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunFigures:
    committed: int
    delivered: int
    duplicates: int
    latencies_ms: list[float]
    relay_cpu_s: float
    redis_cpu_s: float
    seconds: float
    entries: int  # committed in the measured stretch
    passes: float

    def row(self) -> dict[str, float]:
        lat = sorted(self.latencies_ms)
        return {
            "p50": _pct(lat, 0.50),
            "p90": _pct(lat, 0.90),
            "p99": _pct(lat, 0.99),
            "max": lat[-1] if lat else float("nan"),
            "cpu_pct": 100 * self.relay_cpu_s / self.seconds,
            "cpu_us": 1e6 * self.relay_cpu_s / max(self.entries, 1),
            "redis_pct": 100 * self.redis_cpu_s / self.seconds,
            "per_pass": self.entries / self.passes if self.passes else float("nan"),
        }


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)


def _redis_cpu_s(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _passes(metrics_port: int, prefix: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    wanted = f'relayd_sweep_duration_seconds_count{{prefix="{prefix}"}}'
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line.split()[-1])
    return 0.0


def _wait(condition: Any, timeout_s: float, what: str | None = None) -> bool:
    """Wait for ``condition``; past ``timeout_s`` exit naming ``what``, or return False without it."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            if what is not None:
                raise SystemExit(f"timed out waiting for {what}")
            return False
        time.sleep(0.05)
    return True


def _run(root: Path, port: int, prefix: str, rate: int, *, warmup_s: float, seconds: float) -> RunFigures:
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis(port=port)
    stream = f"{prefix}:stream"
    metrics_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")} | {"PYTHONPATH": str(root)}
    argv = [sys.executable, "-m", "relayd", "sweep", "--redis-url", url, "--prefix", prefix]
    argv += ["--sink", f"redis-stream:{url}?stream={stream}", "--metrics-addr", f"127.0.0.1:{metrics_port}"]
    with tempfile.TemporaryFile() as errors:
        relay = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            _wait(lambda: client.exists(f"{prefix}:relay:lease"), 15, "the relay's lease")
            done: Any = multiprocessing.Queue()
            writer = multiprocessing.Process(
                target=_write, args=(port, prefix, rate, warmup_s + seconds, done)
            )
            writer.start()
            time.sleep(warmup_s)
            cpu0, redis0, passes0, t0 = (
                _cpu_s(relay.pid),
                _redis_cpu_s(client),
                _passes(metrics_port, prefix),
                time.time(),
            )
            time.sleep(seconds)
            cpu1, redis1, passes1, t1 = (
                _cpu_s(relay.pid),
                _redis_cpu_s(client),
                _passes(metrics_port, prefix),
                time.time(),
            )
            committed = done.get(timeout=60)
            writer.join()
            # A relay that fell behind gets a minute to catch up; what it has not delivered by
            # then shows as "delivered/committed" in the table.
            _wait(lambda: client.xlen(stream) >= committed and not client.hlen(f"{prefix}:outbox"), 60)
        except BaseException:
            errors.seek(0)
            print(errors.read().decode()[-2000:], file=sys.stderr)
            raise
        finally:
            relay.send_signal(signal.SIGTERM)
            relay.wait(30)
    latencies, seen, duplicates, entries = [], set(), 0, 0
    last = "-"
    while True:
        chunk = client.xrange(stream, min=last, count=10_000)
        if last != "-":
            chunk = chunk[1:]
        if not chunk:
            break
        for entry_id, fields in chunk:
            body = orjson.loads(next(iter(fields.values())))
            event = body["event"]
            duplicates += event["id"] in seen
            seen.add(event["id"])
            committed_at = event["data"]["committed_at"]
            if t0 <= committed_at < t1:
                entries += 1
                latencies.append(int(entry_id.split(b"-")[0]) - committed_at * 1000)
        last = chunk[-1][0].decode()
    client.flushall()
    client.close()
    return RunFigures(
        committed=committed,
        delivered=len(seen),
        duplicates=duplicates,
        latencies_ms=latencies,
        relay_cpu_s=cpu1 - cpu0,
        redis_cpu_s=redis1 - redis0,
        seconds=t1 - t0,
        entries=entries,
        passes=passes1 - passes0,
    )


# --- the report -----------------------------------------------------------------------------------


def _print_row(rate: int, version: str, run: RunFigures) -> None:
    row = run.row()
    ok = (
        "all" if run.delivered == run.committed and not run.duplicates else f"{run.delivered}/{run.committed}"
    )
    print(
        f"{rate:>7,} {version:<4} {ok:>5} {run.duplicates:>4} {row['p50']:>6.1f} {row['p90']:>6.1f} "
        f"{row['p99']:>6.1f} {row['max']:>6.1f} {row['cpu_pct']:>6.1f} {row['cpu_us']:>7.1f} "
        f"{row['redis_pct']:>6.1f} {row['per_pass']:>7.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="a checkout of the other version")
    parser.add_argument("--rates", default="1000,5000,20000", help="commits/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured stretch per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured start of each run")
    parser.add_argument("--rounds", type=int, default=1, help="runs per rate and version")
    args = parser.parse_args()
    roots = {"new": HERE} | ({"old": args.old.resolve()} if args.old else {})
    rates = [int(r) for r in args.rates.split(",")]
    loadavg = os.getloadavg()
    print(
        f"load average at start: {loadavg[0]:.2f} {loadavg[1]:.2f} {loadavg[2]:.2f} ({os.cpu_count()} cores)"
    )
    print(
        f"{'rate/s':>7} {'ver':<4} {'deliv':>5} {'dups':>4} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6} "
        f"{'cpu%':>6} {'µs/ent':>7} {'redis%':>6} {'ent/pass':>7}"
    )
    results: dict[tuple[int, str], list[RunFigures]] = {}
    with throwaway_redis_server() as (_, port):
        redis.Redis(port=port).config_set("notify-keyspace-events", "Khz")
        turn = 0
        for rate in rates:
            for round_ in range(args.rounds):
                versions = list(roots)
                if turn % 2:
                    versions.reverse()
                turn += 1
                for version in versions:
                    prefix = f"steady{turn}{version}{round_}"
                    run = _run(roots[version], port, prefix, rate, warmup_s=args.warmup, seconds=args.seconds)
                    results.setdefault((rate, version), []).append(run)
                    _print_row(rate, version, run)
    if "old" in roots:
        print("\nnew/old (medians over rounds): p99 latency, max latency, relay CPU")
        for rate in rates:
            ratio = {}
            for key in ("p99", "max", "cpu_pct"):
                old = statistics.median(r.row()[key] for r in results[(rate, "old")])
                new = statistics.median(r.row()[key] for r in results[(rate, "new")])
                ratio[key] = new / old if old else float("nan")
            print(f"{rate:>7,}: p99 {ratio['p99']:.2f}, max {ratio['max']:.2f}, cpu {ratio['cpu_pct']:.2f}")
    loadavg = os.getloadavg()
    print(f"load average at end: {loadavg[0]:.2f} {loadavg[1]:.2f} {loadavg[2]:.2f}")


if __name__ == "__main__":
    main()
