"""What the ``wake`` suite needs of the bench that runs it, as a protocol.

``relayd.bench.runner`` runs the suite and hands it its ``Bench``; the suite names only what it
uses, so it does not import the runner back (no import cycle, annotations included).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import redis
import redis.asyncio as aioredis

from relayd.sinks.base import Sink


class WakeConfig(Protocol):
    """The run's settings the suite reads."""

    @property
    def poll_interval_s(self) -> float: ...
    @property
    def wake_commits(self) -> int: ...


class LatencySink(Sink, Protocol):
    """A sink that counts confirmed deliveries and keeps their commit-to-delivery latencies."""

    @property
    def delivered(self) -> int: ...
    @property
    def latencies_s(self) -> array[float]: ...


class WakeBench(Protocol):
    """The bench the suite runs on: its Redis clients, settings, log, prefixes, sinks and relays."""

    @property
    def config(self) -> WakeConfig: ...
    @property
    def client(self) -> aioredis.Redis: ...
    @property
    def sync(self) -> redis.Redis: ...
    @property
    def log(self) -> Callable[[str], None]: ...
    def prefix(self) -> AbstractAsyncContextManager[str]: ...
    def sink_for(self, prefix: str, *, sample_every: int = ...) -> LatencySink: ...
    def running_relay(
        self, prefix: str, sink: Sink, *, wake: bool = ...
    ) -> AbstractAsyncContextManager[None]: ...
