"""The lease: SET NX PX, compare-and-pexpire renewal, compare-and-delete release, local expiry."""

from __future__ import annotations

import pytest

from relayd.state.lease import SAFETY_FRACTION, Lease, make_token, read_lease
from store.keys import Keyspace

pytestmark = pytest.mark.usefixtures("backend")


class Mono:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


async def test_first_acquirer_holds_and_the_second_cannot(async_client, prefix):
    ks, mono = Keyspace(prefix), Mono()
    a = Lease(async_client, ks, ttl_s=5, monotonic=mono, token="host-a/1/aa")
    b = Lease(async_client, ks, ttl_s=5, monotonic=mono, token="host-b/2/bb")

    got_a, got_b = await a.acquire(), await b.acquire()

    assert (got_a, got_b, a.held(), b.held()) == (True, False, True, False)
    info = await read_lease(async_client, ks)
    assert info.token.startswith("host-a/1/aa#")
    assert info.holder == "host-a/1"
    assert 4000 < info.ttl_ms <= 5000


async def test_renew_fails_once_another_token_holds_it(async_client, prefix):
    ks, mono = Keyspace(prefix), Mono()
    a = Lease(async_client, ks, ttl_s=5, monotonic=mono)
    await a.acquire()
    await async_client.set(ks.relay("lease"), "intruder")

    renewed = await a.renew()

    assert (renewed, a.held()) == (False, False)
    assert await async_client.get(ks.relay("lease")) == b"intruder"


async def test_held_expires_locally_a_safety_margin_before_the_ttl(async_client, prefix):
    """A paused process must not believe it still holds the lease up to the TTL: its deadline
    is the acquire's start plus the TTL less a tenth of it."""
    mono = Mono()
    a = Lease(async_client, Keyspace(prefix), ttl_s=2, monotonic=mono)
    await a.acquire()

    mono.t += 1.75
    still = a.held()
    mono.t += 0.1

    assert (still, a.held()) == (True, False)
    assert a.deadline_s == pytest.approx(100.0 + 2 * (1 - SAFETY_FRACTION))


async def test_the_deadline_counts_from_when_the_acquire_was_sent(async_client, prefix):
    """A slow reply does not lengthen the lease: the clock is read before the SET goes out."""
    mono = Mono()
    a = Lease(async_client, Keyspace(prefix), ttl_s=2, monotonic=mono)
    set_lease = async_client.set

    async def slow_set(*args, **kwargs):
        mono.t += 1.0  # the reply takes a second to come back
        return await set_lease(*args, **kwargs)

    async_client.set = slow_set
    try:
        await a.acquire()
    finally:
        del async_client.set

    assert a.deadline_s == pytest.approx(100.0 + 2 * (1 - SAFETY_FRACTION))


async def test_the_fence_names_the_lease_key_and_our_token(async_client, prefix):
    a = Lease(async_client, Keyspace(prefix), ttl_s=2, monotonic=Mono(), token="host-a/1/aa")

    assert (a.fence.key, a.fence.token) == (Keyspace(prefix).relay("lease"), "host-a/1/aa")


async def test_release_deletes_only_our_own_lease(async_client, prefix):
    ks, mono = Keyspace(prefix), Mono()
    a = Lease(async_client, ks, ttl_s=5, monotonic=mono)
    await a.acquire()
    b = Lease(async_client, ks, ttl_s=5, monotonic=mono)

    released_by_b = await b.release()
    released_by_a = await a.release()

    assert (released_by_b, released_by_a) == (False, True)
    assert await read_lease(async_client, ks) is None
    assert await b.acquire()


def test_token_names_host_and_pid():
    host, pid, rand = make_token().split("/")

    assert host
    assert pid.isdigit()
    assert len(rand) == 8
