"""The ``steady`` suite of ``relayd bench``: latency and relay CPU under a steady writer, per rate.

Per rate (``steady_rates``), on a throwaway prefix: ``relayd sweep`` runs as its own process with
default settings (so its CPU is its own, read from ``/proc/PID/stat``), delivering into an
untrimmed Redis Stream on the benchmarked Redis; a paced writer process (``relayd.bench.writer``)
commits at the rate for a warm-up and then a measured stretch. Reported per rate: commit-to-delivery
p50/p90/p99/max over the commits of the measured stretch (the stream entry id's time minus the
commit time: the time Redis appended it, not when the relay heard back), the relay's CPU as % of
one core and per entry, Redis's CPU (INFO cpu) and entries per pass
(``relayd_sweep_duration_seconds_count``). After the writer stops the relay gets a minute to catch
up, and the stream must then hold every commit exactly once (otherwise: a problem in the report).

Wake-up needs keyspace events: on the redis-server the bench started itself they are switched on
(and put back after, ``Bench.keyspace_events``); on a ``--redis-url`` the bench never changes
configuration, and the report says when the relay therefore polled. ``measure`` is also what
``tests/benchmarks/bench_steady.py`` runs to compare two checkouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson
import redis

from relayd.bench.harness import Bench
from relayd.bench.server import free_port, server_cpu_s
from relayd.bench.stats import COMMITTED_AT, percentile

_TICKS = os.sysconf("SC_CLK_TCK")
#: How long a relay that fell behind may take to deliver the rest after the writer stops (s).
CATCH_UP_S = 60.0


@dataclass(frozen=True, slots=True)
class SteadyRun:
    """One rate's run: what was committed and delivered, and what the measured stretch cost."""

    rate: int
    committed: int
    delivered: int  # distinct commits in the stream
    duplicates: int
    latencies_ms: list[float]  # of the commits made during the measured stretch
    relay_cpu_s: float | None
    redis_cpu_s: float | None
    seconds: float  # the measured stretch
    passes: float

    def row(self) -> dict[str, Any]:
        """The JSON-ready figures of the run."""
        entries = len(self.latencies_ms)
        cpu, redis_cpu = self.relay_cpu_s, self.redis_cpu_s
        return {
            "rate_per_s": self.rate,
            "committed": self.committed,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "entries": entries,
            "p50_ms": _ms(percentile(self.latencies_ms, 50)),
            "p90_ms": _ms(percentile(self.latencies_ms, 90)),
            "p99_ms": _ms(percentile(self.latencies_ms, 99)),
            "max_ms": _ms(max(self.latencies_ms, default=None)),
            "relay_cpu_pct": None if cpu is None else round(100 * cpu / self.seconds, 2),
            "relay_cpu_us_per_entry": None if cpu is None or not entries else round(1e6 * cpu / entries, 1),
            "redis_cpu_pct": None if redis_cpu is None else round(100 * redis_cpu / self.seconds, 2),
            "entries_per_pass": round(entries / self.passes, 2) if self.passes else None,
        }

    def problems(self) -> list[str]:
        """What the stream says went wrong: commits missing or delivered twice."""
        out = []
        if self.delivered < self.committed:
            out.append(f"steady {self.rate}/s: delivered {self.delivered} of {self.committed} commits")
        if self.duplicates:
            out.append(f"steady {self.rate}/s: {self.duplicates} commits delivered twice")
        return out


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


async def steady_suite(bench: Bench) -> dict[str, Any]:
    """One row per rate; ``notifications``: whether the relay could be woken (else it polled)."""
    config = bench.config
    rows, problems = [], []
    async with bench.keyspace_events() as notifications:
        for rate in config.steady_rates:
            async with bench.prefix() as prefix:
                bench.log(f"steady: {rate}/s for {config.steady_warmup_s}+{config.steady_seconds}s")
                run = await asyncio.to_thread(
                    measure,
                    bench.url,
                    prefix,
                    rate,
                    warmup_s=config.steady_warmup_s,
                    seconds=config.steady_seconds,
                )
            rows.append(run.row())
            problems += run.problems()
    return {
        "seconds": config.steady_seconds,
        "warmup_s": config.steady_warmup_s,
        "notifications": notifications.ready,
        "rates": rows,
        "problems": problems,
    }


def measure(
    url: str,
    prefix: str,
    rate: int,
    *,
    warmup_s: float,
    seconds: float,
    root: Path | None = None,
    relay_args: Sequence[str] = (),
) -> SteadyRun:
    """Run a relay and the writer at ``rate`` on ``prefix``; the relay's code from ``root`` if given,
    ``relay_args`` added to its command line.

    Blocking: the suite runs it in a thread. The stream it fills is under ``prefix``.
    """
    client = redis.Redis.from_url(url)
    stream = f"{prefix}:steady:stream"
    metrics_port = free_port()
    try:
        with _relay(url, prefix, stream, metrics_port, root, relay_args=relay_args) as relay_pid:
            _wait(lambda: bool(client.exists(f"{prefix}:relay:lease")), 15, "the relay's lease")
            argv = [sys.executable, "-m", "relayd.bench.writer", url, prefix, str(rate)]
            writer = subprocess.Popen([*argv, str(warmup_s + seconds)], stdout=subprocess.PIPE)
            try:
                time.sleep(warmup_s)
                before = _reading(relay_pid, client, metrics_port, prefix)
                time.sleep(seconds)
                after = _reading(relay_pid, client, metrics_port, prefix)
                out, _ = writer.communicate(timeout=CATCH_UP_S)
            finally:
                if writer.poll() is None:
                    writer.kill()
                    writer.wait()
            if writer.returncode:
                raise RuntimeError(f"the steady writer failed (exit code {writer.returncode})")
            committed = int(out)
            # A relay that fell behind gets a while to catch up; what it has not delivered by
            # then shows as a problem.
            _wait(
                lambda: client.xlen(stream) >= committed and not client.hlen(f"{prefix}:outbox"),
                CATCH_UP_S,
            )
        delivered, duplicates, latencies_ms = _read_stream(client, stream, before.time_s, after.time_s)
    finally:
        client.close()
    return SteadyRun(
        rate=rate,
        committed=committed,
        delivered=delivered,
        duplicates=duplicates,
        latencies_ms=latencies_ms,
        relay_cpu_s=_delta(before.relay_cpu_s, after.relay_cpu_s),
        redis_cpu_s=_delta(before.redis_cpu_s, after.redis_cpu_s),
        seconds=after.time_s - before.time_s,
        passes=after.passes - before.passes,
    )


@contextlib.contextmanager
def _relay(
    url: str,
    prefix: str,
    stream: str,
    metrics_port: int,
    root: Path | None,
    *,
    relay_args: Sequence[str] = (),
) -> Iterator[int]:
    """``relayd sweep`` over ``prefix`` into ``stream``, default settings but ``relay_args``; yields
    its pid."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    if root is not None:
        env["PYTHONPATH"] = str(root)
    argv = [sys.executable, "-m", "relayd", "sweep", "--redis-url", url, "--prefix", prefix]
    argv += ["--sink", f"redis-stream:{url}?stream={stream}", "--metrics-addr", f"127.0.0.1:{metrics_port}"]
    argv += relay_args
    with tempfile.TemporaryFile() as errors:
        relay = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            yield relay.pid
        except BaseException:
            errors.seek(0)
            print(errors.read().decode(errors="replace")[-2000:], file=sys.stderr)
            raise
        finally:
            relay.send_signal(signal.SIGTERM)
            try:
                relay.wait(30)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()


@dataclass(frozen=True, slots=True)
class _Reading:
    time_s: float
    relay_cpu_s: float | None
    redis_cpu_s: float | None
    passes: float


def _reading(pid: int, client: redis.Redis, metrics_port: int, prefix: str) -> _Reading:
    return _Reading(time.time(), _process_cpu_s(pid), server_cpu_s(client), _passes(metrics_port, prefix))


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _process_cpu_s(pid: int) -> float | None:
    """A process's user + system CPU seconds (``/proc/PID/stat``; None where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)


def _passes(metrics_port: int, prefix: str) -> float:
    """The relay's passes so far over ``prefix``, from its metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    wanted = f'relayd_sweep_duration_seconds_count{{prefix="{prefix}"}}'
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line.split()[-1])
    return 0.0


def _wait(condition: Callable[[], bool], timeout_s: float, what: str | None = None) -> bool:
    """Wait for ``condition``; past ``timeout_s`` raise naming ``what``, or return False without it."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            if what is not None:
                raise RuntimeError(f"timed out waiting for {what}")
            return False
        time.sleep(0.05)
    return True


def _read_stream(
    client: redis.Redis, stream: str, from_s: float, to_s: float
) -> tuple[int, int, list[float]]:
    """Distinct commits in the stream, those seen twice, and the latencies (ms) of those committed
    in ``[from_s, to_s)``: the entry id's time minus the commit time."""
    latencies: list[float] = []
    seen: set[str] = set()
    duplicates = 0
    last = "-"
    while True:
        chunk = cast("list[tuple[bytes, dict[bytes, bytes]]]", client.xrange(stream, min=last, count=10_000))
        if last != "-":
            chunk = chunk[1:]
        if not chunk:
            break
        for entry_id, fields in chunk:
            event = orjson.loads(next(iter(fields.values())))["event"]
            duplicates += event["id"] in seen
            seen.add(event["id"])
            committed_at = event["data"][COMMITTED_AT]
            if from_s <= committed_at < to_s:
                latencies.append(int(entry_id.split(b"-")[0]) - committed_at * 1000)
        last = chunk[-1][0].decode()
    return len(seen), duplicates, latencies
