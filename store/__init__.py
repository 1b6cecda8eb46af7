"""The execution store: models, the store seam and the Redis stores (sync and asyncio).

Wire-compatible with harel 0.9's Redis key space (docs/internals.md#key-space), with the relay's additions:
bounded gap-tolerant reads, many acks per round-trip and an atomic timer compare-and-delete.

Every public name is imported from here (``from store import Keyspace``). Each is loaded from
its module on first use, so a program that needs the key space alone does not load the models
and their pydantic machinery (``tests/benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from store.async_redis_store import AsyncRedisStore
    from store.backlog import RawEntry, RawTimer, SeqWindow
    from store.clients import async_client_from_url, sentinel_options, sync_client_from_url
    from store.codec import dumps, encode_outbox_value, encode_spawn_value, parse_seq
    from store.errors import (
        MALFORMED_REASONS,
        MalformedEntry,
        StoreConflict,
        StoreError,
        StoreFenced,
        StoreUnavailable,
    )
    from store.fence import Fence
    from store.keys import Keyspace, parse_timer_member, timer_member
    from store.models import (
        ChildState,
        Event,
        Execution,
        ExecutionPage,
        ExecutionSummary,
        OutboxEntry,
        SpawnEntry,
        Status,
        TimerOp,
    )
    from store.plans import glob_escape
    from store.protocols import AsyncExecutionStore, ExecutionStore
    from store.readers import AsyncBacklogReader, BacklogReader
    from store.redis_store import RedisStore
    from store.urls import RedisUrl, parse_url, redact_url

#: Each public name and the module that defines it.
_HOMES: dict[str, str] = {
    "AsyncRedisStore": "store.async_redis_store",
    "RawEntry": "store.backlog",
    "RawTimer": "store.backlog",
    "SeqWindow": "store.backlog",
    "dumps": "store.codec",
    "encode_outbox_value": "store.codec",
    "encode_spawn_value": "store.codec",
    "parse_seq": "store.codec",
    "MALFORMED_REASONS": "store.errors",
    "MalformedEntry": "store.errors",
    "StoreConflict": "store.errors",
    "StoreError": "store.errors",
    "StoreFenced": "store.errors",
    "Fence": "store.fence",
    "StoreUnavailable": "store.errors",
    "Keyspace": "store.keys",
    "parse_timer_member": "store.keys",
    "timer_member": "store.keys",
    "ChildState": "store.models",
    "Event": "store.models",
    "Execution": "store.models",
    "ExecutionPage": "store.models",
    "ExecutionSummary": "store.models",
    "OutboxEntry": "store.models",
    "SpawnEntry": "store.models",
    "Status": "store.models",
    "TimerOp": "store.models",
    "AsyncExecutionStore": "store.protocols",
    "ExecutionStore": "store.protocols",
    "AsyncBacklogReader": "store.readers",
    "BacklogReader": "store.readers",
    "RedisStore": "store.redis_store",
    "async_client_from_url": "store.clients",
    "sentinel_options": "store.clients",
    "sync_client_from_url": "store.clients",
    "glob_escape": "store.plans",
    "RedisUrl": "store.urls",
    "parse_url": "store.urls",
    "redact_url": "store.urls",
}

__all__ = [
    "MALFORMED_REASONS",
    "AsyncBacklogReader",
    "AsyncExecutionStore",
    "AsyncRedisStore",
    "BacklogReader",
    "ChildState",
    "Event",
    "Execution",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "Fence",
    "Keyspace",
    "MalformedEntry",
    "OutboxEntry",
    "RawEntry",
    "RawTimer",
    "RedisStore",
    "RedisUrl",
    "SeqWindow",
    "SpawnEntry",
    "Status",
    "StoreConflict",
    "StoreError",
    "StoreFenced",
    "StoreUnavailable",
    "TimerOp",
    "async_client_from_url",
    "dumps",
    "encode_outbox_value",
    "encode_spawn_value",
    "glob_escape",
    "parse_seq",
    "parse_timer_member",
    "parse_url",
    "redact_url",
    "sentinel_options",
    "sync_client_from_url",
    "timer_member",
]


def __getattr__(name: str) -> _typing.Any:
    """Load a public name from its module on first use (PEP 562), then keep it here."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
