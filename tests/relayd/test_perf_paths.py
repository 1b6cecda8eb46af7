"""The drain's hot-path shortcuts keep behaviour: hiredis packing, the scripted stream sink."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import NoBackoff
from redis.exceptions import DataError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from support.redis_server import RedisServer

from relayd.envelope.batch import Batch
from relayd.envelope.decode import outbox_envelope
from relayd.runtime.packing import use_hiredis_packing
from relayd.sinks import DELIVERED, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.redis_stream.sink import RedisStreamSink
from store.backlog import RawEntry

ARGS = [
    ("SET", "k", "v"),
    ("CONFIG GET", "maxmemory"),
    ("HMGET", "h", *[str(n) for n in range(3000)]),
    ("ZRANGEBYSCORE", "z", "-inf", 1746000000.123456, "LIMIT", 0, 1000),
    ("XADD", b"s", "*", "envelope", b'{"v":"relayd/1"}' * 500, "id", "\u00e9t\u00e9"),
    ("SET", bytearray(b"k"), memoryview(b"v")),
]


@pytest.mark.parametrize("args", ARGS, ids=["set", "subcommand", "many", "floats", "large", "buffers"])
def test_hiredis_packing_produces_redis_pys_bytes(args: tuple) -> None:
    """Exactly the bytes redis-py's own asyncio packer sends."""
    plain = Connection()
    fast = Connection()
    use_hiredis_packing(_Holder(fast))

    assert b"".join(fast.pack_command(*args)) == b"".join(bytes(c) for c in plain.pack_command(*args))


@pytest.mark.parametrize("bad", [None, True])
def test_hiredis_packing_refuses_what_redis_py_refuses(bad: object) -> None:
    fast = Connection()
    use_hiredis_packing(_Holder(fast))

    with pytest.raises(DataError):
        fast.pack_command("SET", "k", bad)


async def test_a_client_switches_its_pooled_and_future_connections(redis_server) -> None:
    client = aioredis.Redis(port=redis_server.port)
    await client.ping()  # one connection pooled before the switch

    switched = use_hiredis_packing(client)
    again = use_hiredis_packing(client)
    await client.set("perf-paths", "1")

    pool = client.connection_pool
    assert (switched, again) == (True, True)
    assert all(type(c).__name__ == "HiredisConnection" for c in pool._available_connections)
    assert pool.connection_class.__name__ == "HiredisConnection"
    assert await client.get("perf-paths") == b"1"
    await client.aclose()


def test_a_non_utf8_client_keeps_its_packer() -> None:
    client = aioredis.Redis(encoding="latin-1")

    assert use_hiredis_packing(client) is False
    assert client.connection_pool.connection_class is Connection


def _envelope(prefix: str, seq: int, target: str) -> object:
    value = b'{"t": "%s", "e": "{\\"id\\": \\"e%d\\", \\"kind\\": \\"k\\"}"}' % (target.encode(), seq)
    return outbox_envelope(RawEntry(str(seq), seq, value), prefix=prefix, attempt=1, relayed_at=1.0)


@pytest.fixture
async def stream_sink(async_client: aioredis.Redis, prefix: str) -> AsyncIterator[RedisStreamSink]:
    """A started stream sink writing ``{prefix}:s`` through the test's client."""
    sink = RedisStreamSink(
        parse_sink_spec(f"redis-stream:redis://unused/0?stream={prefix}:s"),
        SinkOptions(),
        client=async_client,
    )
    await sink.start()
    yield sink
    await sink.close()


async def test_stream_sink_falls_back_to_a_pipeline_where_scripts_are_refused(
    stream_sink: RedisStreamSink, async_client: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An 'unknown command' reply to the script calls switches the sink to one XADD per entry, for good."""
    calls = []

    async def refused(batches: list[object]) -> list[object]:
        calls.append(batches)
        return [ResponseError("ERR unknown command 'evalsha'") for _ in batches]

    monkeypatch.setattr(stream_sink, "_send_calls", refused)

    first = await stream_sink.deliver(Batch.of([_envelope(prefix, 1, "a"), _envelope(prefix, 2, "b")]))  # type: ignore[list-item]
    second = await stream_sink.deliver(Batch.of([_envelope(prefix, 3, "a")]))  # type: ignore[list-item]

    ids = [fields[b"id"] for _, fields in await async_client.xrange(f"{prefix}:s")]
    assert (list(first), list(second)) == ([DELIVERED, DELIVERED], [DELIVERED])
    assert ids == [f"{prefix}:outbox:{n}".encode() for n in (1, 2, 3)]
    assert len(calls) == 1


async def test_stream_sink_out_of_memory_is_retry_and_writes_nothing(
    own_redis_server: RedisServer, prefix: str
) -> None:
    """A real OOM (maxmemory 1, noeviction): the entry is Retry, the stream stays absent."""
    admin = own_redis_server.client()
    sink = RedisStreamSink(
        parse_sink_spec(f"redis-stream:{own_redis_server.url}?stream={prefix}:s"), SinkOptions()
    )
    await sink.start()
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    try:
        outcomes = await sink.deliver(Batch.of([_envelope(prefix, 1, "a")]))  # type: ignore[list-item]
    finally:
        admin.config_set("maxmemory", 0)
        await sink.close()

    assert isinstance(outcomes[0], Retry)
    assert admin.exists(f"{prefix}:s") == 0
    admin.close()


async def test_a_write_that_stalls_is_bounded_by_the_socket_timeout_and_drops_the_connection(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switched connections bound writes themselves (no ``asyncio.wait_for``), same error."""
    # no retries: redis-py would otherwise send again on a new connection and succeed
    client = aioredis.Redis(port=redis_server.port, socket_timeout=0.3, retry=RedisRetry(NoBackoff(), 0))
    use_hiredis_packing(client)
    assert await client.set("perf-paths-stall", "1")
    conn = client.connection_pool._available_connections[0]

    async def never_drains() -> None:  # a peer that stopped reading: the buffers stay full
        await asyncio.Event().wait()

    monkeypatch.setattr(conn._writer, "drain", never_drains)
    transport = conn._writer.transport
    high = transport.get_write_buffer_limits()[1]
    monkeypatch.setattr(transport, "get_write_buffer_size", lambda: high)
    started = time.monotonic()
    with pytest.raises(RedisTimeoutError, match="writing"):
        await client.set("perf-paths-stall", "2")
    waited_s = time.monotonic() - started

    assert 0.3 <= waited_s < 2.0
    assert not conn.is_connected  # dropped: a half-written command must not be followed
    assert conn.socket_timeout == 0.3  # restored for the reads that follow writes
    assert await client.ping()  # a new connection serves on
    await client.aclose()


async def test_a_write_that_fits_the_send_buffer_arms_no_timer(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the transport takes without pausing cannot stall: it is sent unbounded, and a
    write that might wait (a buffer past its low-water mark) is bounded."""
    client = aioredis.Redis(port=redis_server.port, socket_timeout=5.0)
    use_hiredis_packing(client)
    assert await client.set("perf-paths-fits", "1")
    conn = client.connection_pool._available_connections[0]
    real_timeout = asyncio.timeout
    bounds: list[float | None] = []

    def counting_timeout(delay: float | None) -> asyncio.Timeout:
        bounds.append(delay)
        return real_timeout(delay)

    # redis-py's reads bound themselves with their own reference to it: only writes count here
    monkeypatch.setattr(asyncio, "timeout", counting_timeout)
    assert await client.set("perf-paths-fits", "2")
    assert await client.hmget("perf-paths-fits-h", [str(n) for n in range(500)]) == [None] * 500
    assert bounds == []

    transport = conn._writer.transport
    low = transport.get_write_buffer_limits()[0]
    monkeypatch.setattr(transport, "get_write_buffer_size", lambda: low)  # pretend some is unsent
    assert await client.set("perf-paths-fits", "3")
    assert bounds == [5.0]
    assert conn.socket_timeout == 5.0
    await client.aclose()


class _Holder:
    """A stand-in client whose pool holds one already-made connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection_pool = _Pool(connection)


class _Pool:
    def __init__(self, connection: Connection) -> None:
        self.connection_class = type(connection)
        self.connection_kwargs: dict[str, object] = {}
        self._available_connections = [connection]
        self._in_use_connections: set[Connection] = set()
