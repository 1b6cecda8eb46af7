"""The client a Redis sink (redis-stream, harel) opens on its destination URL, Sentinel included.

One function for every Redis sink, so each gets the same rules: ``rediss://`` verifies the
server (``SinkOptions.redis_ca_file`` names the CA), and ``redis[s]+sentinel://`` gives a
client of the master the sentinels name, which follows a failover (``store.clients``), with the
sentinels' own credentials from ``--sentinel-*-file``. With ``max_connections`` the pool is
bounded and blocking: a caller over the bound waits up to ``pool_wait_s`` for a connection
rather than failing at once.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.sentinel import SentinelConnectionPool

from relayd.errors import ConfigError
from relayd.sinks.base import SinkOptions
from store import async_client_from_url


class _BlockingSentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """A Sentinel-managed pool that waits for a free connection (``BlockingConnectionPool``)."""


def open_destination(
    url: str,
    options: SinkOptions,
    *,
    sink: str,
    socket_timeout_s: float,
    max_connections: int | None = None,
    pool_wait_s: float | None = None,
) -> aioredis.Redis:
    """Create (without connecting) the asyncio client for a sink's destination ``url``.

    Raises:
        ConfigError: redis-py cannot use the URL (its password is never shown).
    """
    scheme = url.partition("://")[0].lower()
    kwargs: dict[str, Any] = {"socket_timeout": socket_timeout_s, "socket_connect_timeout": socket_timeout_s}
    if scheme.startswith("rediss"):
        kwargs |= {"ssl_cert_reqs": "required", "ssl_ca_certs": options.redis_ca_file}
    try:
        if scheme.endswith("+sentinel"):
            if max_connections is not None:
                kwargs |= {
                    "connection_pool_class": _BlockingSentinelPool,
                    "max_connections": max_connections,
                    "timeout": pool_wait_s,
                }
            return async_client_from_url(
                url,
                sentinel_username=options.sentinel_username,
                sentinel_password=options.sentinel_password,
                **kwargs,
            )
        if max_connections is not None:
            pool = aioredis.BlockingConnectionPool.from_url(
                url, max_connections=max_connections, timeout=pool_wait_s, **kwargs
            )
            return aioredis.Redis(connection_pool=pool)
        return aioredis.Redis.from_url(url, **kwargs)
    except ValueError as exc:
        raise ConfigError(f"sink {sink!r}: malformed Redis URL ({type(exc).__name__})") from None
