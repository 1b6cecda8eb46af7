"""The store's behaviour, over {sync, async} x {fakeredis + lupa, real redis-server}."""

from __future__ import annotations

import asyncio
import math
import threading

import orjson
import pytest

from store import Event, Execution, Status, StoreConflict, TimerOp


def _exe(**kw: object) -> Execution:
    return Execution(definition_id="d", **kw)  # type: ignore[arg-type]


async def test_fresh_insert_loads_back_with_version_one(store) -> None:
    """A new execution (version 0) commits as version 1 and loads back equal."""
    exe = _exe(context={"n": 1})

    await store.commit(exe, [])

    assert exe.version == 1
    assert exe == await store.load(exe.id)


async def test_load_of_missing_execution_is_none(store) -> None:
    assert await store.load("nope") is None


async def test_unknown_fields_survive_load_then_save(store, raw, prefix) -> None:
    """A field written by a newer engine is kept through load → save."""
    raw.set(f"{prefix}:exe:x1", orjson.dumps({"id": "x1", "definition_id": "d", "version": 1, "future": [1]}))

    exe = await store.load("x1")
    await store.save(exe)

    assert orjson.loads(raw.get(f"{prefix}:exe:x1"))["future"] == [1]
    assert orjson.loads(raw.get(f"{prefix}:exe:x1"))["version"] == 2


@pytest.mark.parametrize("path", ["fast", "complex"])
async def test_stale_commit_conflicts_and_rolls_the_version_back(store, path) -> None:
    """Both commit paths refuse a stale version and leave ``exe.version`` as it was."""
    exe = _exe()
    await store.commit(exe, [])
    stale = exe.model_copy()
    await store.commit(exe, [])
    emits = [(None, Event(kind="E"))] if path == "complex" else []

    with pytest.raises(StoreConflict) as info:
        await store.commit(stale, emits)

    assert stale.version == 1
    assert (info.value.expected, info.value.found) == (1, 2)
    assert (await store.load(exe.id)).version == 2


@pytest.mark.parametrize("path", ["fast", "complex"])
async def test_fresh_insert_over_an_existing_row_conflicts(store, path) -> None:
    exe = _exe()
    await store.commit(exe, [])
    twin = _exe(id=exe.id)
    await store.commit(exe, [])
    emits = [(None, Event(kind="E"))] if path == "complex" else []

    with pytest.raises(StoreConflict):
        await store.commit(twin, emits)

    assert twin.version == 0


class EngineConflict(Exception):
    def __init__(self, execution_id: str, expected: int, found: int | None) -> None:
        super().__init__(execution_id)
        self.found = found


@pytest.mark.parametrize("path", ["fast", "complex"])
async def test_the_engine_gets_its_own_conflict_error(make_store, path) -> None:
    store = make_store(conflict_error=EngineConflict)
    exe = _exe()
    await store.commit(exe, [])
    stale = exe.model_copy()
    await store.commit(exe, [])
    emits = [(None, Event(kind="E"))] if path == "complex" else []

    with pytest.raises(EngineConflict):
        await store.commit(stale, emits)


@pytest.mark.parametrize("path", ["fast", "complex"])
async def test_racing_commits_have_exactly_one_winner_per_version(store, mode, path) -> None:
    """Writers that loaded the same version race; each version is won exactly once."""
    exe = _exe()
    await store.commit(exe, [])
    rounds, writers = 5, 6
    winners: list[int] = []
    emits = [(None, Event(kind="E"))] if path == "complex" else []

    async def attempt(copy: Execution) -> None:
        try:
            await store.commit(copy, emits)
            winners.append(copy.version)
        except StoreConflict:
            assert copy.version == version

    for _ in range(rounds):
        version = (await store.load(exe.id)).version
        copies = [(await store.load(exe.id)) for _ in range(writers)]
        if mode == "async":
            await asyncio.gather(*(attempt(c) for c in copies))
        else:
            threads = [threading.Thread(target=asyncio.run, args=(attempt(c),)) for c in copies]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    assert list(range(2, 2 + rounds)) == winners
    assert 1 + rounds == (await store.load(exe.id)).version


async def test_a_commit_that_fails_midway_leaves_nothing(store, raw, prefix) -> None:
    """A value that cannot be encoded fails the commit before anything (even a seq) is written."""
    exe = _exe()
    await store.commit(exe, [])
    before = sorted(raw.keys(f"{prefix}:*"))

    with pytest.raises(TypeError):
        await store.commit(
            exe,
            [(None, Event(kind="E"))],
            "ev",
            timers=(TimerOp("schedule", "p", 1.0),),
            spawns=(("c", "r", {"bad": object()}),),
            trace={"t": 1},
        )

    assert exe.version == 1
    assert before == sorted(raw.keys(f"{prefix}:*"))
    assert not await store.is_processed(exe.id, "ev")


async def test_a_complex_commit_lost_to_a_writer_leaves_only_burned_seqs(store, raw, prefix) -> None:
    exe = _exe()
    await store.commit(exe, [])
    stale = exe.model_copy()
    await store.commit(exe, [])

    with pytest.raises(StoreConflict):
        await store.commit(stale, [(None, Event(kind="E"))], "ev", timers=(TimerOp("schedule", "p", 1.0),))

    assert raw.hlen(f"{prefix}:outbox") == 0
    assert raw.zcard(f"{prefix}:timers") == 0
    assert not await store.is_processed(exe.id, "ev")
    assert raw.get(f"{prefix}:outbox:seq") == b"1"  # burned, harmless


async def test_key_names_and_types_follow_the_key_space_table(store, raw, prefix) -> None:
    exe = _exe()

    seqs = await store.commit(
        exe,
        [("t", Event(kind="E"))],
        "ev",
        timers=(TimerOp("schedule", "p", 5.0),),
        spawns=(("c", "r", {"a": 1}),),
        trace={"step": 1},
    )

    i = exe.id
    expected = {
        f"exe:{i}": b"string",
        "outbox": b"hash",
        "outbox:seq": b"string",
        "spawns": b"hash",
        "spawns:seq": b"string",
        f"processed:{i}": b"set",
        "timers": b"zset",
        f"trace:{i}": b"list",
        f"trace:seq:{i}": b"string",
    }
    assert {f"{prefix}:{k}".encode(): t for k, t in expected.items()} == {
        k: raw.type(k) for k in raw.keys(f"{prefix}:*")
    }
    assert seqs == [1]
    outbox = orjson.loads(raw.hget(f"{prefix}:outbox", "1"))
    spawn = orjson.loads(raw.hget(f"{prefix}:spawns", "1"))
    # Beside harel's keys, the commit time on the Redis server's clock (``ct``).
    (now_s, _) = raw.time()
    assert {"t": "t", "e": outbox["e"], "ct": outbox["ct"]} == outbox
    assert {"p": i, "c": "c", "r": "r", "x": {"a": 1}, "ct": outbox["ct"]} == spawn
    assert now_s - 60 <= outbox["ct"] <= now_s + 1
    assert raw.zscore(f"{prefix}:timers", f"{i}\x00p") == 5.0


async def test_outbox_seqs_come_back_in_emit_order(store) -> None:
    exe = _exe()
    events = [Event(kind=f"E{n}") for n in range(3)]

    seqs = await store.commit(exe, [("t", e) for e in events])

    assert seqs == [1, 2, 3]
    assert [(s, e.id) for s, e in zip(seqs, events, strict=True)] == [
        (o.seq, o.event.id) for o in await store.pending_outbox()
    ]


async def test_trace_is_a_ring_with_a_stable_index(make_store) -> None:
    store = make_store(trace_max=3)
    exe = _exe()
    for n in range(5):
        await store.commit(exe, [], trace={"n": n})
    await store.append_trace(exe.id, {"n": 5})
    await store.append_trace(exe.id, {"n": 6, "index": 99})

    steps = await store.read_trace(exe.id)

    assert [(s["n"], s["index"]) for s in steps] == [(4, 4), (5, 5), (6, 99)]


async def test_processed_marks_dedupe_and_load_for_event_answers_both(store) -> None:
    exe = _exe()
    await store.commit(exe, [], "ev1")

    assert await store.is_processed(exe.id, "ev1")
    assert not await store.is_processed(exe.id, "ev2")
    assert (exe, True) == await store.load_for_event(exe.id, "ev1")
    assert (exe, False) == await store.load_for_event(exe.id, "ev2")
    assert await store.load_for_event("missing", "ev1") == (None, False)


async def test_list_executions_pages_over_thousands_with_every_filter(store, raw, prefix) -> None:
    """Paging visits every execution once; each filter keeps exactly its matches."""
    pipe = raw.pipeline(transaction=False)
    expected: dict[str, tuple[str, Status, bool]] = {}
    statuses = list(Status)
    for n in range(2500):
        eid = f"e{n:05d}"
        exe = _exe(id=eid, status=statuses[n % len(statuses)], parent_id=None if n % 3 else "p")
        exe.definition_id = f"d{n % 4}"
        expected[eid] = (exe.definition_id, exe.status, exe.parent_id is None)
        pipe.set(f"{prefix}:exe:{eid}", exe.model_dump_json())
    pipe.set(f"{prefix}:exe:broken", b"{not json")
    pipe.execute()

    async def collect(**filters: object) -> list[str]:
        ids: list[str] = []
        cursor = None
        while True:
            page = await store.list_executions(limit=200, cursor=cursor, **filters)
            ids += [s.id for s in page.items]
            if page.next_cursor is None:
                return ids
            cursor = page.next_cursor

    everything = await collect()
    assert sorted(expected) == sorted(everything)
    wanted = {Status.DONE, Status.FAILED}
    assert sorted(k for k, (_, st, _) in expected.items() if st in wanted) == sorted(
        await collect(status=wanted)
    )
    assert sorted(k for k, (d, _, _) in expected.items() if d == "d1") == sorted(
        await collect(definition_id="d1")
    )
    assert sorted(k for k, (_, _, root) in expected.items() if root) == sorted(await collect(roots_only=True))
    combined = await collect(status=[Status.RUNNING], definition_id="d2", roots_only=True)
    assert sorted(
        k for k, (d, st, root) in expected.items() if d == "d2" and st == Status.RUNNING and root
    ) == sorted(combined)


PATHS = ["a:b:c", "with spaces in it", "naïve/ünïcödé/日本", "x\x01y"]


async def test_timer_members_round_trip_any_path(store) -> None:
    exe = _exe()
    ops = tuple(TimerOp("schedule", p, 10.0 + n) for n, p in enumerate(PATHS))
    await store.commit(exe, [], timers=ops)

    due = await store.due_timers(100.0)

    assert [(exe.id, p, 10.0 + n) for n, p in enumerate(PATHS)] == due
    assert due[:2] == await store.due_timers(100.0, limit=2)
    assert due[:1] == await store.due_timers(10.5)


async def test_cancel_op_disarms_and_schedule_re_arms(store) -> None:
    exe = _exe()
    await store.commit(exe, [], timers=(TimerOp("schedule", "a", 1.0), TimerOp("schedule", "b", 2.0)))

    await store.commit(exe, [], timers=(TimerOp("cancel", "a"), TimerOp("schedule", "b", 3.0)))

    assert [(exe.id, "b", 3.0)] == await store.due_timers(10.0)


async def test_delete_timer_only_removes_the_fire_at_it_was_given(store) -> None:
    exe = _exe()
    fire_at = 1_700_000_000.123456
    await store.commit(exe, [], timers=(TimerOp("schedule", PATHS[2], fire_at),))

    assert not await store.delete_timer(exe.id, PATHS[2], fire_at + 1e-6)
    assert await store.delete_timer(exe.id, PATHS[2], fire_at)
    assert await store.due_timers(2e9) == []


async def test_delete_timers_many_compares_each_score(store, raw, prefix) -> None:
    key = f"{prefix}:timers"
    raw.zadd(key, {"a\x00p": 1.5, "b\x00p": 2.5, "c\x00p": 3.5})

    removed = await store.delete_timers_many(
        [(b"a\x00p", 1.5), ("b\x00p", 9.0), ("c\x00p", 3.5), ("zz", 1.0)]
    )

    assert removed == 2
    assert raw.zrange(key, 0, -1) == [b"b\x00p"]


async def test_delete_timers_many_matches_a_score_however_redis_spells_it(store, raw, prefix) -> None:
    """Redis 7.0 writes 0.1 as 0.10000000000000001 and 1e16 as 10000000000000000: still the
    same double as Python's shortest spelling, so deleted; one ulp away is another score."""
    key = f"{prefix}:timers"
    raw.zadd(key, {"a\x00p": 0.1, "b\x00p": 1e16, "c\x00p": 1e-7, "d\x00p": 0.1})

    removed = await store.delete_timers_many(
        [(b"a\x00p", 0.1), ("b\x00p", 1e16), ("c\x00p", 1e-7), ("d\x00p", math.nextafter(0.1, 1.0))]
    )

    assert removed == 3
    assert raw.zrange(key, 0, -1) == [b"d\x00p"]


async def test_delete_timers_many_over_several_chunks_keeps_re_armed_and_counts_repeats_once(
    store, raw, prefix
) -> None:
    """The script works in chunks of 500 members: 1200 timers, every third re-armed, one repeated."""
    key = f"{prefix}:timers"
    raw.zadd(key, {f"e{n}\x00p": 1_700_000_000.0 + n / 7 for n in range(1200)})
    seen = [(f"e{n}\x00p", 1_700_000_000.0 + n / 7 + (1.0 if n % 3 == 0 else 0.0)) for n in range(1200)]

    removed = await store.delete_timers_many([*seen, seen[1]])

    assert removed == 800
    assert sorted(raw.zrange(key, 0, -1)) == sorted(f"e{n}\x00p".encode() for n in range(0, 1200, 3))


async def test_due_timer_entries_are_raw_ordered_and_skip(store, raw, prefix) -> None:
    raw.zadd(f"{prefix}:timers", {"a\x00p": 1.0, "no-separator": 2.0, "c\x00p": 3.0, "later\x00p": 50.0})

    entries = await store.due_timer_entries(10.0, 2, skip=[b"a\x00p"])

    assert [(t.member, t.fire_at) for t in entries] == [(b"no-separator", 2.0), (b"c\x00p", 3.0)]
    assert await store.due_timers(10.0) == [("a", "p", 1.0), ("c", "p", 3.0)]  # malformed skipped


async def test_pending_and_acks_of_many(store, raw, prefix) -> None:
    exe = _exe()
    seqs = await store.commit(
        exe, [("t", Event(kind=f"E{n}")) for n in range(5)], spawns=(("c", "r", {}),) * 3
    )

    assert seqs == [e.seq for e in await store.pending_outbox(limit=10)]
    assert seqs[:2] == [e.seq for e in await store.pending_outbox(limit=2)]
    assert seqs[:2] == [e.seq for e in await store.pending_outbox(limit=2)]  # still pending: same
    assert await store.ack_outbox_many([seqs[0], str(seqs[1]), seqs[1]]) == 2
    await store.ack_outbox(seqs[2])
    assert seqs[3:] == [e.seq for e in await store.pending_outbox(limit=10)]
    assert await store.ack_spawns_many(["1", 2]) == 2
    await store.ack_spawn(3)
    assert await store.pending_spawns(limit=5) == []
    assert raw.hlen(f"{prefix}:outbox") == 2


async def test_pending_outbox_with_a_limit_returns_the_first_pending_in_seq_order(store, raw, prefix) -> None:
    """Entries acked elsewhere drop out; a late lower seq is still found."""
    exe = _exe()
    seqs = await store.commit(exe, [("t", Event(kind="E"))] * 6)
    assert seqs[:3] == [e.seq for e in await store.pending_outbox(limit=3)]
    raw.hdel(f"{prefix}:outbox", "1", "2")

    page = await store.pending_outbox(limit=3)

    assert [e.seq for e in page] == [3, 4, 5]
