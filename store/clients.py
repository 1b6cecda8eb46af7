"""Build a redis-py client (sync or asyncio) for a Redis URL, Sentinel included.

``redis://`` and ``rediss://`` go to ``Redis.from_url`` unchanged (every option redis-py reads
from such a URL keeps working). ``redis+sentinel://`` and ``rediss+sentinel://`` (see
``store.urls``) give a client of the master that redis-py's Sentinel support finds through
the sentinels: each new connection asks them for the current master, and a connection to a
master demoted to replica is dropped (``ReadOnlyError``), so the client follows a failover
once the sentinels have promoted a replica. redis is imported inside the functions, so
importing the store costs nothing for an engine that injects its own client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from store.urls import RedisUrl, parse_url

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis


def sentinel_options(
    url: RedisUrl,
    *,
    sentinel_username: str | None = None,
    sentinel_password: str | None = None,
    connection: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options for the sentinels, options for the master) from the URL and the caller's options.

    The sentinels get the socket and TLS options of ``connection`` and their own credentials;
    the master gets ``connection``, the URL's credentials and its database.
    """
    base = dict(connection or {})
    master = base | {"db": url.db}
    if url.username is not None:
        master["username"] = url.username
    if url.password is not None:
        master["password"] = url.password
    if url.tls:
        master["ssl"] = True
    shared = {k: v for k, v in base.items() if k.startswith(("socket_", "ssl", "retry"))}
    if url.tls:
        shared["ssl"] = True
    sentinels = shared | {"username": sentinel_username, "password": sentinel_password}
    return sentinels, master


def _sentinel_url(url: str) -> RedisUrl | None:
    parsed = parse_url(url) if "+sentinel://" in url.partition("?")[0].lower() else None
    if parsed is not None and parsed.query:
        raise ValueError(f"Redis URL {parsed.display!r}: query options are not supported for Sentinel")
    return parsed


def sync_client_from_url(
    url: str,
    *,
    sentinel_username: str | None = None,
    sentinel_password: str | None = None,
    **connection: Any,
) -> redis.Redis:
    """A sync client for ``url``; ``connection`` options go to every data-node connection."""
    import redis
    from redis.sentinel import Sentinel

    parsed = _sentinel_url(url)
    if parsed is None:
        return redis.Redis.from_url(url, **connection)
    sentinels, master = sentinel_options(
        parsed,
        sentinel_username=sentinel_username,
        sentinel_password=sentinel_password,
        connection=connection,
    )
    sentinel = Sentinel(list(parsed.nodes), sentinel_kwargs=sentinels)
    client: redis.Redis = sentinel.master_for(str(parsed.service), **master)
    return client


def async_client_from_url(
    url: str,
    *,
    sentinel_username: str | None = None,
    sentinel_password: str | None = None,
    **connection: Any,
) -> aioredis.Redis:
    """The asyncio twin of ``sync_client_from_url``."""
    import redis.asyncio as aioredis
    from redis.asyncio.sentinel import Sentinel

    parsed = _sentinel_url(url)
    if parsed is None:
        return aioredis.Redis.from_url(url, **connection)
    sentinels, master = sentinel_options(
        parsed,
        sentinel_username=sentinel_username,
        sentinel_password=sentinel_password,
        connection=connection,
    )
    sentinel = Sentinel(list(parsed.nodes), sentinel_kwargs=sentinels)
    client: aioredis.Redis = sentinel.master_for(str(parsed.service), **master)
    return client
