"""Wire compatibility with harel 0.9's own RedisStore, both directions, on one Redis."""

from __future__ import annotations

import pytest
from harel.engine.execution import Execution as HarelExecution
from harel.engine.store import RedisStore as HarelRedisStore
from harel.engine.store import StoreConflict as HarelStoreConflict
from harel.engine.store import TimerOp as HarelTimerOp
from harel.spec.states import Event as HarelEvent

from store import Event, Execution, RedisStore, Status, TimerOp

PATH = "par/région a:b"


def test_a_backlog_harel_wrote_reads_correctly_in_ours(sync_client, prefix) -> None:
    harel = HarelRedisStore(sync_client, prefix=prefix)
    ours = RedisStore(sync_client, prefix=prefix)
    exe = HarelExecution(definition_id="d", context={"k": [1, 2]})
    ev = HarelEvent(kind="Ping", data={"n": 1})

    seqs = harel.commit(
        exe,
        [("target-1", ev), (None, HarelEvent(kind="Pong"))],
        "e0",
        timers=(HarelTimerOp("schedule", PATH, 1234.5),),
        spawns=(("child-1", "root/p", {"seed": True}),),
        trace={"step": "x"},
    )

    loaded = ours.load(exe.id)
    assert loaded is not None
    assert (loaded.id, loaded.version, loaded.context) == (exe.id, 1, {"k": [1, 2]})
    assert ours.is_processed(exe.id, "e0")
    outbox = ours.pending_outbox()
    assert [(s, t) for s, t in zip(seqs, ["target-1", None], strict=True)] == [
        (e.seq, e.target_id) for e in outbox
    ]
    assert (ev.id, "Ping", {"n": 1}) == (outbox[0].event.id, outbox[0].event.kind, outbox[0].event.data)
    assert [e.seq for e in outbox] == [e.seq for e in ours.pending_outbox(limit=5)]
    spawn = ours.pending_spawns(limit=5)[0]
    assert (exe.id, "child-1", "root/p", {"seed": True}) == (
        spawn.parent_id,
        spawn.child_id,
        spawn.root_path,
        spawn.context,
    )
    assert [(exe.id, PATH, 1234.5)] == ours.due_timers(2000.0, limit=10)
    assert ours.read_trace(exe.id)[0]["index"] == 0
    assert [exe.id] == _all_listed(ours, definition_id="d")


def _all_listed(store: RedisStore, **filters: object) -> list[str]:
    """Every id ``list_executions`` yields, paging until the SCAN cursor ends.

    One SCAN page may hold none of this prefix's keys on a server shared with other tests.
    """
    ids, cursor = [], None
    while True:
        page = store.list_executions(cursor=cursor, **filters)  # type: ignore[arg-type]
        ids += [s.id for s in page.items]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def test_what_ours_writes_loads_and_reads_in_harel(sync_client, prefix) -> None:
    ours = RedisStore(sync_client, prefix=prefix)
    harel = HarelRedisStore(sync_client, prefix=prefix)
    exe = Execution(definition_id="d", status=Status.RUNNING, context={"a": "é"})
    ev = Event(kind="Ping", data={"n": 2})

    seqs = ours.commit(
        exe,
        [("t1", ev)],
        "e1",
        timers=(TimerOp("schedule", PATH, 99.25),),
        spawns=(("c1", "r", {"x": 1}),),
        trace={"s": 1},
    )

    loaded = harel.load(exe.id)
    assert (loaded.id, loaded.version, loaded.status.value, loaded.context) == (
        exe.id,
        1,
        "RUNNING",
        {"a": "é"},
    )
    assert harel.is_processed(exe.id, "e1")
    entry = harel.pending_outbox()[0]
    assert (seqs[0], "t1", ev.id, {"n": 2}) == (entry.seq, entry.target_id, entry.event.id, entry.event.data)
    spawn = harel.pending_spawns()[0]
    assert (exe.id, "c1", "r", {"x": 1}) == (spawn.parent_id, spawn.child_id, spawn.root_path, spawn.context)
    assert [(exe.id, PATH, 99.25)] == harel.due_timers(100.0)
    assert harel.read_trace(exe.id) == [{"s": 1, "index": 0}]
    harel.commit(loaded, [])  # harel continues the execution where ours left it
    assert ours.load(exe.id).version == 2


def test_harel_models_and_conflict_in_our_store_come_back_as_harel_types(sync_client, prefix) -> None:
    ours = RedisStore(
        sync_client,
        prefix=prefix,
        execution_model=HarelExecution,
        event_model=HarelEvent,
        conflict_error=HarelStoreConflict,
    )
    exe = HarelExecution(definition_id="d")
    ours.commit(exe, [("t", HarelEvent(kind="K"))])
    stale = exe.model_copy()
    ours.commit(exe, [])

    with pytest.raises(HarelStoreConflict):
        ours.commit(stale, [])

    assert isinstance(ours.load(exe.id), HarelExecution)
    assert isinstance(ours.pending_outbox()[0].event, HarelEvent)
