"""The execution store: models, the store seam and the Redis stores (sync and asyncio).

Wire-compatible with harel 0.9's Redis key space (DESIGN §2), with the relay's additions:
bounded gap-tolerant reads, many acks per round-trip and an atomic timer compare-and-delete.
"""

from __future__ import annotations

from store.async_redis_store import AsyncRedisStore
from store.backlog import RawEntry, RawTimer, SeqWindow
from store.errors import MALFORMED_REASONS, MalformedEntry, StoreConflict, StoreError, StoreUnavailable
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
from store.protocols import AsyncExecutionStore, ExecutionStore
from store.readers import AsyncBacklogReader, BacklogReader
from store.redis_store import RedisStore

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
    "Keyspace",
    "MalformedEntry",
    "OutboxEntry",
    "RawEntry",
    "RawTimer",
    "RedisStore",
    "SeqWindow",
    "SpawnEntry",
    "Status",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "TimerOp",
    "parse_timer_member",
    "timer_member",
]
