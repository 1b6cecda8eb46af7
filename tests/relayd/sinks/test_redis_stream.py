"""The redis-stream sink over fakeredis and a real redis-server: order, routing, MAXLEN, failures."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import orjson
import pytest
import redis.asyncio as aioredis
from support.proxy import TcpProxy
from support.redis_server import RedisServer, free_port
from support.tls import TlsRedisServer

from relayd.envelope.batch import Batch
from relayd.errors import ConfigError
from relayd.sinks import DELIVERED, Outcome, Retry, SinkOptions, parse_sink_spec
from relayd.sinks.redis_stream import sink as redis_stream
from relayd.sinks.redis_stream.sink import CALL_SIZE, RedisStreamSink

from .conftest import deliver_runs, outbox, spawn, timer


@pytest.fixture
def make_sink(
    backend: str, async_client: aioredis.Redis, request: pytest.FixtureRequest, started
) -> MakeSink:
    """Build a started sink on the test's backend: by URL for the real server, injected for fakeredis."""

    async def make(query: str) -> RedisStreamSink:
        if backend == "real":
            server: RedisServer = request.getfixturevalue("redis_server")
            sink = RedisStreamSink(parse_sink_spec(f"redis-stream:{server.url}?{query}"), SinkOptions())
        else:
            spec = parse_sink_spec(f"redis-stream:redis://127.0.0.1:6379/0?{query}")
            sink = RedisStreamSink(spec, SinkOptions(), client=async_client)
        return await started(sink)

    return make


MakeSink = Callable[[str], Awaitable[RedisStreamSink]]


async def read_stream(client: aioredis.Redis, name: str) -> list[dict[bytes, bytes]]:
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(name)  # type: ignore[assignment]
    return [fields for _, fields in entries]


async def test_every_envelope_arrives_in_order_with_its_fields(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """One stream: entries in batch order, each with envelope JSON, id and kind."""
    sink = await make_sink(f"stream={prefix}:relay")
    batch = [
        outbox(prefix, 1, "a"),
        spawn(prefix, 2, "a", "a.r", root_path="r", context={}),
        outbox(prefix, 3, None),
        timer(prefix, "a", "w", 1.5),
    ]

    outcomes = await deliver_runs(sink, batch)

    entries = await read_stream(async_client, f"{prefix}:relay")
    assert list(outcomes) == [DELIVERED] * 4
    assert [orjson.loads(e[b"envelope"]) for e in entries] == [e.body for e in batch]
    assert [e[b"id"].decode() for e in entries] == [e.id for e in batch]
    assert [e[b"kind"].decode() for e in entries] == ["outbox", "spawn", "outbox", "timer"]
    assert sink.ready()


async def test_target_placeholder_routes_per_ordering_key_in_order(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """{target} gives each target its own stream, in seq order; no target goes to '_'."""
    sink = await make_sink(f"stream={prefix}:ev:{{target}}")
    batch = [outbox(prefix, seq, ["a", "b", None][seq % 3]) for seq in range(1, 31)]

    for chunk in (batch[:10], batch[10:]):
        await sink.deliver(Batch.of(chunk))

    for target, stream in (("a", "a"), ("b", "b"), (None, "_")):
        ids = [e[b"id"].decode() for e in await read_stream(async_client, f"{prefix}:ev:{stream}")]
        assert ids == [e.id for e in batch if e.ordering_key == target]


@pytest.mark.parametrize("routed", [False, True], ids=["one-stream", "per-target"])
@pytest.mark.parametrize("kind", ["outbox", "timer"])
async def test_every_argument_layout_keeps_fields_and_order(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str, routed: bool, kind: str
) -> None:
    """The script's layouts (one stream, or an index into KEYS per entry), for two kinds."""
    sink = await make_sink(f"stream={prefix}:lay" + (":{target}" if routed else ""))
    if kind == "outbox":
        batch = [outbox(prefix, seq, ["a", "b"][seq % 2]) for seq in range(1, 7)]
    else:
        batch = [timer(prefix, ["a", "b"][n % 2], f"w{n}", 2.5 + n) for n in range(1, 7)]

    assert list(await sink.deliver(Batch.of(batch))) == [DELIVERED] * len(batch)

    for stream, key in (
        ((f"{prefix}:lay:a", "a"), (f"{prefix}:lay:b", "b")) if routed else ((f"{prefix}:lay", None),)
    ):
        sent = [e for e in batch if key is None or e.ordering_key == key]
        entries = await read_stream(async_client, stream)
        assert [orjson.loads(e[b"envelope"]) for e in entries] == [e.body for e in sent]
        assert [(e[b"id"].decode(), e[b"kind"].decode()) for e in entries] == [(e.id, e.kind) for e in sent]


async def test_maxlen_trims_the_stream(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """maxlen=N trims approximately: far fewer than the 2000 added remain, at least N."""
    sink = await make_sink(f"stream={prefix}:trim&maxlen=50")

    for start in range(0, 2000, 500):
        await sink.deliver(Batch.of([outbox(prefix, seq, "a") for seq in range(start, start + 500)]))

    length = await async_client.xlen(f"{prefix}:trim")
    assert 50 <= length < 500
    last: list[tuple[bytes, dict[bytes, bytes]]] = await async_client.xrevrange(f"{prefix}:trim", count=1)  # type: ignore[assignment]
    assert last[0][1][b"id"] == f"{prefix}:outbox:1999".encode()


@pytest.mark.parametrize("batch", [1, 500], ids=["one-entry-calls", "full-calls"])
async def test_maxlen_trims_every_routed_stream(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str, batch: int
) -> None:
    """Each stream a call adds to is trimmed, whether a call carries one entry or many."""
    sink = await make_sink(f"stream={prefix}:rt:{{target}}&maxlen=50")
    envelopes = [outbox(prefix, seq, "ab"[seq % 2]) for seq in range(1200)]

    for start in range(0, len(envelopes), batch):
        await sink.deliver(Batch.of(envelopes[start : start + batch]))

    for target in "ab":
        assert 50 <= await async_client.xlen(f"{prefix}:rt:{target}") < 300
        last: list[tuple[bytes, dict[bytes, bytes]]] = await async_client.xrevrange(  # type: ignore[assignment]
            f"{prefix}:rt:{target}", count=1
        )
        assert last[0][1][b"id"] == f"{prefix}:outbox:{1198 + (target == 'b')}".encode()


async def test_second_redis_server_as_destination(own_redis_server: RedisServer, prefix: str) -> None:
    """A stream on another redis-server receives the batch; the relay's own Redis is not involved."""
    spec = parse_sink_spec(f"redis-stream:{own_redis_server.url}?stream=out")
    sink = RedisStreamSink(spec, SinkOptions())
    await sink.start()

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "a"), outbox(prefix, 2, "b")]))
    await sink.close()

    client = own_redis_server.client()
    assert list(outcomes) == [DELIVERED, DELIVERED]
    assert [f[b"id"] for _, f in client.xrange("out")] == [
        f"{prefix}:outbox:1".encode(),
        f"{prefix}:outbox:2".encode(),
    ]
    client.close()


async def test_a_batch_of_many_calls_keeps_its_order_across_a_script_flush(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """A batch spans several pipelined script calls; NOSCRIPT (a flushed cache) resends it whole."""
    sink = await make_sink(f"stream={prefix}:many")
    first = [outbox(prefix, seq, f"t{seq % 7}") for seq in range(1, CALL_SIZE * 2 + 51)]
    second = [outbox(prefix, seq, f"t{seq % 7}") for seq in range(1000, 1000 + CALL_SIZE + 1)]

    assert list(await sink.deliver(Batch.of(first))) == [DELIVERED] * len(first)
    await async_client.script_flush()
    assert list(await sink.deliver(Batch.of(second))) == [DELIVERED] * len(second)

    ids = [e[b"id"].decode() for e in await read_stream(async_client, f"{prefix}:many")]
    assert ids == [e.id for e in first + second]


@pytest.mark.parametrize("denied", ["-@scripting", "-script|load"], ids=["no-scripts", "no-script-load"])
async def test_scripts_refused_by_acl_fall_back_to_one_xadd_each(
    own_redis_server: RedisServer, prefix: str, denied: str
) -> None:
    """A user without scripting (a locked-down managed Redis) still gets every entry, in order."""
    admin = own_redis_server.client()
    admin.acl_setuser("relay", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", denied])
    url = f"redis://relay:pw@127.0.0.1:{own_redis_server.port}/0"
    sink = RedisStreamSink(parse_sink_spec(f"redis-stream:{url}?stream=out"), SinkOptions())
    await sink.start()
    batch = [outbox(prefix, seq, "a") for seq in range(1, CALL_SIZE + 11)]

    outcomes = await sink.deliver(Batch.of(batch))
    await sink.close()

    assert list(outcomes) == [DELIVERED] * len(batch)
    assert [f[b"id"].decode() for _, f in admin.xrange("out")] == [e.id for e in batch]
    admin.close()


async def test_unreachable_destination_is_retry_for_the_batch_and_not_ready(prefix: str) -> None:
    """Connection refused: every envelope Retry, ready() false; the error names no URL."""
    port = free_port()
    sink = RedisStreamSink(
        parse_sink_spec(f"redis-stream:redis://127.0.0.1:{port}/0?stream=s"), SinkOptions()
    )
    await sink.start()

    outcomes = await sink.deliver(Batch.of([outbox(prefix, 1, "a"), outbox(prefix, 2, "b")]))
    await sink.close()

    assert not sink.ready()
    assert all(
        isinstance(o, Retry) and "unreachable" in o.error and str(port) not in o.error for o in outcomes
    )


async def test_wrong_type_key_is_retry_per_entry(
    make_sink: MakeSink, async_client: aioredis.Redis, prefix: str
) -> None:
    """A destination key of the wrong type fails those entries (Retry), not the others."""
    await async_client.set(f"{prefix}:ev:a", "not a stream")
    sink = await make_sink(f"stream={prefix}:ev:{{target}}")

    outcomes = await sink.deliver(
        Batch.of([outbox(prefix, 1, "a"), outbox(prefix, 2, "b"), outbox(prefix, 3, "a")])
    )

    assert isinstance(outcomes[0], Retry)
    assert outcomes[0].error == "redis-stream XADD failed (ResponseError)"
    assert outcomes[1] == DELIVERED
    assert outcomes[2] == outcomes[0]
    assert await async_client.xlen(f"{prefix}:ev:b") == 1


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("redis-stream:redis://cache.example.com/0?stream=s", SinkOptions(), "needs --allow-plaintext"),
        (
            "redis-stream:redis://:pw@cache.example.com/0?stream=s",
            SinkOptions(allow_plaintext=True),
            "credentials over plaintext",
        ),
        (
            "redis-stream:redis+cluster://127.0.0.1:7000/0?stream=s",
            SinkOptions(),
            "not supported for streams",
        ),
    ],
    ids=["plaintext-remote", "credentials-plaintext", "cluster"],
)
def test_refused_destinations_are_config_errors(spec: str, options: SinkOptions, message: str) -> None:
    """The security rules (README.md#security) and the cluster limitation stop start-up with one line."""
    with pytest.raises(ConfigError, match=message) as info:
        RedisStreamSink(parse_sink_spec(spec), options)

    assert "pw" not in str(info.value)


async def test_plaintext_remote_allowed_with_the_flag() -> None:
    """allow_plaintext lets a non-loopback redis:// destination through (no connection made here)."""
    sink = RedisStreamSink(
        parse_sink_spec("redis-stream:redis://cache.example.com/0?stream=s"),
        SinkOptions(allow_plaintext=True),
    )

    assert sink.name == "redis-stream"


async def test_tls_destination_is_verified_with_the_configured_ca(tls_redis_server: TlsRedisServer) -> None:
    """rediss:// with the right CA delivers; with an unrelated CA the handshake fails into Retry."""
    spec = parse_sink_spec(f"redis-stream:{tls_redis_server.url}?stream=tls")
    good = RedisStreamSink(spec, SinkOptions(redis_ca_file=str(tls_redis_server.ca_path)))
    bad = RedisStreamSink(spec, SinkOptions(redis_ca_file=str(tls_redis_server.wrong_ca_path)))
    for sink in (good, bad):
        await sink.start()

    delivered = await good.deliver(Batch.of([outbox("p", 1, "a")]))
    refused = await bad.deliver(Batch.of([outbox("p", 2, "a")]))
    for sink in (good, bad):
        await sink.close()

    client = tls_redis_server.client()
    assert list(delivered) == [DELIVERED]
    assert isinstance(refused[0], Retry)
    assert not bad.ready()
    assert [f[b"id"] for _, f in client.xrange("tls")] == [b"p:outbox:1"]  # type: ignore[union-attr]
    client.close()


async def test_a_destination_that_stops_answering_is_retry_within_the_socket_timeout(
    redis_server: RedisServer, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition (connections held, nothing answered): each batch is Retry, none hangs.

    On a connection that was working and on a new one whose handshake gets no answer; writes are
    bounded in the sending task (``relayd.runtime.packing``), reads by redis-py.
    """
    monkeypatch.setattr(redis_stream, "SOCKET_TIMEOUT_S", 0.5)
    with TcpProxy(redis_server.port) as proxy:
        sink = RedisStreamSink(parse_sink_spec(f"redis-stream:{proxy.url}?stream={prefix}:s"), SinkOptions())
        await sink.start()
        assert await sink.deliver(Batch.of([outbox(prefix, 1, "a")])) == [DELIVERED]
        proxy.set_mode("blackhole")
        waits_s: list[float] = []
        outcomes: list[Outcome] = []
        for seq in (2, 3):  # the pooled connection, then (it was dropped) a new one
            started = time.monotonic()
            outcomes += await sink.deliver(Batch.of([outbox(prefix, seq, "b")]))
            waits_s.append(time.monotonic() - started)
        await sink.close()
    assert not sink.ready()
    assert all(isinstance(o, Retry) and "TimeoutError" in o.error for o in outcomes)
    assert all(0.5 <= w < 3.0 for w in waits_s)
