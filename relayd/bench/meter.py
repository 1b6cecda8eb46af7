"""The bench's instruments: a sink wrapper that times deliveries, and a meter of CPU, RSS and commands.

Each measures one stretch of one scenario; the suites (``relayd.bench.drain`` and the others)
decide what runs inside it, and ``relayd.bench.stats`` turns the readings into figures.
"""

from __future__ import annotations

import contextlib
import resource
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import redis

from relayd.bench.server import command_calls, server_cpu_s
from relayd.bench.stats import RunFigures, commands_delta, committed_at
from relayd.envelope import Envelope, Kind
from relayd.envelope.batch import Batch
from relayd.sinks.base import Delivered, Outcome, Sink, all_delivered

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


class Meter:
    """Wall, process CPU, Redis CPU and command counts between entering and leaving."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.commands: dict[str, int] | None = None
        self.cpu_s = self.wall_s = 0.0
        self.redis_cpu_s: float | None = None

    def __enter__(self) -> Meter:
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
