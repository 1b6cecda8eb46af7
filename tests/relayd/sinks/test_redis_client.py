"""The destination client of the Redis sinks: Sentinel-managed and bounded where asked, no server needed."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.asyncio.sentinel import SentinelConnectionPool

from relayd.errors import ConfigError
from relayd.sinks import SinkOptions, parse_sink_spec
from relayd.sinks.redis_destination import open_destination

SENTINEL_URL = "redis+sentinel://:m-pw@127.0.0.1:26379,127.0.0.1:26380/cache/3"


async def test_a_sentinel_destination_gets_a_bounded_blocking_sentinel_pool() -> None:
    """The master's password from the URL, the sentinels' from the options, the bound kept."""
    options = SinkOptions(sentinel_password="s-pw")

    client = open_destination(
        SENTINEL_URL, options, sink="harel", socket_timeout_s=2.0, max_connections=4, pool_wait_s=1.5
    )

    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert isinstance(pool, aioredis.BlockingConnectionPool)
    assert (pool.service_name, pool.max_connections, pool.timeout) == ("cache", 4, 1.5)
    assert (pool.connection_kwargs["db"], pool.connection_kwargs["password"]) == (3, "m-pw")
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [26379, 26380]
    assert {s.connection_pool.connection_kwargs["password"] for s in sentinels} == {"s-pw"}
    await client.aclose()


async def test_the_stream_and_harel_sinks_open_sentinel_destinations_with_it() -> None:
    """Both Redis sinks build their client here, so a Sentinel URL works for each."""
    pytest.importorskip("harel")
    from relayd.sinks.harel.sink import HarelSink
    from relayd.sinks.redis_stream.sink import RedisStreamSink

    stream = RedisStreamSink(parse_sink_spec(f"redis-stream:{SENTINEL_URL}?stream=s"), SinkOptions())
    harel = HarelSink(parse_sink_spec(f"harel:{SENTINEL_URL}"), SinkOptions())
    await stream.start()
    await harel.start()

    assert isinstance(stream._client.connection_pool, SentinelConnectionPool)  # type: ignore[union-attr]
    assert isinstance(harel._transport_client.connection_pool, SentinelConnectionPool)  # type: ignore[union-attr]
    await stream.close()
    await harel.close()


def test_a_url_redis_py_cannot_use_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match="malformed Redis URL"):
        open_destination(
            "redis+sentinel://127.0.0.1:26379", SinkOptions(), sink="harel", socket_timeout_s=1.0
        )
