"""``relayd bench``: seed throwaway backlogs, drain them with the real engine, measure, clean up.

Suites (``--suite``, comma-separated or ``all``):

- ``drain``: per kind, seed ``backlog`` entries through ``store``, drain them with ``run_relay``
  (``once=True``) into the sink, then measure the baseline on an identical backlog: the sink
  scheme's own client baseline when ``relayd.bench.baselines`` has one (its client publishing
  the same bodies, or its own relay draining the backlog), else the incumbent-style drain
  (``relayd.bench.seed.drain_like_incumbent``) into a fresh sink of the same spec; entries/s,
  commit-to-delivery p50/p99, Redis commands per entry, peak RSS, CPU seconds and CPU per entry
  (the relay's, and the server's from INFO cpu) and the ratio.
- ``scale``: per-pass cost (median of full passes, ``Sweeper.run_pass``) at a small and a large
  outbox backlog, and the peak RSS while draining the large one.
- ``timers``: timers coming due at ``timer_rate`` per second for ``timer_duration_s``, relayed
  by the long-running loop at the default poll interval; p50/p99 of delivery minus fire_at.
- ``idle``: the long-running loop on an empty prefix: Redis commands per second and CPU share.
- ``wake``: single commits to an idle relay, commit-to-delivery with ``--wake`` on and off
  (``relayd.bench.wake``).

The sink spec may name what the bench provides: ``{redis_url}`` (the benchmarked Redis),
``{prefix}`` (the scenario's prefix), ``{tmpdir}`` (a temporary directory, deleted after) and,
for ``webhook:local``, an HTTP server the bench starts on loopback in its own process
(``relayd.bench.http_target``). Every prefix is ``bench<hex>`` and every key under it (the
default stream sink included) is deleted when its scenario ends, even on failure; a
redis-server or HTTP server started here is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import tempfile
import time
import uuid
from array import array
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import redis
import redis.asyncio as aioredis
import redis.utils
from prometheus_client import CollectorRegistry

from relayd.batch import Batch
from relayd.bench.baselines import ClientBaseline, DrainBacklog, Publish, baseline_for
from relayd.bench.http_target import LOCAL_PLACEHOLDER, http_target
from relayd.bench.seed import drain_like_incumbent, live_count, render_backlog, seed
from relayd.bench.server import bench_redis, command_calls, delete_prefix, server_cpu_s
from relayd.bench.stats import (
    RunFigures,
    commands_delta,
    committed_at,
    kind_row,
    median_run,
    percentile,
    rounded,
    sane,
)
from relayd.engine.clock import SYSTEM_CLOCK
from relayd.engine.loop import run_relay
from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.envelope import KINDS, Envelope, Kind
from relayd.health import Health
from relayd.metrics import RelayMetrics
from relayd.sinks import resolve_sink
from relayd.sinks.base import Delivered, Outcome, Sink, SinkOptions, all_delivered
from store import AsyncRedisStore

#: The default sink: one stream per benchmark prefix on the benchmarked Redis, trimmed.
DEFAULT_SINK: Final = "redis-stream:{redis_url}?stream={prefix}:bench:stream&maxlen=10000"
SUITES: Final = ("drain", "scale", "timers", "idle", "wake")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to measure (every count in entries, every duration in seconds)."""

    redis_url: str | None = None
    sink: str = DEFAULT_SINK
    backlog: int = 100_000
    kinds: tuple[Kind, ...] = ("outbox", "spawn", "timer")
    batch: int = 1000
    baseline: bool = True
    repeat: int = 1  # relay drains per kind; the median one is reported
    suites: tuple[str, ...] = ("drain",)
    scale_backlogs: tuple[int, int] = (1_000, 1_000_000)
    timer_rate: int = 10_000
    timer_duration_s: float = 30.0
    idle_duration_s: float = 10.0
    wake_commits: int = 20
    poll_interval_s: float = SweepOptions().poll_interval_s
    sink_options: SinkOptions = field(default_factory=SinkOptions)
    http_server: str = "aiohttp"  # the server behind ``webhook:local`` (relayd.bench.http_target)


#: Every this many confirmed deliveries, one commit-to-delivery latency is kept.
LATENCY_SAMPLE_EVERY: Final = 8


class TimingSink:
    """Wraps a sink: counts confirmed deliveries, keeps every ``sample_every``-th one's latency."""

    def __init__(
        self, inner: Sink, clock: Callable[[], float] = time.time, *, sample_every: int = LATENCY_SAMPLE_EVERY
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.clock = clock
        self.delivered = 0
        self.sample_every = sample_every
        self.latencies_s = array("d")  # 8 bytes per sample

    async def start(self) -> None:
        await self.inner.start()

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        outcomes = await self.inner.deliver(batch)
        now = self.clock()
        confirmed: Sequence[Envelope]
        if all_delivered(outcomes, len(batch)):
            confirmed = batch  # the common case: the meter stays off the relay's CPU
        else:
            confirmed = [e for e, outcome in zip(batch, outcomes, strict=False) if type(outcome) is Delivered]
        self.delivered += len(confirmed)
        # A sample, not every entry: reading each body costs the relay CPU the drain would
        # otherwise measure, and a sample still gives thousands of latencies for the percentiles.
        for envelope in confirmed[:: self.sample_every]:
            stamp = committed_at(envelope.body)
            if stamp is not None:
                self.latencies_s.append(now - stamp)
        return outcomes

    def ready(self) -> bool:
        return self.inner.ready()

    async def close(self) -> None:
        await self.inner.close()


def new_prefix() -> str:
    """A throwaway prefix (an identifier, so harel would accept it too)."""
    return "bench" + uuid.uuid4().hex[:10]


def peak_rss_mb() -> float:
    """The process's peak RSS so far (VmHWM, which ``reset_peak_rss`` can reset; else ru_maxrss)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux); elsewhere the peak stays the lifetime peak."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


class Bench:
    """One benchmark run on one Redis: every scenario, each on its own throwaway prefix."""

    def __init__(
        self,
        config: BenchConfig,
        url: str,
        *,
        log: Callable[[str], None] = lambda _: None,
        sink: str | None = None,
    ) -> None:
        self.config = config
        self.url = url
        self.log = log
        self.sink = sink or config.sink  # the spec with the run's placeholders filled in
        self.sync = redis.Redis.from_url(url)
        self.client = aioredis.Redis.from_url(url)
        self.client_baseline: ClientBaseline | None = baseline_for(self.sink)

    def spec_for(self, prefix: str) -> str:
        return self.sink.replace("{redis_url}", self.url).replace("{prefix}", prefix)

    def sink_for(self, prefix: str, *, sample_every: int = LATENCY_SAMPLE_EVERY) -> TimingSink:
        return TimingSink(
            resolve_sink(self.spec_for(prefix), self.config.sink_options), sample_every=sample_every
        )

    @contextlib.asynccontextmanager
    async def prefix(self) -> AsyncIterator[str]:
        name = new_prefix()
        try:
            yield name
        finally:
            delete_prefix(self.sync, name)

    async def close(self) -> None:
        await self.client.aclose()
        self.sync.close()

    # --- drain ----------------------------------------------------------------------------
    async def drain(self) -> list[dict[str, Any]]:
        rows = []
        for kind in self.config.kinds:
            # On a shared machine one drain can be far off the next: with ``repeat`` the
            # median drain is reported and every drain's rate is kept beside it.
            # A client baseline is as noisy as the relay: with ``repeat`` it runs as often,
            # alternating with the relay, and its median is the ratio's denominator. The
            # incumbent drain (one round-trip per entry) runs once: it is far slower.
            runs: list[RunFigures] = []
            bases: list[RunFigures] = []
            for _ in range(self.config.repeat):
                runs.append(await self.relay_drain(kind, self.config.backlog))
                if self.config.baseline and (self.client_baseline is not None or not bases):
                    bases.append(await self.baseline_drain(kind, self.config.backlog))
            relay = median_run(runs)
            baseline = median_run(bases) if bases else None
            row = kind_row(relay, baseline) | {"problems": sane([*runs, *bases])}
            if baseline is not None:
                row["baseline_by"] = self.baseline_name()
            if len(runs) > 1:
                row["relay_entries_per_s"] = [run.summary()["entries_per_s"] for run in runs]
            if len(bases) > 1:
                row["baseline_entries_per_s"] = [run.summary()["entries_per_s"] for run in bases]
            rows.append(row)
        return rows

    async def relay_drain(self, kind: Kind, count: int) -> RunFigures:
        async with self.prefix() as prefix:
            self.log(f"seeding {count} {kind} entries under {prefix!r}")
            seed(self.sync, prefix, kind, count, clock=time.time)
            sink = self.sink_for(prefix)
            options = SweepOptions(prefixes=(prefix,), batch=self.config.batch, once=True)
            self.log(f"draining {kind} with the relay")
            with _Meter(self.sync) as meter:
                await run_relay(
                    options,
                    redis=self.client,
                    sinks=dict.fromkeys(KINDS, sink),
                    metrics=RelayMetrics(CollectorRegistry()),
                    health=Health(),
                    stop=asyncio.Event(),
                )
            return meter.figures("relay", kind, count, sink, left=live_count(self.sync, prefix, kind))

    def baseline_name(self) -> str:
        """What the baseline is, for the report."""
        found = self.client_baseline
        if found is None:
            return "incumbent-style drain, one round-trip per entry"
        if found.publish is not None:
            return f"{found.scheme} client publishing the same bodies"
        return f"{found.scheme}'s own relay draining an identical backlog"

    async def baseline_drain(self, kind: Kind, count: int) -> RunFigures:
        found = self.client_baseline
        if found is not None and found.publish is not None:
            return await self.publish_baseline(kind, count, found.publish)
        if found is not None and found.drain_backlog is not None:
            return await self.drain_backlog_baseline(kind, count, found.drain_backlog)
        return await self.incumbent_drain(kind, count)

    async def publish_baseline(self, kind: Kind, count: int, publish: Publish) -> RunFigures:
        """The sink's client publishing the bodies of an identical backlog (rendered unmetered)."""
        async with self.prefix() as prefix:
            seed(self.sync, prefix, kind, count, clock=time.time)
            bodies, keys = await render_backlog(self.client, prefix, kind, relayed_at=time.time())
            self.log(f"publishing {len(bodies)} {kind} bodies with the {self.baseline_name()}")
            with _Meter(self.sync) as meter:
                confirmed = await publish(self.spec_for(prefix), bodies, keys, self.config.sink_options)
            return meter.run_figures("baseline", kind, count, confirmed, left=count - confirmed)

    async def drain_backlog_baseline(self, kind: Kind, count: int, drain: DrainBacklog) -> RunFigures:
        """Another relay draining an identical backlog its own way."""
        async with self.prefix() as prefix:
            seed(self.sync, prefix, kind, count, clock=time.time)
            self.log(f"draining {kind} with the {self.baseline_name()}")
            with _Meter(self.sync) as meter:
                delivered = await drain(self.url, prefix, kind)
            left = live_count(self.sync, prefix, kind)
            return meter.run_figures("baseline", kind, count, delivered, left=left)

    async def incumbent_drain(self, kind: Kind, count: int) -> RunFigures:
        async with self.prefix() as prefix:
            seed(self.sync, prefix, kind, count, clock=time.time)
            sink = self.sink_for(prefix)
            self.log(f"draining {kind} the incumbent's way")
            await sink.start()
            try:
                with _Meter(self.sync) as meter:
                    await drain_like_incumbent(self.client, prefix, kind, sink, clock=time.time)
            finally:
                await sink.close()
            return meter.figures("baseline", kind, count, sink, left=live_count(self.sync, prefix, kind))

    # --- scale ----------------------------------------------------------------------------
    async def scale(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batch": self.config.batch}
        for count in self.config.scale_backlogs:
            async with self.prefix() as prefix:
                self.log(f"scale: seeding {count} outbox entries")
                seed(self.sync, prefix, "outbox", count, clock=time.time)
                reset_peak_rss()
                rss_before_mb = peak_rss_mb()
                passes_s, delivered, cpu_s, wall_s = await self._passes(prefix)
                out[str(count)] = {
                    "backlog": count,
                    "delivered": delivered,
                    "left": live_count(self.sync, prefix, "outbox"),
                    "full_passes": len(passes_s),
                    "median_pass_s": rounded(percentile(passes_s, 50)),
                    "p99_pass_s": rounded(percentile(passes_s, 99)),
                    "entries_per_s": round(delivered / wall_s, 1) if wall_s else None,
                    "cpu_s": round(cpu_s, 3),
                    "rss_before_mb": round(rss_before_mb, 1),
                    "peak_rss_mb": round(peak_rss_mb(), 1),
                }
        small, large = (out[str(n)]["median_pass_s"] for n in self.config.scale_backlogs)
        out["pass_cost_ratio"] = round(large / small, 2) if small and large else None
        return out

    async def _passes(self, prefix: str) -> tuple[list[float], int, float, float]:
        """Drain with ``Sweeper.run_pass`` directly; durations of the passes that hit the batch."""
        sink = self.sink_for(prefix)
        options = SweepOptions(prefixes=(prefix,), batch=self.config.batch, once=True)
        sweeper = Sweeper(
            AsyncRedisStore(self.client, prefix=prefix),
            sinks=dict.fromkeys(KINDS, sink),
            options=options,
            metrics=RelayMetrics(CollectorRegistry()),
            clock=SYSTEM_CLOCK,
        )
        await sink.start()
        full: list[float] = []
        cpu0, wall0 = time.process_time(), time.monotonic()
        try:
            await sweeper.start()
            while True:
                started = time.monotonic()
                result = await sweeper.run_pass()
                if result.attempted >= self.config.batch:
                    full.append(time.monotonic() - started)
                if result.drained:
                    break
        finally:
            await sink.close()
        return full, sink.delivered, time.process_time() - cpu0, time.monotonic() - wall0

    # --- timers and idle (the long-running loop) --------------------------------------------
    async def timers(self) -> dict[str, Any]:
        rate, duration_s = self.config.timer_rate, self.config.timer_duration_s
        count = int(rate * duration_s)
        async with self.prefix() as prefix:
            # fire_at starts after seeding ends, with room for a slow machine's seeding rate. A
            # seeding overrun would make the first timers overdue before the relay starts and
            # measure catch-up instead of lag: say so.
            first_s = time.time() + 2.0 + count / 20_000
            fire_ats = [first_s + n / rate for n in range(count)]
            self.log(f"timers: seeding {count} timers due over {duration_s:.0f}s")
            seed(self.sync, prefix, "timer", count, clock=time.time, fire_ats=fire_ats)
            if time.time() > first_s:
                self.log(f"timers: seeding overran the head start by {time.time() - first_s:.1f}s")
            sink = self.sink_for(prefix, sample_every=1)  # every timer: "none early" is a claim on all
            until_s = fire_ats[-1] + self.config.poll_interval_s + 1.0
            with _Meter(self.sync) as meter:
                await self._run_until(prefix, sink, until_s)
            figures = meter.figures(
                "relay", "timer", count, sink, left=live_count(self.sync, prefix, "timer")
            )
        summary = figures.summary()
        bound_s = self.config.poll_interval_s + 0.05
        p99 = summary["p99_latency_s"]
        return summary | {
            "rate_per_s": rate,
            "poll_interval_s": self.config.poll_interval_s,
            "p99_bound_s": bound_s,
            "p99_within_bound": p99 is not None and p99 <= bound_s,
            "early": sum(1 for lag in figures.latencies_s if lag < 0),
        }

    async def idle(self) -> dict[str, Any]:
        duration_s = self.config.idle_duration_s
        async with self.prefix() as prefix:
            sink = self.sink_for(prefix)
            # the first seconds include start-up (lease, cursors); measure the steady state after
            settle_s = min(3.0, duration_s / 3)
            start_s = time.time()
            run = asyncio.create_task(self._run_until(prefix, sink, start_s + settle_s + duration_s))
            await asyncio.sleep(settle_s)
            with _Meter(self.sync) as meter:
                await asyncio.sleep(duration_s)
            await run
        commands = sum((meter.commands or {}).values()) if meter.commands is not None else None
        return {
            "duration_s": duration_s,
            "poll_interval_s": self.config.poll_interval_s,
            "commands": meter.commands,
            "commands_per_s": round(commands / duration_s, 2) if commands is not None else None,
            "cpu_share": round(meter.cpu_s / duration_s, 5),
        }

    async def _run_until(self, prefix: str, sink: Sink, until_s: float) -> None:
        async with self.running_relay(prefix, sink):
            await asyncio.sleep(max(0.0, until_s - time.time()))

    @contextlib.asynccontextmanager
    async def running_relay(self, prefix: str, sink: Sink, *, wake: bool = False) -> AsyncIterator[None]:
        """A long-running relay over ``prefix`` for the body's duration (stopped cleanly after)."""
        stop = asyncio.Event()
        config = self.config
        options = SweepOptions(
            prefixes=(prefix,), batch=config.batch, poll_interval_s=config.poll_interval_s, wake=wake
        )
        relay = asyncio.create_task(
            run_relay(
                options,
                redis=self.client,
                sinks=dict.fromkeys(KINDS, sink),
                metrics=RelayMetrics(CollectorRegistry()),
                health=Health(),
                stop=stop,
            )
        )
        try:
            yield
        finally:
            stop.set()
            await relay


class _Meter:
    """Wall, process CPU, Redis CPU and command counts between entering and leaving."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.commands: dict[str, int] | None = None
        self.cpu_s = self.wall_s = 0.0
        self.redis_cpu_s: float | None = None

    def __enter__(self) -> _Meter:
        self._calls = command_calls(self.client)
        self._redis_cpu = server_cpu_s(self.client)
        self._cpu, self._wall = time.process_time(), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.monotonic() - self._wall
        self.cpu_s = time.process_time() - self._cpu
        calls, redis_cpu = command_calls(self.client), server_cpu_s(self.client)
        if calls is not None and self._calls is not None:
            self.commands = commands_delta(self._calls, calls)
        if redis_cpu is not None and self._redis_cpu is not None:
            self.redis_cpu_s = redis_cpu - self._redis_cpu

    def figures(self, method: str, kind: Kind, count: int, sink: TimingSink, *, left: int) -> RunFigures:
        """A run through ``sink``: what it confirmed, with the latencies it sampled."""
        return self.run_figures(method, kind, count, sink.delivered, left=left, latencies_s=sink.latencies_s)

    def run_figures(
        self,
        method: str,
        kind: Kind,
        count: int,
        delivered: int,
        *,
        left: int,
        latencies_s: Sequence[float] = (),
    ) -> RunFigures:
        """The figures measured, with what the run delivered (a client baseline samples no latency)."""
        return RunFigures(
            method=method,
            kind=kind,
            entries=count,
            delivered=delivered,
            left=left,
            duration_s=self.wall_s,
            cpu_s=self.cpu_s,
            latencies_s=latencies_s,
            commands=self.commands,
            redis_cpu_s=None if self.redis_cpu_s is None else round(self.redis_cpu_s, 3),
            peak_rss_mb=round(peak_rss_mb(), 1),
        )


async def _run(
    config: BenchConfig, url: str, flavour: str, log: Callable[[str], None], *, owned: bool, sink: str
) -> dict[str, Any]:
    bench = Bench(config, url, log=log, sink=sink)
    report: dict[str, Any] = {
        "redis": flavour,
        "hiredis": redis.utils.HIREDIS_AVAILABLE,
        "sink": config.sink,
        "backlog": config.backlog,
        "batch": config.batch,
    }
    try:
        if "drain" in config.suites:
            report["kinds"] = await bench.drain()
        if "scale" in config.suites:
            report["scale"] = await bench.scale()
        if "timers" in config.suites:
            report["timers"] = await bench.timers()
        if "idle" in config.suites:
            report["idle"] = await bench.idle()
        if "wake" in config.suites:
            from relayd.bench.wake import wake_suite

            report["wake"] = await wake_suite(bench, owned=owned)
    finally:
        await bench.close()
    report["problems"] = [p for row in report.get("kinds", []) for p in row.pop("problems")]
    return report


def run_bench(config: BenchConfig, *, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run the configured suites on the configured (or a throwaway) Redis; return the report."""
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(bench_redis(config.redis_url))
        log(f"benchmarking on {target.flavour} at {target.url}")
        sink = config.sink
        if "{tmpdir}" in sink:
            tmpdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="relayd-bench-"))
            sink = sink.replace("{tmpdir}", tmpdir)
        if sink == f"webhook:{LOCAL_PLACEHOLDER}":
            sink = "webhook:" + stack.enter_context(http_target(config.http_server))
            log(f"started a {config.http_server} server at {sink.partition(':')[2]}")
        owned = config.redis_url is None  # a server the bench started: it may switch notifications on
        return asyncio.run(_run(config, target.url, target.flavour, log, owned=owned, sink=sink))
