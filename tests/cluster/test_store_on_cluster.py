"""The store on a real Redis Cluster through redis-py's cluster clients, prefix ``{shard-7}…``.

Every script must declare its keys (KEYS) for the cluster client to route it; all keys of a
hash-tagged prefix share one slot, so the multi-key scripts and transactions are legal.
"""

from __future__ import annotations

import time

import pytest
import redis.asyncio.cluster as aiocluster
from redis.cluster import RedisCluster as ClusterClient
from redis.crc import key_slot
from support.cluster import RedisCluster
from support.seeding import Entries
from support.workload import Workload, stored_ids

from store import (
    AsyncRedisStore,
    Event,
    Execution,
    Fence,
    Keyspace,
    RedisStore,
    StoreConflict,
    StoreFenced,
    TimerOp,
    timer_member,
)

pytestmark = pytest.mark.cluster

NOW = 1_700_000_000.0


def _exe(name: str) -> Execution:
    return Execution(id=name, definition_id="cluster-test")


def _seed(client: ClusterClient, prefix: str, outbox: int = 0, spawns: int = 0) -> None:
    """Write entries in the exact wire shape (docs/internals.md#key-space) without the store's commit.

    The read, ack and timer tests seed this way so that each tests one store operation.
    """
    entries = Entries(client.pipeline(), prefix)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    for seq in range(1, outbox + 1):
        entries.outbox(seq, None, f"ev-{seq}", kind="N", data={"n": seq})
    for seq in range(1, spawns + 1):
        entries.spawn(seq, "p1", f"p1.c{seq}", "r")
    entries.counters(outbox=outbox, spawns=spawns).pipe.execute()


def _seed_timers(client: ClusterClient, prefix: str, execution_id: str, fire_at: dict[str, float]) -> None:
    entries = Entries(client.pipeline(), prefix)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    for path, at in fire_at.items():
        entries.timer(execution_id, path, at)
    entries.pipe.execute()


def test_every_key_of_a_tagged_prefix_shares_one_slot(cluster_prefix: str) -> None:
    space = Keyspace(cluster_prefix)
    keys = [space.outbox, space.outbox_seq, space.spawns, space.timers, space.exe("x"), space.relay("lease")]

    assert len({key_slot(k.encode()) for k in keys}) == 1


def test_sync_commit_fast_and_complex_paths(cluster_client: ClusterClient, cluster_prefix: str) -> None:
    """The Lua CAS path and the WATCH/MULTI path both commit on the cluster, and conflicts hold."""
    store = RedisStore(cluster_client, prefix=cluster_prefix)
    exe = _exe("e1")

    store.save(exe)  # fast path: no emits
    seqs = store.commit(
        exe,
        [("e2", Event(kind="Go")), (None, Event(kind="Log"))],
        "evt-1",
        timers=(TimerOp(action="schedule", path="root.wait", fire_at=NOW),),
        spawns=(("e1.child", "root.fork", {"k": 1}),),
    )

    assert seqs == [1, 2]
    loaded = store.load("e1")
    assert loaded is not None
    assert loaded.version == 2
    assert store.is_processed("e1", "evt-1")
    assert [(e.seq, e.target_id) for e in store.pending_outbox()] == [(1, "e2"), (2, None)]
    assert [s.child_id for s in store.pending_spawns()] == ["e1.child"]
    assert store.due_timers(NOW) == [("e1", "root.wait", NOW)]
    stale = exe.model_copy(update={"version": 0})
    with pytest.raises(StoreConflict):
        store.commit(stale, [(None, Event(kind="Late"))])
    with pytest.raises(StoreConflict):
        store.commit(stale, [])


async def test_async_commit_fast_and_complex_paths(
    async_cluster_client: aiocluster.RedisCluster, cluster_prefix: str
) -> None:
    store = AsyncRedisStore(async_cluster_client, prefix=cluster_prefix)
    exe = _exe("a1")

    await store.save(exe)
    seqs = await store.commit(
        exe,
        [("a2", Event(kind="Go"))],
        "evt-1",
        timers=(TimerOp(action="schedule", path="root.wait", fire_at=NOW),),
        spawns=(("a1.child", "root.fork", {}),),
    )

    assert seqs == [1]
    loaded = await store.load("a1")
    assert loaded is not None
    assert loaded.version == 2
    assert [e.target_id for e in await store.pending_outbox(limit=10)] == ["a2"]
    assert [s.child_id for s in await store.pending_spawns(limit=10)] == ["a1.child"]
    with pytest.raises(StoreConflict):
        await store.commit(exe.model_copy(update={"version": 1}), [(None, Event(kind="Late"))])


def test_sync_purge_and_ids_with_prefix(cluster_client: ClusterClient, cluster_prefix: str) -> None:
    """WATCH, HSCAN / ZSCAN under it and the MULTI all go to the prefix's slot; SCAN finds ids."""
    store = RedisStore(cluster_client, prefix=cluster_prefix)
    parent, child = _exe("p1"), _exe("p1:fork:1")
    store.commit(
        parent,
        [("p1", Event(kind="Self")), ("p1:fork:1", Event(kind="Go"))],
        "evt-1",
        timers=(TimerOp(action="schedule", path="root.wait", fire_at=NOW),),
        spawns=(("p1:fork:1", "root.fork", {}),),
        trace={"step": 1},
    )
    store.save(child)

    assert sorted(store.ids_with_prefix("p1")) == ["p1", "p1:fork:1"]
    assert store.purge("p1", parent.version - 1) is False
    assert store.purge("p1", parent.version) is True

    assert store.ids_with_prefix("p1") == ["p1:fork:1"]
    assert [e.target_id for e in store.pending_outbox()] == ["p1:fork:1"]
    assert (store.pending_spawns(), store.due_timers(NOW), store.read_trace("p1")) == ([], [], [])
    assert not store.is_processed("p1", "evt-1")


async def test_async_purge_and_ids_with_prefix(
    async_cluster_client: aiocluster.RedisCluster, cluster_prefix: str
) -> None:
    store = AsyncRedisStore(async_cluster_client, prefix=cluster_prefix)
    exe = _exe("q1")
    await store.commit(exe, [("q1", Event(kind="Self"))], timers=(TimerOp("schedule", "w", NOW),))

    assert await store.ids_with_prefix("q") == ["q1"]
    assert await store.purge("q1", exe.version) is True

    assert (await store.ids_with_prefix("q"), await store.pending_outbox(), await store.due_timers(NOW)) == (
        [],
        [],
        [],
    )


def test_bounded_reads_and_batched_acks(cluster_client: ClusterClient, cluster_prefix: str) -> None:
    """Reads with ``limit`` come in seq order; many acks go in one call and resolve the reader."""
    store = RedisStore(cluster_client, prefix=cluster_prefix)
    _seed(cluster_client, cluster_prefix, outbox=25, spawns=25)

    first = store.pending_outbox(limit=10)
    acked = store.ack_outbox_many(e.seq for e in first)
    spawns = store.pending_spawns(limit=5)
    acked_spawns = store.ack_spawns_many(s.seq for s in spawns)

    assert [e.seq for e in first] == list(range(1, 11))
    assert acked == 10
    assert [s.child_id for s in spawns] == [f"p1.c{n}" for n in range(1, 6)]
    assert acked_spawns == 5
    assert [e.seq for e in store.pending_outbox(limit=100)] == list(range(11, 26))
    assert cluster_client.hlen(f"{cluster_prefix}:spawns") == 20


async def test_async_backlog_reader_on_the_cluster(
    async_cluster_client: aiocluster.RedisCluster, cluster_client: ClusterClient, cluster_prefix: str
) -> None:
    """The gap-tolerant reader's pipelined window and cursor checkpoint work on the cluster."""
    store = AsyncRedisStore(async_cluster_client, prefix=cluster_prefix)
    _seed(cluster_client, cluster_prefix, outbox=12)
    reader = store.backlog("outbox")
    await reader.start()

    got = await reader.read_new(5, now=NOW)
    await store.ack_outbox_many(e.field for e in got)
    reader.resolve(e.field for e in got)
    await reader.checkpoint()

    assert [e.seq for e in got] == [1, 2, 3, 4, 5]
    assert [e.seq for e in await reader.read_new(100, now=NOW)] == list(range(6, 13))
    assert await async_cluster_client.get(f"{cluster_prefix}:relay:cursor:outbox") == b"6"


def test_timer_compare_and_delete(cluster_client: ClusterClient, cluster_prefix: str) -> None:
    """A timer is removed only while it still fires at the delivered fire_at."""
    store = RedisStore(cluster_client, prefix=cluster_prefix)
    _seed_timers(cluster_client, cluster_prefix, "t1", {"a": NOW, "b": NOW + 1, "c": NOW + 2})

    rearmed = store.delete_timer("t1", "a", NOW - 5)  # the engine re-armed it meanwhile
    deleted = store.delete_timer("t1", "a", NOW)
    many = store.delete_timers_many([(timer_member("t1", "b"), NOW + 1), (timer_member("t1", "c"), NOW)])

    assert (rearmed, deleted, many) == (False, True, 1)
    assert [(t.member, t.fire_at) for t in store.due_timer_entries(NOW + 10, 10)] == [
        (timer_member("t1", "c").encode(), NOW + 2)
    ]


def test_fenced_acks_run_on_the_cluster_and_refuse_a_foreign_lease(
    cluster_client: ClusterClient, cluster_prefix: str
) -> None:
    """The lease key shares the prefix's slot, so the fenced ack scripts route; a lease holding
    another token refuses them."""
    store = RedisStore(cluster_client, prefix=cluster_prefix)
    _seed(cluster_client, cluster_prefix, outbox=3)
    _seed_timers(cluster_client, cluster_prefix, "t1", {"a": NOW})
    lease = Keyspace(cluster_prefix).relay("lease")
    fence = Fence(lease, "ours")
    cluster_client.set(lease, "theirs")

    with pytest.raises(StoreFenced):
        store.ack_outbox_many(["1", "2"], fence=fence)
    with pytest.raises(StoreFenced):
        store.delete_timers_many([(timer_member("t1", "a"), NOW)], fence=fence)
    cluster_client.set(lease, "ours")
    acked = store.ack_outbox_many(["1", "2"], fence=fence)
    deleted = store.delete_timers_many([(timer_member("t1", "a"), NOW)], fence=fence)

    assert (acked, deleted) == (2, 1)


async def test_async_timer_compare_and_delete(
    async_cluster_client: aiocluster.RedisCluster, cluster_client: ClusterClient, cluster_prefix: str
) -> None:
    store = AsyncRedisStore(async_cluster_client, prefix=cluster_prefix)
    _seed_timers(cluster_client, cluster_prefix, "t2", {"p": NOW})

    assert await store.due_timers(NOW, limit=5) == [("t2", "p", NOW)]
    assert not await store.delete_timer("t2", "p", NOW + 1)
    assert await store.delete_timer("t2", "p", NOW)
    assert await store.due_timers(NOW + 1) == []


def test_workload_ledger_matches_the_cluster(cluster_client: ClusterClient, cluster_prefix: str) -> None:
    """The fault suite's writer runs on the cluster: its ledger is exactly what is stored."""
    store = RedisStore(cluster_client, prefix=cluster_prefix)

    ledger = Workload(store, rate_per_s=10_000, abort_every=5).run(40)

    assert set(ledger.committed) == stored_ids(cluster_client, cluster_prefix)
    assert ledger.aborted == 8
    assert ledger.burned


@pytest.mark.crash
def test_store_continues_after_a_master_fails_over(redis_cluster: RedisCluster, cluster_prefix: str) -> None:
    """Kill the master of ``{shard-7}``: a replica takes over, data survives, the store goes on.

    Reads, acks and the timer script (EVALSHA on a node that never loaded it) run after the
    failover through the same client.
    """
    client = redis_cluster.client()
    store = RedisStore(client, prefix=cluster_prefix)
    _seed(client, cluster_prefix, outbox=3)
    _seed_timers(client, cluster_prefix, "f1", {"a": NOW})
    assert store.delete_timer("f1", "missing", NOW) is False  # the script is loaded on the old master
    redis_cluster.wait_replicated()

    started = time.monotonic()
    dead = redis_cluster.kill_master_of(cluster_prefix)
    promoted = redis_cluster.wait_failover(dead)
    failover_s = time.monotonic() - started

    try:
        assert promoted.port != dead.port
        assert redis_cluster.master_of(cluster_prefix).port == promoted.port
        assert [e.seq for e in store.pending_outbox(limit=10)] == [1, 2, 3]
        assert store.ack_outbox_many([1, 2]) == 2
        assert store.delete_timer("f1", "a", NOW) is True
        assert failover_s < 15
    finally:
        client.close()
        redis_cluster.restart(dead)  # back to three replicas for the tests that follow
    print(f"cluster failover_s={failover_s:.2f}")
