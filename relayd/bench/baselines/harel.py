"""The harel sink's baseline: harel 0.9's own relay draining the same backlog into its transport.

Not a client posting bodies (the contract of the other baselines): what a harel deployment
runs without relayd is harel's own relay, so the harel sink is measured against it on a backlog
seeded identically (``relayd.bench.seed``) under another prefix. Outbox entries are drained by
the relay of harel's transport driver (``AsyncTransportDriver._flush``: read the whole outbox,
then per entry load the target, publish at its priority, ack); timers by its worker's
``fire_due_timers`` (read every due timer, then per timer load, publish, delete; all at once).
Both run on harel's own async Redis store and transport over one bounded blocking pool, the
pool the sink uses, since harel's default pool fails past its connection limit under that
fan-out. harel is a test dependency, imported here only.
"""

from __future__ import annotations

from typing import Final

import redis.asyncio as aioredis

from relayd.envelope import Kind

#: Connections of the pool harel's store and transport share (the sink's default).
MAX_CONNECTIONS: Final = 64
#: How long a command waits for a free pooled connection.
POOL_WAIT_S: Final = 30.0


async def drain_backlog(redis_url: str, prefix: str, kind: Kind) -> int:
    """Drain ``kind`` (``outbox`` or ``timer``) under ``prefix`` the way harel does; entries drained."""
    pool = aioredis.BlockingConnectionPool.from_url(
        redis_url, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT_S
    )
    client = aioredis.Redis(connection_pool=pool)
    try:
        return await drain_with(client, prefix, kind)
    finally:
        await client.aclose()
        await pool.disconnect()


async def drain_with(client: aioredis.Redis, prefix: str, kind: Kind) -> int:
    """``drain_backlog`` over a client given (one harel store and transport share it)."""
    from harel.engine.aio.distributed import AsyncTransportDriver, AsyncWorker
    from harel.engine.aio_store import AsyncRedisStore
    from harel.engine.aio_transport import AsyncRedisTransport

    store = AsyncRedisStore(client, prefix=prefix)
    transport = AsyncRedisTransport(client, prefix=prefix)
    if kind == "outbox":
        before = int(await client.hlen(f"{prefix}:outbox"))
        # The relay reads no definition: None stands for the machine it never runs.
        await AsyncTransportDriver(None, store, transport)._flush()
        return before - int(await client.hlen(f"{prefix}:outbox"))
    if kind == "timer":
        fired: int = await AsyncWorker(store, transport, definitions={}).fire_due_timers()
        return fired
    raise ValueError(f"harel's relay drains outbox entries and timers, not {kind!r}")
