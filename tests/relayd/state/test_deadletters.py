"""Dead letters by kind and by id: replay, get and scan touch only what they name."""

from __future__ import annotations

import pytest
from harel.engine.aio_store import AsyncRedisStore
from harel.engine.execution import Execution
from harel.engine.store import TimerOp

from relayd.state.deadletters import (
    DeadMove,
    encode_dead_letter,
    execution_versions,
    get_dead_letters,
    list_dead_letters,
    move_to_dead_letters,
    replay,
    replay_dead_letters,
    scan_dead_letters,
)
from relayd.state.keys import RelayKeys
from store import Keyspace, timer_member


async def _park(client, keyspace: Keyspace) -> tuple[str, str]:
    """One outbox and one timer dead letter, written as the sweeper writes them."""
    keys = RelayKeys(keyspace)
    common = {
        "reason_code": "permanent",
        "reason": "http 400",
        "attempts": 1,
        "first_attempt_at": 1.0,
        "last_attempt_at": 1.0,
        "dead_at": 2.0,
        "envelope": None,
    }
    outbox_id, timer_id = f"{keyspace.prefix}:outbox:7", "timeout:exe:p:5.5"
    outbox = encode_dead_letter(id_=outbox_id, kind="outbox", field="7", seq=7, value=b'{"t":null}', **common)
    timer = encode_dead_letter(
        id_=timer_id, kind="timer", member=timer_member("exe", "p").encode(), fire_at=5.5, **common
    )
    await client.hset(keys.dead("outbox"), outbox_id, outbox)
    await client.hset(keys.dead("timer"), timer_id, timer)
    return outbox_id, timer_id


async def test_replay_of_one_kind_leaves_the_others_parked(async_client, prefix):
    keyspace = Keyspace(prefix)
    outbox_id, _timer_id = await _park(async_client, keyspace)

    replayed = await replay_dead_letters(async_client, keyspace, kind="timer")

    assert replayed == 1
    assert await async_client.zscore(keyspace.timers, timer_member("exe", "p")) == 5.5
    assert await async_client.hlen(keyspace.outbox) == 0
    assert [d.id for d in await list_dead_letters(async_client, keyspace)] == [outbox_id]


async def test_replay_by_id_puts_back_only_those_named(async_client, prefix):
    keyspace = Keyspace(prefix)
    outbox_id, timer_id = await _park(async_client, keyspace)

    await async_client.set(keyspace.outbox_seq, 9)  # the engine committed 8 and 9 since

    none = await replay_dead_letters(async_client, keyspace, ids=[])
    one = await replay_dead_letters(async_client, keyspace, ids=[outbox_id, "not-parked"])

    assert (none, one) == (0, 1)
    # Under the next seq, as a new commit: after what its target got since, in order.
    assert await async_client.hgetall(keyspace.outbox) == {b"10": b'{"t":null}'}
    assert await async_client.zcard(keyspace.timers) == 0
    assert [d.id for d in await list_dead_letters(async_client, keyspace)] == [timer_id]


async def test_get_and_scan_return_the_parked_letters(async_client, prefix):
    keyspace = Keyspace(prefix)
    outbox_id, timer_id = await _park(async_client, keyspace)

    got = await get_dead_letters(async_client, keyspace, [timer_id, outbox_id, "not-parked"])
    only_timers = await get_dead_letters(async_client, keyspace, [outbox_id, timer_id], kind="timer")
    cursor, scanned = await scan_dead_letters(async_client, keyspace, "outbox", 0, 10)

    assert sorted(d.id for d in got) == sorted([outbox_id, timer_id])
    assert [d.id for d in only_timers] == [timer_id]
    assert (cursor, [d.id for d in scanned]) == (0, [outbox_id])
    assert await get_dead_letters(async_client, keyspace, []) == []


async def test_a_field_and_value_that_are_not_utf8_are_parked_as_base64_and_replayed_exactly(
    async_client, prefix
):
    keyspace = Keyspace(prefix)
    keys = RelayKeys(keyspace)
    field = b"\xff\xfe7".decode("utf-8", "surrogateescape")  # as the reader hands it over
    value = b'{"t": "a", "e": "\xff"}'
    doc = encode_dead_letter(
        id_=f"{prefix}:outbox:\\xff\\xfe7",
        kind="outbox",
        reason_code="not_utf8",
        reason="outbox field is not UTF-8",
        attempts=0,
        first_attempt_at=None,
        last_attempt_at=None,
        dead_at=2.0,
        envelope=None,
        field=field,
        seq=None,
        value=value,
    )
    await async_client.hset(keys.dead("outbox"), f"{prefix}:outbox:\\xff\\xfe7", doc)

    (letter,) = await list_dead_letters(async_client, keyspace)
    replayed = await replay_dead_letters(async_client, keyspace)

    assert letter.field == "\\xff\\xfe7"
    assert letter.document["reason_code"] == "not_utf8"
    assert replayed == 1
    assert await async_client.hgetall(keyspace.outbox) == {b"\xff\xfe7": value}


async def test_case_6_replay_keeps_a_dead_letter_whose_place_is_taken_and_names_it(async_client, prefix):
    """A timer the engine re-armed meanwhile: its dead letter is not deleted, it is named."""
    keyspace = Keyspace(prefix)
    _outbox_id, timer_id = await _park(async_client, keyspace)
    await async_client.zadd(keyspace.timers, {timer_member("exe", "p"): 99.0})
    await async_client.hset(keyspace.outbox, "7", b"committed again after a counter reset")
    await async_client.set(keyspace.outbox_seq, 7)

    done = await replay(async_client, keyspace)

    assert (done.count, done.kept) == (1, (timer_id,))
    assert await async_client.zscore(keyspace.timers, timer_member("exe", "p")) == 99.0
    assert await async_client.hgetall(keyspace.outbox) == {
        b"7": b"committed again after a counter reset",
        b"8": b'{"t":null}',
    }
    assert [d.id for d in await list_dead_letters(async_client, keyspace)] == [timer_id]


async def test_case_6_a_new_dead_letter_for_a_reused_seq_keeps_the_old_one(async_client, prefix):
    keyspace = Keyspace(prefix)
    keys = RelayKeys(keyspace)
    outbox_id, _ = await _park(async_client, keyspace)
    await async_client.hset(keyspace.outbox, "7", b'{"t":"again"}')  # the counter was reset to 0
    await async_client.set(keyspace.outbox_seq, 7)
    doc = encode_dead_letter(
        id_=outbox_id, kind="outbox", reason_code="permanent", reason="http 422", attempts=1,
        first_attempt_at=3.0, last_attempt_at=3.0, dead_at=4.0, envelope=None,
        field="7", seq=7, value=b'{"t":"again"}',
    )  # fmt: skip

    moved = await move_to_dead_letters(
        async_client, keys, "outbox", [DeadMove("7", None, outbox_id, doc, "7")]
    )

    letters = await list_dead_letters(async_client, keyspace, kind="outbox")
    assert moved == 1
    assert [(d.id, d.reason) for d in letters] == [(outbox_id, "http 400"), (f"{outbox_id}#2", "http 422")]
    assert await replay_dead_letters(async_client, keyspace, ids=[f"{outbox_id}#2"]) == 1
    assert await async_client.hget(keyspace.outbox, "8") == b'{"t":"again"}'


_TIMER = timer_member("exe", "p")


async def _park_timer_as_the_engine_does(client, keyspace: Keyspace, path: str = "p") -> str:
    """Record the execution's version, then park its timer at ``path`` (due at 5.5) with it, as
    ``Settlement._bury`` does; returns the dead letter's id."""
    member = timer_member("exe", path).encode()
    id_ = f"timeout:exe:{path}:5.5"
    (version,) = await execution_versions(client, keyspace, [member])
    doc = encode_dead_letter(
        id_=id_, kind="timer", reason_code="permanent", reason="http 400", attempts=1,
        first_attempt_at=1.0, last_attempt_at=1.0, dead_at=2.0, envelope=None,
        member=member, fire_at=5.5, execution_version=version,
    )  # fmt: skip
    await client.zadd(keyspace.timers, {member: 5.5})
    move = DeadMove(member, 5.5, id_, doc, id_)
    assert await move_to_dead_letters(client, RelayKeys(keyspace), "timer", [move]) == 1
    return id_


@pytest.mark.parametrize(
    ("parked_with", "at_replay", "put_back"),
    [
        pytest.param(b'{"id":"exe","version":3}', b'{"id":"exe","version":3}', True, id="unchanged"),
        pytest.param(b'{"id":"exe","version":3}', b'{"id":"exe","version":4}', False, id="committed-since"),
        pytest.param(b'{"id":"exe","version":3}', None, False, id="execution-gone"),
        pytest.param(None, None, True, id="never-an-execution"),
        pytest.param(None, b'{"id":"exe","version":1}', False, id="execution-created-since"),
        pytest.param(b"\xff{not json", b"\xff{not json", False, id="unreadable"),
    ],
)
async def test_a_timer_goes_back_only_while_its_execution_has_not_committed_since_it_was_parked(
    async_client, prefix, parked_with, at_replay, put_back
):
    """The engine re-arms or cancels a timer in a commit of its execution: a version that moved
    means the parked timer may be stale, and a stale timer must not fire."""
    keyspace = Keyspace(prefix)
    if parked_with is not None:
        await async_client.set(keyspace.exe("exe"), parked_with)
    timer_id = await _park_timer_as_the_engine_does(async_client, keyspace)
    await async_client.delete(keyspace.exe("exe"))
    if at_replay is not None:
        await async_client.set(keyspace.exe("exe"), at_replay)

    done = await replay(async_client, keyspace)

    assert (done.count, done.kept) == ((1, ()) if put_back else (0, (timer_id,)))
    assert await async_client.zscore(keyspace.timers, _TIMER) == (5.5 if put_back else None)
    assert bool(await list_dead_letters(async_client, keyspace)) is not put_back


async def test_a_timer_whose_execution_key_has_another_type_stays_parked(async_client, prefix):
    keyspace = Keyspace(prefix)
    await async_client.set(keyspace.exe("exe"), b'{"version":3}')
    timer_id = await _park_timer_as_the_engine_does(async_client, keyspace)
    await async_client.delete(keyspace.exe("exe"))
    await async_client.rpush(keyspace.exe("exe"), b"x")

    assert (await replay(async_client, keyspace)).kept == (timer_id,)


async def test_execution_versions_reads_each_execution_once_and_names_what_it_cannot_read(
    async_client, prefix
):
    keyspace = Keyspace(prefix)
    await async_client.set(keyspace.exe("a"), b'{"version":7}')
    await async_client.set(keyspace.exe("b"), b"[" * 5000 + b"]" * 5000)
    await async_client.set(keyspace.exe("c"), b'{"version":true}')
    members = [timer_member(e, "p").encode() for e in "abcd"] + [b"no separator", b"\xff\x00p"]

    versions = await execution_versions(async_client, keyspace, members)

    assert versions == [7, "unreadable", "unreadable", "none", None, None]


async def test_a_timer_letter_from_before_versions_were_recorded_replays_as_before(async_client, prefix):
    keyspace = Keyspace(prefix)
    await async_client.set(keyspace.exe("exe"), b'{"version":9}')
    _outbox_id, _timer_id = await _park(async_client, keyspace)  # no execution_version in it

    assert await replay_dead_letters(async_client, keyspace, kind="timer") == 1


@pytest.mark.parametrize(
    ("harel_commits", "live_after"),
    [
        pytest.param([], 5.5, id="waiting-for-its-timer"),  # put back
        pytest.param([TimerOp("cancel", "Armed")], None, id="left-the-state"),
        pytest.param([TimerOp("cancel", "Armed"), TimerOp("schedule", "Armed", 9.5)], 9.5, id="re-entered"),
        pytest.param([None], None, id="another-event-handled"),
    ],
)
async def test_harel_s_own_commits_are_what_a_timer_replay_compares(
    async_client, prefix, harel_commits, live_after
):
    """harel arms, cancels and re-arms a timer in a commit of its execution, with its version: a
    timer parked before any such commit may be stale and stays parked; one whose execution is
    still waiting for it goes back."""
    keyspace = Keyspace(prefix)
    harel = AsyncRedisStore(async_client, prefix=prefix)
    exe = Execution(id="exe", definition_id="timed")
    await harel.commit(exe, [], timers=(TimerOp("schedule", "Armed", 5.5),))
    member = timer_member("exe", "Armed")
    await _park_timer_as_the_engine_does(async_client, keyspace, "Armed")
    [letter] = await list_dead_letters(async_client, keyspace)
    assert letter.document["execution_version"] == 1  # harel's first commit
    for op in harel_commits:
        await harel.commit(exe, [], timers=() if op is None else (op,))

    done = await replay(async_client, keyspace)

    assert done.count == (1 if live_after == 5.5 else 0)
    assert await async_client.zscore(keyspace.timers, member) == live_after
