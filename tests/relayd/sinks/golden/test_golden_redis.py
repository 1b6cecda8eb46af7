"""Golden bytes of the Redis sinks, read back from a redis-server of the test's own: every key
the sink wrote, its type and content (stream entries' fields and values in order, list items,
hash fields, sorted-set members and scores).

redis-stream runs both of its paths against one recorded file: the Lua script, and the
pipeline of XADDs it falls back to where an ACL refuses scripts. harel runs with its handoff
defaults over a store holding what relayd read (the entries are still in harel's outbox, the
timer armed), so it picks them up; its spawn creates the child with harel's own code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
import redis.asyncio as aioredis
from support.harel_app import write_definitions
from support.redis_server import RedisServer

from .conftest import (
    COMMITTED_AT,
    FIRE_AT,
    PREFIX,
    SPAWN_CHILD,
    check,
    deliver_all,
    deliveries,
    open_sink,
    outbox_window,
    payload,
    spawns,
    timers,
)

#: Where the redis-stream sink writes: one stream per ordering key.
STREAM_TEMPLATE: Final = "golden:{target}"


async def snapshot(client: aioredis.Redis) -> dict[str, Any]:
    """Every key's type and content, in a form that keeps each value's bytes."""
    taken: dict[str, Any] = {}
    for key in sorted(await client.keys("*")):
        kind = (await client.type(key)).decode()
        content: Any
        if kind == "string":
            content = payload(await client.get(key))
        elif kind == "hash":
            content = [
                [field.decode(), payload(value)]
                for field, value in sorted((await client.hgetall(key)).items())
            ]
        elif kind == "list":
            content = [payload(item) for item in await client.lrange(key, 0, -1)]
        elif kind == "zset":
            scored = await client.zrange(key, 0, -1, withscores=True)
            content = [[payload(pair[0]), pair[1]] for pair in scored]
        elif kind == "stream":
            # a stream entry's id is the server's clock: left out, the entries keep their order
            content = [
                [[name.decode(), payload(value)] for name, value in fields.items()]
                for _, fields in await client.xrange(key)
            ]
        else:
            content = f"<{kind}>"
        taken[key.decode()] = {"type": kind, "content": content}
    return taken


def written(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The keys the sink added or changed (what the test put there for it to read is left out)."""
    return {key: value for key, value in after.items() if before.get(key) != value}


@pytest.mark.parametrize("path", ["script", "pipeline"])
@pytest.mark.parametrize(
    ("case", "flags"),
    [("redis-stream", {}), ("redis-stream-cloudevents", {"format": "cloudevents"})],
    ids=["redis-stream", "redis-stream-cloudevents"],
)
async def test_redis_stream_writes_the_recorded_entries(
    case: str, flags: dict[str, Any], path: str, own_redis_server: RedisServer
) -> None:
    url = own_redis_server.url
    if path == "pipeline":  # a user whose ACL refuses scripts: the sink falls back to XADDs
        admin = own_redis_server.client()
        admin.acl_setuser(
            "relay", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-@scripting"]
        )
        admin.close()
        url = f"redis://relay:pw@127.0.0.1:{own_redis_server.port}/0"
    client = aioredis.Redis(port=own_redis_server.port)
    try:
        before = await snapshot(client)
        sink = await open_sink(f"redis-stream:{url}?stream={STREAM_TEMPLATE}", **flags)
        try:
            await deliver_all(sink)
        finally:
            await sink.close()
        after = await snapshot(client)
    finally:
        await client.aclose()

    check(
        case,
        {
            "sink": f"redis-stream:redis://127.0.0.1:<port>/0?stream={STREAM_TEMPLATE}",
            "flags": flags,
            "keys": written(before, after),
        },
    )


async def _seed_harel_store(client: aioredis.Redis) -> None:
    """What harel holds when relayd reads: the outbox entries and the spawn still in its hashes
    (its relay has not acked them; the sink looks at their fields only), the timer armed, and
    the ``order`` that is the target and the parent, at priority 3, through harel's own store."""
    from harel.engine.aio_store import AsyncRedisStore
    from harel.engine.execution import Execution, Status

    parent = Execution(id="order-7", definition_id="order", status=Status.RUNNING, priority=3)
    parent.active_path = "Work"
    await AsyncRedisStore(client, prefix=PREFIX).save(parent)
    window = outbox_window()
    await client.hset(f"{PREFIX}:outbox", mapping=dict.fromkeys(window.fields, b"{}"))  # type: ignore[attr-defined]
    await client.hset(f"{PREFIX}:spawns", "45", b"{}")
    for envelope in timers():
        member = f"{envelope.body['execution_id']}\x00{envelope.body['path']}"
        await client.zadd(f"{PREFIX}:timers", {member: FIRE_AT})


async def test_harel_writes_the_recorded_transport_keys(own_redis_server: RedisServer) -> None:
    """Outbox entries (and a retried one) and a timer, published into harel's transport. The
    timer goes first: harel's rule holds a timer while events for its workflow are queued."""
    client = aioredis.Redis(port=own_redis_server.port)
    try:
        await _seed_harel_store(client)
        before = await snapshot(client)
        sink = await open_sink(f"harel:{own_redis_server.url}")
        try:
            named = dict(deliveries())
            await deliver_all(sink, [(name, named[name]) for name in ("timer", "outbox", "outbox retried")])
        finally:
            await sink.close()
        after = await snapshot(client)
    finally:
        await client.aclose()

    check("harel", {"sink": "harel:redis://127.0.0.1:<port>/0", "keys": written(before, after)})


#: harel's own clock stamps the child it creates (relayd hands harel no clock): the times in the
#: child's record, and its timer's due time, are normalised.
HAREL_TIMES: Final = re.compile(rb'"(created_at|updated_at)":(\d+(\.\d+)?)')


async def test_harel_spawn_writes_the_recorded_child(own_redis_server: RedisServer, tmp_path: Path) -> None:
    definitions = write_definitions(tmp_path / "definitions")
    client = aioredis.Redis(port=own_redis_server.port)
    try:
        await _seed_harel_store(client)
        before = await snapshot(client)
        sink = await open_sink(f"harel:{own_redis_server.url}?definitions={definitions}")
        try:
            await deliver_all(sink, [("spawn", spawns())])
        finally:
            await sink.close()
        after = await snapshot(client)
    finally:
        await client.aclose()

    keys = written(before, after)
    child = keys[f"{PREFIX}:exe:{SPAWN_CHILD}"]["content"]
    record = child["text"].encode()
    assert orjson.loads(record)["created_at"] > COMMITTED_AT  # harel's clock, now
    child["text"] = HAREL_TIMES.sub(rb'"\1":"<harel clock>"', record).decode()
    for armed in keys[f"{PREFIX}:timers"]["content"]:
        if armed[0]["text"].startswith(SPAWN_CHILD):  # the child's own timer, not the one seeded
            armed[1] = "<harel clock + timeout>"
    check("harel-spawn", {"sink": "harel:redis://127.0.0.1:<port>/0?definitions=DIR", "keys": keys})
