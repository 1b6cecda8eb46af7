"""The member registry: beats register and report members and the lease holder, dead ones expire."""

from __future__ import annotations

import asyncio

import pytest

from relayd.state.members import Membership, members_key, read_members
from store.keys import Keyspace

pytestmark = pytest.mark.usefixtures("backend")


def _spaces(prefix, n=3):
    return [Keyspace(f"{prefix}{{s{i}}}") for i in range(n)]


async def test_beat_registers_on_every_prefix_and_reports_members_and_holder(async_client, prefix):
    spaces = _spaces(prefix)
    a = Membership(async_client, spaces, token="host/1/a", ttl_s=5)
    b = Membership(async_client, spaces[:2], token="host/2/b", ttl_s=5)
    await async_client.set(spaces[1].relay("lease"), "host/2/b")

    await a.beat()
    seen = await b.beat()

    assert [(r.prefix, r.members, r.holder) for r in seen] == [
        (spaces[0].prefix, frozenset({"host/1/a", "host/2/b"}), None),
        (spaces[1].prefix, frozenset({"host/1/a", "host/2/b"}), "host/2/b"),
    ]
    assert await read_members(async_client, spaces[2]) == ["host/1/a"]


async def test_registry_lives_under_the_prefix_relay_namespace_and_expires_when_abandoned(
    async_client, prefix
):
    ks = Keyspace(prefix)

    await Membership(async_client, [ks], token="t", ttl_s=2).beat()

    assert members_key(ks) == f"{prefix}:relay:members"
    assert await async_client.type(members_key(ks)) == b"zset"
    assert 0 < await async_client.pttl(members_key(ks)) <= 20_000  # ten member TTLs


async def test_a_member_that_stops_beating_expires_and_the_next_beat_prunes_it(async_client, prefix):
    ks = Keyspace(prefix)
    dying = Membership(async_client, [ks], token="dying", ttl_s=0.15)
    alive = Membership(async_client, [ks], token="alive", ttl_s=5)
    await dying.beat()
    await alive.beat()
    before = await read_members(async_client, ks)

    await asyncio.sleep(0.25)
    seen = await alive.beat()

    assert before == ["alive", "dying"]
    assert seen[0].members == frozenset({"alive"})
    assert await async_client.zrange(members_key(ks), 0, -1) == [b"alive"]


async def test_read_members_hides_expired_ones_without_pruning(async_client, prefix):
    ks = Keyspace(prefix)
    await Membership(async_client, [ks], token="gone", ttl_s=0.05).beat()

    await asyncio.sleep(0.12)

    assert await read_members(async_client, ks) == []
    assert await async_client.zcard(members_key(ks)) == 1  # reading does not write


async def test_leave_removes_only_this_member_everywhere(async_client, prefix):
    spaces = _spaces(prefix)
    a = Membership(async_client, spaces, token="a", ttl_s=5)
    b = Membership(async_client, spaces, token="b", ttl_s=5)
    await a.beat()
    await b.beat()

    await a.leave()

    for ks in spaces:
        assert await read_members(async_client, ks) == ["b"]


async def test_beats_refresh_the_expiry(async_client, prefix):
    ks = Keyspace(prefix)
    member = Membership(async_client, [ks], token="m", ttl_s=0.3)
    await member.beat()

    for _ in range(4):  # 0.4 s in all, longer than one TTL
        await asyncio.sleep(0.1)
        await member.beat()

    assert await read_members(async_client, ks) == ["m"]


async def test_a_beat_renews_only_the_leases_it_is_asked_to_and_our_token_holds(async_client, prefix):
    mine, theirs, unasked = _spaces(prefix)
    for ks, token in ((mine, "me"), (theirs, "other"), (unasked, "me")):
        await async_client.set(ks.relay("lease"), token, px=1000)

    seen = await Membership(async_client, [mine, theirs, unasked], token="me", ttl_s=5).beat(
        {mine.prefix: "me", theirs.prefix: "me"}
    )

    assert [r.renewed for r in seen] == [True, False, False]
    assert await async_client.pttl(mine.relay("lease")) > 4000
    assert await async_client.pttl(theirs.relay("lease")) <= 1000
    assert await async_client.pttl(unasked.relay("lease")) <= 1000
    assert await async_client.get(theirs.relay("lease")) == b"other"


async def test_the_registry_ttl_is_refreshed_every_few_beats_not_on_each(async_client, prefix):
    ks = Keyspace(prefix)
    membership = Membership(async_client, [ks], token="t", ttl_s=2)
    await membership.beat()
    await async_client.pexpire(members_key(ks), 5000)

    await membership.beat()  # the second beat leaves the key's TTL alone
    assert await async_client.pttl(members_key(ks)) <= 5000
    for _ in range(3):
        await membership.beat()
    assert await async_client.pttl(members_key(ks)) > 5000  # the fifth refreshed it
