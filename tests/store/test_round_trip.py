"""``store.round_trip``: a pipeline's replies, errors and retries without redis-py's ``Pipeline``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from support.redis_server import RedisServer
from support.waiting import until

from store.round_trip import round_trip


def _client(server: RedisServer, retries: int = 3) -> aioredis.Redis:
    return aioredis.Redis(port=server.port, socket_timeout=5.0, retry=RedisRetry(NoBackoff(), retries))


async def test_replies_come_in_order_as_sent_and_an_error_reply_is_raised_after_all_are_read(
    redis_server: RedisServer,
) -> None:
    client = _client(redis_server)
    key = f"rt:{uuid.uuid4().hex}"
    replies = await round_trip(
        client, [("HSET", key, "1", "a"), ("GET", "rt:none"), ("HMGET", key, "1", "2")]
    )
    assert replies == [1, None, [b"a", None]]

    with pytest.raises(NoScriptError):
        await round_trip(client, [("EVALSHA", "0" * 40, 0), ("HDEL", key, "1")])
    # every reply was read: the HDEL ran, and the connection answers the next round-trip in step
    assert await round_trip(client, [("HGET", key, "1"), ("PING",)]) == [None, b"PONG"]
    assert len(client.connection_pool._available_connections) == 1
    await client.aclose()


def _dropped_on_first_send(connection: Any, killer: aioredis.Redis, client_id: int) -> list[int]:
    """Make the server drop ``connection`` just before its first send; the kills are listed."""
    send = connection.send_packed_command
    kills: list[int] = []

    async def killed_first(*args: Any, **kwargs: Any) -> None:
        if not kills:
            kills.append(await killer.client_kill_filter(_id=client_id))
        await send(*args, **kwargs)

    connection.send_packed_command = killed_first
    return kills


async def test_a_dropped_connection_is_retried_on_a_fresh_socket_as_a_pipeline_is(
    redis_server: RedisServer,
) -> None:
    """The server drops the connection as the round-trip starts (after the pool handed it out:
    redis-py replaces a connection it already knows to be closed at checkout)."""
    killer = _client(redis_server)
    for retries, survives in ((3, True), (0, False)):
        client = _client(redis_server, retries)
        await client.client_setname(f"rt{uuid.uuid4().hex[:8]}")
        connection = await client.connection_pool.get_connection()
        await client.connection_pool.release(connection)
        kills = _dropped_on_first_send(connection, killer, await client.client_id())
        if survives:
            assert await round_trip(client, [("CLIENT", "GETNAME")]) == [None]  # a new connection
        else:
            with pytest.raises(RedisConnectionError):
                await round_trip(client, [("CLIENT", "GETNAME")])
        assert kills == [1]
        await client.aclose()
    await killer.aclose()


async def test_a_cancelled_round_trip_drops_its_connection(redis_server: RedisServer) -> None:
    """A connection with a reply still to come is never handed to the next caller."""
    client = _client(redis_server)
    key = f"rt:{uuid.uuid4().hex}"
    waiting = asyncio.create_task(round_trip(client, [("BLPOP", key, 5)]))
    await until(lambda: client.connection_pool._in_use_connections)
    connection: Any = next(iter(client.connection_pool._in_use_connections))
    await until(lambda: connection._parser._reader is not None)  # connected, the BLPOP sent
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not connection.is_connected
    await client.rpush(key, "x")  # a reply a reused connection would have read next
    assert await round_trip(client, [("LPOP", key), ("PING",)]) == [b"x", b"PONG"]
    await client.aclose()


async def test_replies_late_past_the_socket_timeout_raise_its_error_and_drop_the_connection(
    redis_server: RedisServer,
) -> None:
    """One bound for all the replies of a round-trip: the connection's ``socket_timeout``, with
    redis-py's error; the connection is dropped and keeps its timeout for the next use."""
    client = aioredis.Redis(port=redis_server.port, socket_timeout=0.3, retry=RedisRetry(NoBackoff(), 0))
    key = f"rt:{uuid.uuid4().hex}"
    await client.ping()
    connection: Any = next(iter(client.connection_pool._available_connections))

    with pytest.raises(RedisTimeoutError):
        await round_trip(client, [("PING",), ("BLPOP", key, 60)])  # the first reply comes, the second not

    assert not connection.is_connected
    assert connection.socket_timeout == 0.3
    assert await round_trip(client, [("PING",)]) == [b"PONG"]
    await client.aclose()


async def test_a_client_without_a_pool_uses_a_pipeline() -> None:
    class Pipe:
        def __init__(self) -> None:
            self.sent: list[tuple[Any, ...]] = []

        def execute_command(self, *args: Any) -> None:
            self.sent.append(args)

        async def execute(self) -> list[Any]:
            if self.sent[0][0] == "EVALSHA":
                raise ResponseError("the pipeline's error")
            return [len(args) for args in self.sent]

    class Cluster:
        def pipeline(self, transaction: bool) -> Pipe:
            assert transaction is False
            return Pipe()

    assert await round_trip(Cluster(), [("GET", "a"), ("HMGET", "h", "1", "2")]) == [2, 4]
    with pytest.raises(ResponseError, match="pipeline's"):
        await round_trip(Cluster(), [("EVALSHA", "x", 0)])
