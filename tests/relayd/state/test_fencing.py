"""Fenced writes: every ack, dead-letter move and attempts write checks the lease token in the
same script call, and a wrong token (another replica took over) or none changes nothing."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from relayd.state import scripts
from relayd.state.attempts import AttemptRecord, load_attempts, save_attempts
from relayd.state.deadletters import DeadMove, move_to_dead_letters
from relayd.state.keys import RelayKeys
from store import AsyncRedisStore, Fence, Keyspace, StoreFenced, timer_member
from store.fence import FENCED_TAG, fenced_call, fenced_refusal
from store.scripts import FENCED_HDEL, TIMER_COMPARE_DELETE

pytestmark = pytest.mark.usefixtures("backend")

OURS = "host-a/1/aa"
THEIRS = "host-b/2/bb"


async def _store_with_backlog(client, prefix: str) -> AsyncRedisStore:
    store = AsyncRedisStore(client, prefix=prefix)
    keyspace = store.keyspace
    await client.hset(keyspace.outbox, mapping={"1": b"a", "2": b"b"})
    await client.hset(keyspace.spawns, mapping={"1": b"s"})
    await client.zadd(keyspace.timers, {timer_member("exe", "p"): 5.5})
    return store


def _fence(prefix: str, token: str = OURS) -> Fence:
    return Fence(RelayKeys(Keyspace(prefix)).lease, token)


@pytest.mark.parametrize("lease", [THEIRS, None], ids=["another-holder", "no-holder"])
async def test_acks_are_refused_and_delete_nothing_without_our_token(async_client, prefix, lease):
    store = await _store_with_backlog(async_client, prefix)
    if lease is not None:
        await async_client.set(RelayKeys(store.keyspace).lease, lease)
    fence = _fence(prefix)

    with pytest.raises(StoreFenced):
        await store.ack_outbox_many(["1", "2"], fence=fence)
    with pytest.raises(StoreFenced):
        await store.ack_spawns_many(["1"], fence=fence)
    with pytest.raises(StoreFenced):
        await store.delete_timers_many([(timer_member("exe", "p"), 5.5)], fence=fence)

    assert await async_client.hlen(store.keyspace.outbox) == 2
    assert await async_client.hlen(store.keyspace.spawns) == 1
    assert await async_client.zcard(store.keyspace.timers) == 1


async def test_acks_with_our_token_delete_as_before(async_client, prefix):
    store = await _store_with_backlog(async_client, prefix)
    await async_client.set(RelayKeys(store.keyspace).lease, OURS)
    fence = _fence(prefix)

    outbox = await store.ack_outbox_many(["1", "2", "9"], fence=fence)
    spawns = await store.ack_spawns_many(["1"], fence=fence)
    timers = await store.delete_timers_many(
        [(timer_member("exe", "p"), 5.5), (timer_member("exe", "q"), 1.0)], fence=fence
    )

    assert (outbox, spawns, timers) == (2, 1, 1)
    assert await async_client.exists(store.keyspace.outbox, store.keyspace.spawns, store.keyspace.timers) == 0


async def test_a_fenced_ack_of_more_fields_than_one_hdel_takes_deletes_them_all(async_client, prefix):
    """The script deletes in chunks (Lua's unpack has a limit); every field still goes."""
    store = AsyncRedisStore(async_client, prefix=prefix)
    await async_client.hset(store.keyspace.outbox, mapping={str(n): b"x" for n in range(2500)})
    await async_client.set(RelayKeys(store.keyspace).lease, OURS)

    removed = await store.ack_outbox_many([str(n) for n in range(2500)], fence=_fence(prefix))

    assert removed == 2500
    assert await async_client.hlen(store.keyspace.outbox) == 0


async def test_the_dead_letter_move_is_refused_without_our_token(async_client, prefix):
    store = await _store_with_backlog(async_client, prefix)
    keys = RelayKeys(store.keyspace)
    await async_client.set(keys.lease, THEIRS)
    move = DeadMove("1", None, f"{prefix}:outbox:1", b"{}", "1")

    with pytest.raises(StoreFenced):
        await move_to_dead_letters(async_client, keys, "outbox", [move], fence=_fence(prefix))
    await async_client.set(keys.lease, OURS)
    moved = await move_to_dead_letters(async_client, keys, "outbox", [move], fence=_fence(prefix))

    assert moved == 1
    assert await async_client.hkeys(keys.dead("outbox")) == [f"{prefix}:outbox:1".encode()]
    assert await async_client.hkeys(store.keyspace.outbox) == [b"2"]


async def test_the_attempts_write_is_refused_without_our_token(async_client, prefix):
    keys = RelayKeys(Keyspace(prefix))
    await async_client.set(keys.lease, THEIRS)
    records = {"1": AttemptRecord(2, 1.0, 2.0), "2": AttemptRecord(1, 3.0, 3.0)}

    with pytest.raises(StoreFenced):
        await save_attempts(async_client, keys.attempts("outbox"), records, fence=_fence(prefix))
    refused = await load_attempts(async_client, keys.attempts("outbox"), ["1", "2"])
    await async_client.set(keys.lease, OURS)
    await save_attempts(async_client, keys.attempts("outbox"), records, fence=_fence(prefix))

    assert refused == {}
    assert await load_attempts(async_client, keys.attempts("outbox"), ["1", "2"]) == records


#: Every fenced script, the store's and relayd's, with what it needs besides the fence.
FENCED_SCRIPTS = {
    "store fenced_hdel": (FENCED_HDEL, ["P:outbox"], ["1"]),
    "store timer_compare_delete": (TIMER_COMPARE_DELETE, ["P:timers"], ["m", "1.5"]),
    "relayd save_attempts": (scripts.SAVE_ATTEMPTS, ["P:relay:attempts:outbox"], ["1", "{}"]),
    "relayd dead_letter": (
        scripts.DEAD_LETTER,
        ["P:outbox", "P:relay:dead:outbox", "P:relay:attempts:outbox"],
        ["hash", "1", "", "P:outbox:1", "{}", "1"],
    ),
}


@pytest.mark.parametrize("name", sorted(FENCED_SCRIPTS))
async def test_every_fenced_script_keeps_one_convention_and_one_refusal(async_client, name):
    """The lease last of KEYS, the token first of ARGV (``store.fence.fenced_call``), and one
    error reply that ``store.fence.fenced_refusal`` recognises, whichever package owns it."""
    script, keys, args = FENCED_SCRIPTS[name]
    lease = f"{{fence-{name.split()[1]}}}:relay:lease"
    keys = [key.replace("P:", lease.removesuffix("relay:lease")) for key in keys]
    fence = Fence(lease, OURS)
    await async_client.set(lease, THEIRS)
    call_keys, call_args = fenced_call(keys, args, fence)

    with pytest.raises(ResponseError) as refused:
        await async_client.eval(script, len(call_keys), *call_keys, *call_args)
    await async_client.set(lease, OURS)
    allowed = await async_client.eval(script, len(call_keys), *call_keys, *call_args)

    assert (call_keys[-1], call_args[0]) == (lease, OURS)
    assert str(refused.value) == FENCED_TAG
    assert isinstance(fenced_refusal(refused.value, fence), StoreFenced)
    assert fenced_refusal(refused.value, None) is None
    assert isinstance(allowed, int)
