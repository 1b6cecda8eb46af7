"""Store fixtures: one behavioural suite over {sync, async} x {fake, real}.

``store`` is a ``RedisStore`` or an ``AsyncRedisStore`` behind one awaitable facade, so each
test is written once; ``raw`` is a sync client on the same server for inspecting keys.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import redis

from store import AsyncRedisStore, RedisStore

#: Methods of the stores and readers that do I/O (awaited on the async twin).
_IO = {
    "load", "load_for_event", "list_executions", "save", "commit", "is_processed", "read_trace",
    "append_trace", "pending_outbox", "pending_spawns", "ack_outbox", "ack_spawn", "ack_outbox_many",
    "ack_spawns_many", "due_timers", "due_timer_entries", "delete_timer", "delete_timers_many",
    "start", "read_new", "checkpoint", "purge", "ids_with_prefix",
}  # fmt: skip


class Awaitable:
    """Wrap a sync or async store/reader so tests always ``await`` its I/O methods."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "backlog":
            return lambda *a, **k: Awaitable(attr(*a, **k))
        if name not in _IO or inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """Which twin the test drives."""
    return str(request.param)


@pytest.fixture
def make_store(
    mode: str, sync_client: redis.Redis, async_client: Any, prefix: str
) -> Callable[..., Awaitable]:
    """Build a store of the parametrised twin on the parametrised backend."""

    def make(**kwargs: Any) -> Awaitable:
        kwargs.setdefault("prefix", prefix)
        if mode == "sync":
            return Awaitable(RedisStore(sync_client, **kwargs))
        return Awaitable(AsyncRedisStore(async_client, **kwargs))

    return make


@pytest.fixture
def store(make_store: Callable[..., Awaitable]) -> Awaitable:
    return make_store()


@pytest.fixture
def raw(sync_client: redis.Redis) -> redis.Redis:
    """A sync client on the same server, for arranging and inspecting keys directly."""
    return sync_client
