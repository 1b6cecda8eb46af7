"""``purge`` and ``ids_with_prefix``: the same answers and the same Redis afterwards as harel's
own stores on identical data, and a concurrent writer makes a purge touch nothing.

Each run seeds one data set twice, under two prefixes of the same server, in harel's wire
shape (``json.dumps``) and ours (``orjson``) mixed; harel's store works on one copy and ours on
the other, and every answer and the final key space (prefix stripped) must be equal. The
shared hashes and the timer zset hold more rows than one scan page, so paging is exercised.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
import redis
import redis.asyncio
from harel.engine.aio_store import AsyncRedisStore as HarelAsyncRedisStore
from harel.engine.store import RedisStore as HarelRedisStore

from store import AsyncRedisStore, Event, Execution, RedisStore, StoreConflict, TimerOp
from store.purging import PAGE

#: Executions of the data set; "gone" has leftover rows but no execution key. A child's id
#: extends its parent's, and some ids are spelt differently inside JSON (quote, non-ASCII).
STORED = ["root", "root:fork:1", "root:fork:2", "other", "we*ird[1]?", 'quo"te', "päth-é"]
IDS = [*STORED, "gone"]
VERSION = 3

OUTBOX_ROWS = 2 * PAGE + 500
SPAWN_ROWS = PAGE + 200
FILLER_TIMERS = 300  # past the small-zset encoding, and more than one ZSCAN page with MATCH


def _seed(client: redis.Redis, prefix: str) -> None:
    """The data set in the wire shape of docs/internals.md#key-space, written directly."""
    pipe = client.pipeline(transaction=False)
    for eid in STORED:
        pipe.set(f"{prefix}:exe:{eid}", json.dumps({"id": eid, "definition_id": "d", "version": VERSION}))
    for n, eid in enumerate(IDS):
        pipe.sadd(f"{prefix}:processed:{eid}", f"ev-{n}", f"ev-{n + 100}")
        steps = [json.dumps({"s": i, "index": i}) for i in range(2)]
        pipe.rpush(f"{prefix}:trace:{eid}", *steps)
        pipe.set(f"{prefix}:trace:seq:{eid}", 2)
        for path, at in (("a", 10.0 + n), ("b/c", 20.5), ("région", 1e9 + n)):
            pipe.zadd(f"{prefix}:timers", {f"{eid}\x00{path}": at})
    for n in range(FILLER_TIMERS):
        pipe.zadd(f"{prefix}:timers", {f"filler-{n}\x00p": float(n)})
    encoders = (lambda doc: json.dumps(doc).encode(), orjson.dumps)
    for seq in range(1, OUTBOX_ROWS + 1):
        target = None if seq % 11 == 0 else IDS[seq % len(IDS)] if seq % 3 else f"filler-{seq}"
        event = json.dumps({"id": f"ev-{seq}", "kind": "K", "data": {"n": seq}})
        pipe.hset(f"{prefix}:outbox", str(seq), encoders[seq % 2]({"t": target, "e": event}))
    for seq in range(1, SPAWN_ROWS + 1):
        parent = IDS[seq % len(IDS)] if seq % 4 else f"filler-{seq}"
        value = {"p": parent, "c": f"{parent}:r:{seq}", "r": "r", "x": {"n": seq}}
        pipe.hset(f"{prefix}:spawns", str(seq), encoders[seq % 2](value))
    pipe.set(f"{prefix}:outbox:seq", OUTBOX_ROWS)
    pipe.set(f"{prefix}:spawns:seq", SPAWN_ROWS)
    pipe.execute()


def _dump(client: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key of ``prefix`` (prefix stripped) with its whole content, comparable by ``==``."""
    out: dict[str, Any] = {}
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        name = key.decode()[len(prefix) + 1 :]
        kind = client.type(key).decode()
        if kind == "string":
            out[name] = client.get(key)
        elif kind == "hash":
            # a row's JSON spelling differs by the writer, not by the store: compare parsed
            out[name] = {f: orjson.loads(v) for f, v in client.hgetall(key).items()}
        elif kind == "set":
            out[name] = client.smembers(key)
        elif kind == "zset":
            out[name] = client.zrange(key, 0, -1, withscores=True)
        else:
            out[name] = client.lrange(key, 0, -1)
    return out


#: (expected_version, id) purges in order: a match, a stale version, a child left after its
#: parent, an id with only leftovers, one never seen, ids needing glob escapes or JSON escapes.
PURGES = [
    ("root", VERSION),
    ("root:fork:1", VERSION - 1),
    ("gone", 0),
    ("never", 5),
    ("we*ird[1]?", VERSION),
    ('quo"te', VERSION),
    ("päth-é", VERSION),
    ("root", VERSION),
]
QUERIES = ["", "root", "root:", "root:fork:", "we*", "we*ird[1]", "quo", 'quo"', "päth", "x", "?"]


def _sync_run(store: Any) -> list[Any]:
    answers: list[Any] = [sorted(store.ids_with_prefix(q)) for q in QUERIES]
    answers += [store.purge(eid, version) for eid, version in PURGES]
    answers += [sorted(store.ids_with_prefix(q)) for q in QUERIES]
    return answers


async def _async_run(store: Any) -> list[Any]:
    answers: list[Any] = [sorted(await store.ids_with_prefix(q)) for q in QUERIES]
    answers += [await store.purge(eid, version) for eid, version in PURGES]
    answers += [sorted(await store.ids_with_prefix(q)) for q in QUERIES]
    return answers


def test_sync_purge_and_ids_match_harels_store(sync_client: redis.Redis, prefix: str) -> None:
    """Same answers, same key space afterwards, as harel's sync RedisStore."""
    _seed(sync_client, f"{prefix}h")
    _seed(sync_client, f"{prefix}o")
    before = _dump(sync_client, f"{prefix}o")

    theirs = _sync_run(HarelRedisStore(sync_client, prefix=f"{prefix}h"))
    ours = _sync_run(RedisStore(sync_client, prefix=f"{prefix}o"))

    assert theirs == ours
    assert _dump(sync_client, f"{prefix}h") == _dump(sync_client, f"{prefix}o")
    purged = ours[len(QUERIES) : len(QUERIES) + len(PURGES)]
    assert purged == [True, False, False, False, True, True, True, False]
    assert _dump(sync_client, f"{prefix}o") != before


async def test_async_purge_and_ids_match_harels_store(
    sync_client: redis.Redis, async_client: redis.asyncio.Redis, prefix: str
) -> None:
    """Same answers, same key space afterwards, as harel's asyncio AsyncRedisStore."""
    _seed(sync_client, f"{prefix}h")
    _seed(sync_client, f"{prefix}o")

    theirs = await _async_run(HarelAsyncRedisStore(async_client, prefix=f"{prefix}h"))
    ours = await _async_run(AsyncRedisStore(async_client, prefix=f"{prefix}o"))

    assert theirs == ours
    assert _dump(sync_client, f"{prefix}h") == _dump(sync_client, f"{prefix}o")


async def test_purge_removes_every_trace_of_the_execution_and_nothing_else(store, raw, prefix) -> None:
    """After a purge no key or row names the execution; its child and a neighbour are whole."""
    parent, child, other = Execution(definition_id="d"), None, Execution(definition_id="d")
    await store.commit(
        parent,
        [(other.id, _event()), (parent.id, _event())],
        "e1",
        timers=[TimerOp("schedule", "wait", 5.0)],
        spawns=[(f"{parent.id}:fork:1", "fork", {})],
        trace={"step": 1},
    )
    child = Execution(id=f"{parent.id}:fork:1", definition_id="d", parent_id=parent.id)
    await store.commit(child, [(parent.id, _event())], timers=[TimerOp("schedule", "t", 6.0)])
    await store.commit(other, [(child.id, _event())], "e2", timers=[TimerOp("schedule", "t", 7.0)])
    keep_child, keep_other = _rows_naming(raw, prefix, child.id), _rows_naming(raw, prefix, other.id)

    purged = await store.purge(parent.id, parent.version)

    assert purged is True
    assert _rows_naming(raw, prefix, parent.id) == []
    assert await store.load(parent.id) is None
    assert keep_child == _rows_naming(raw, prefix, child.id)
    assert keep_other == _rows_naming(raw, prefix, other.id)
    assert sorted(await store.ids_with_prefix(parent.id)) == [child.id]


async def test_a_stale_version_purges_nothing(store, raw, prefix) -> None:
    exe = Execution(definition_id="d")
    await store.commit(exe, [(exe.id, _event())], "e1", timers=[TimerOp("schedule", "w", 1.0)])
    before = _dump(raw, prefix)

    purged = await store.purge(exe.id, exe.version - 1)

    assert purged is False
    assert before == _dump(raw, prefix)


async def test_a_purged_id_refuses_a_stale_commit_but_takes_a_new_execution(store) -> None:
    """As harel's contract says: after a purge only a brand-new execution may reuse the id."""
    exe = Execution(definition_id="d")
    await store.commit(exe, [])
    stale = exe.model_copy()
    assert await store.purge(exe.id, exe.version)

    with pytest.raises(StoreConflict):
        await store.commit(stale, [])
    await store.commit(Execution(id=exe.id, definition_id="d"), [])

    assert (await store.load(exe.id)).version == 1


async def test_malformed_rows_are_left_for_the_relay(store, raw, prefix) -> None:
    """A row no engine could have written names nobody: the purge leaves it to be dead-lettered."""
    exe = Execution(definition_id="d")
    await store.commit(exe, [(exe.id, _event())])
    raw.hset(f"{prefix}:outbox", "900", b"not json " + exe.id.encode())
    raw.hset(f"{prefix}:spawns", "901", orjson.dumps({"p": [exe.id]}))

    assert await store.purge(exe.id, exe.version)

    assert raw.hkeys(f"{prefix}:outbox") == [b"900"]
    assert raw.hkeys(f"{prefix}:spawns") == [b"901"]


@pytest.mark.parametrize("moment", ["hscan", "zscan"])
async def test_a_concurrent_writer_makes_the_purge_touch_nothing(  # noqa: PLR0917  # fixtures
    store, raw, prefix, mode, monkeypatch, moment
) -> None:
    """The engine commits the execution while the purge pages the backlog: False, nothing deleted."""
    exe = Execution(definition_id="d")
    await store.commit(exe, [(exe.id, _event())], "e1", spawns=[("c", "r", {})], trace={"s": 1})
    engine = RedisStore(raw, prefix=prefix)
    seen: dict[str, Any] = {}

    def concurrent_commit() -> None:
        moved = engine.load(exe.id)
        engine.commit(moved, [(exe.id, _event())], timers=[TimerOp("schedule", "w", 2.0)])
        seen["after"] = _dump(raw, prefix)

    _call_before(monkeypatch, mode, moment, concurrent_commit)

    purged = await store.purge(exe.id, exe.version)

    assert purged is False
    assert seen["after"] == _dump(raw, prefix)
    assert (await store.load(exe.id)).version == exe.version + 1


async def test_a_write_elsewhere_during_the_purge_does_not_stop_it(
    store, raw, prefix, mode, monkeypatch
) -> None:
    """Only the execution's own key guards the purge: another execution's commit is no conflict."""
    exe, other = Execution(definition_id="d"), Execution(definition_id="d")
    await store.commit(exe, [(exe.id, _event())])
    engine = RedisStore(raw, prefix=prefix)
    _call_before(monkeypatch, mode, "hscan", lambda: engine.commit(other, [(None, _event())]))

    purged = await store.purge(exe.id, exe.version)

    assert purged is True
    assert _rows_naming(raw, prefix, exe.id) == []
    assert len(raw.hkeys(f"{prefix}:outbox")) == 1


def _call_before(monkeypatch: pytest.MonkeyPatch, mode: str, command: str, hook: Any) -> None:
    """Run ``hook`` (on another connection) once, just before the pipeline's first ``command``."""
    pipeline = redis.client.Pipeline if mode == "sync" else redis.asyncio.client.Pipeline
    original = getattr(pipeline, command)
    pending = [hook]

    if mode == "sync":

        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            while pending:
                pending.pop()()
            return original(self, *args, **kwargs)

    else:

        async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]  # or sync
            while pending:
                pending.pop()()
            return await original(self, *args, **kwargs)

    monkeypatch.setattr(pipeline, command, patched)


def _event() -> Event:
    return Event(kind="K")


def _rows_naming(client: redis.Redis, prefix: str, execution_id: str) -> list[Any]:
    """Every key, outbox / spawn row and timer that belongs to ``execution_id``, sorted."""
    suffixes = ("exe:", "processed:", "trace:", "trace:seq:")
    own = [s for s in suffixes if client.exists(f"{prefix}:{s}{execution_id}")]
    outbox = client.hgetall(f"{prefix}:outbox").items()
    spawns = client.hgetall(f"{prefix}:spawns").items()
    member = f"{execution_id}\x00".encode()
    return sorted(
        map(
            str,
            [
                *own,
                *(f for f, v in outbox if orjson.loads(v)["t"] == execution_id),
                *(f for f, v in spawns if orjson.loads(v)["p"] == execution_id),
                *(m for m in client.zrange(f"{prefix}:timers", 0, -1) if m.startswith(member)),
            ],
        )
    )
