"""The harness every suite of ``relayd bench`` runs on: its configuration, throwaway prefixes, sinks
and a long-running relay.

A suite (``relayd.bench.drain``, ``scale``, ``timers``, ``idle``, ``wake``, ``steady``) is a
coroutine taking a ``Bench``; ``relayd.bench.runner`` picks the suites and assembles the report.
Every prefix is ``bench<hex>`` and every key under it is deleted when its scenario ends, even on
failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import redis
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from relayd.bench.baselines import ClientBaseline, baseline_for
from relayd.bench.meter import LATENCY_SAMPLE_EVERY, TimingSink
from relayd.bench.server import delete_prefix
from relayd.engine.loop import run_relay
from relayd.engine.notify import NEEDED_FLAGS, configured_flags, notifications_ready
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS, Kind
from relayd.observability.health import Health
from relayd.observability.metrics import RelayMetrics
from relayd.sinks import resolve_sink
from relayd.sinks.base import Sink, SinkOptions

#: The default sink: one stream per benchmark prefix on the benchmarked Redis, trimmed.
DEFAULT_SINK: Final = "redis-stream:{redis_url}?stream={prefix}:bench:stream&maxlen=10000"


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
    steady_rates: tuple[int, ...] = (1_000, 5_000, 20_000)
    steady_seconds: float = 8.0
    steady_warmup_s: float = 2.0
    poll_interval_s: float = SweepOptions().poll_interval_s
    sink_options: SinkOptions = field(default_factory=SinkOptions)
    http_server: str = "aiohttp"  # the server behind ``webhook:local`` (relayd.bench.http_target)


class Notifications(NamedTuple):
    """Whether the server publishes the keyspace events wake-up needs, and whether the bench
    switched them on for the suite."""

    ready: bool
    configured_by_bench: bool


def new_prefix() -> str:
    """A throwaway prefix (an identifier, so harel would accept it too)."""
    return "bench" + uuid.uuid4().hex[:10]


class Bench:
    """One benchmark run on one Redis: every scenario, each on its own throwaway prefix.

    ``owned``: the bench started this redis-server itself, so a suite may change its
    configuration (and puts it back); on a ``--redis-url`` it never does.
    """

    def __init__(
        self,
        config: BenchConfig,
        url: str,
        *,
        log: Callable[[str], None] = lambda _: None,
        sink: str | None = None,
        owned: bool = False,
    ) -> None:
        self.config = config
        self.url = url
        self.log = log
        self.owned = owned
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

    @contextlib.asynccontextmanager
    async def keyspace_events(self) -> AsyncIterator[Notifications]:
        """Keyspace events on for the body when the bench may configure this Redis (``owned``), and
        put back after; yields whether the server publishes what wake-up needs."""
        before = configured_flags(await self.client.config_get("notify-keyspace-events"))
        changed = False
        if self.owned and not notifications_ready(before):
            await self.client.config_set("notify-keyspace-events", before + NEEDED_FLAGS)
            changed = True
        try:
            flags = configured_flags(await self.client.config_get("notify-keyspace-events"))
            yield Notifications(ready=notifications_ready(flags), configured_by_bench=changed)
        finally:
            if changed:
                await self.client.config_set("notify-keyspace-events", before)

    async def run_until(self, prefix: str, sink: Sink, until_s: float) -> None:
        """A long-running relay over ``prefix`` until the epoch time ``until_s``."""
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
