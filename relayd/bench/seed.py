"""Seed a benchmark backlog through ``store.RedisStore``, and drain one the incumbent's way.

Seeding goes through the store's own commit (``CHUNK`` emits, spawns or timers per commit), so
every entry has the exact wire shape an engine writes. Each outbox event and spawn context
carries the commit time under ``committed_at``; a timer's reference time is its ``fire_at``.

``render_backlog`` renders a seeded backlog's envelopes as the relay would hand them to a sink
(attempt 1, one stamp), for a client baseline to publish (``relayd.bench.baselines``).

The incumbent baseline drains like the incumbent inline relay: read the whole structure at once
(HGETALL / a full ZRANGEBYSCORE), then, in seq (fire_at) order, deliver one entry per sink call
and delete it, one round-trip each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import redis
import redis.asyncio as aioredis

from relayd.bench.stats import COMMITTED_AT
from relayd.envelope import Kind
from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelope, outbox_envelopes, spawn_envelope, timer_envelope
from relayd.sinks.base import Delivered, Sink
from store import Event, Execution, Keyspace, RawEntry, RawTimer, RedisStore, TimerOp, parse_seq

#: Entries written per store commit while seeding (one MULTI/EXEC each).
CHUNK: Final = 1000
#: Distinct outbox targets (per-target ordering keys) the seeded events spread over.
TARGETS: Final = 100


def seed(
    client: redis.Redis,
    prefix: str,
    kind: Kind,
    count: int,
    *,
    clock: Callable[[], float],
    fire_ats: Sequence[float] | None = None,
) -> None:
    """Commit ``count`` entries of ``kind`` under ``prefix``; timers fire at ``fire_ats`` or now."""
    store: RedisStore = RedisStore(client, prefix=prefix)
    for start in range(0, count, CHUNK):
        numbers = range(start, min(start + CHUNK, count))
        exe = Execution(id=f"bench-{kind}-{start}", definition_id="relayd.bench")
        now = clock()
        if kind == "outbox":
            emits: list[tuple[str | None, Event]] = [
                (f"target-{n % TARGETS}", Event(kind="bench", data={COMMITTED_AT: now, "n": n}))
                for n in numbers
            ]
            store.commit(exe, emits)
        elif kind == "spawn":
            spawns = [(f"child-{n}", "bench", {COMMITTED_AT: now, "n": n}) for n in numbers]
            store.commit(exe, [], spawns=spawns)
        else:
            timers = [
                TimerOp("schedule", f"wait.{n}", fire_ats[n] if fire_ats is not None else now)
                for n in numbers
            ]
            store.commit(exe, [], timers=timers)


def live_count(client: redis.Redis, prefix: str, kind: Kind) -> int:
    """Entries of ``kind`` still waiting under ``prefix`` (HLEN / ZCARD)."""
    ks = Keyspace(prefix)
    if kind == "timer":
        return int(client.zcard(ks.timers))
    return int(client.hlen(ks.outbox if kind == "outbox" else ks.spawns))


async def render_backlog(
    client: aioredis.Redis, prefix: str, kind: Kind, *, relayed_at: float
) -> tuple[list[bytes], list[str | None]]:
    """The ``relayd/1`` JSON and ordering key of every entry of ``kind`` under ``prefix``, in order."""
    ks = Keyspace(prefix)
    if kind == "timer":
        rows: list[tuple[bytes, float]] = await client.zrange(ks.timers, 0, -1, withscores=True)  # type: ignore[assignment]  # withscores pairs
        timers = Batch.of(
            [
                timer_envelope(
                    RawTimer(member, float(score)), prefix=prefix, attempt=1, relayed_at=relayed_at
                )
                for member, score in rows
            ],
            kind,
        )
        return timers.render(), timers.keys()
    stored: dict[bytes, bytes] = await client.hgetall(ks.outbox if kind == "outbox" else ks.spawns)  # type: ignore[assignment]  # decode_responses off
    entries = sorted(
        (RawEntry(f.decode(), parse_seq(f), v) for f, v in stored.items()),
        key=lambda e: e.seq if e.seq is not None else -1,
    )
    if kind == "outbox":
        window, _, _ = outbox_envelopes(entries, prefix=prefix, attempt=1, relayed_at=relayed_at)
        return window.render(), window.keys()
    batch = Batch.of(
        [spawn_envelope(e, prefix=prefix, attempt=1, relayed_at=relayed_at) for e in entries], kind
    )
    return batch.render(), batch.keys()


async def drain_like_incumbent(
    client: aioredis.Redis, prefix: str, kind: Kind, sink: Sink, *, clock: Callable[[], float]
) -> int:
    """Read everything at once, then deliver and delete one entry per round-trip; return acks."""
    ks = Keyspace(prefix)
    acked = 0
    if kind == "timer":
        rows: list[tuple[bytes, float]] = await client.zrangebyscore(  # type: ignore[assignment]  # withscores pairs
            ks.timers, "-inf", clock(), withscores=True
        )
        for member, score in rows:
            envelope = timer_envelope(
                RawTimer(member, float(score)), prefix=prefix, attempt=1, relayed_at=clock()
            )
            if await _deliver_one(sink, envelope):
                acked += int(await client.zrem(ks.timers, member))
        return acked
    key = ks.outbox if kind == "outbox" else ks.spawns
    build = outbox_envelope if kind == "outbox" else spawn_envelope
    stored: dict[bytes, bytes] = await client.hgetall(key)  # type: ignore[assignment]  # decode_responses off
    entries = [RawEntry(f.decode(), parse_seq(f), v) for f, v in stored.items()]
    entries.sort(key=lambda e: e.seq if e.seq is not None else -1)
    for entry in entries:
        envelope = build(entry, prefix=prefix, attempt=1, relayed_at=clock())
        if await _deliver_one(sink, envelope):
            acked += int(await client.hdel(key, entry.field))
    return acked


async def _deliver_one(sink: Sink, envelope: Any) -> bool:
    outcomes = await sink.deliver(Batch.of([envelope]))
    return bool(outcomes) and isinstance(outcomes[0], Delivered)
