"""The ``redis-stream`` sink: XADD every envelope to a Redis stream, one pipelined round-trip per batch.

``redis-stream:REDIS_URL?stream=NAME[&maxlen=N]``. Each envelope becomes one stream entry with
the fields ``envelope`` (the ``relayd/1`` JSON), ``id`` and ``kind``. The destination may be the
relay's own Redis or any other.

- ``{target}`` in NAME is replaced by the envelope's ``ordering_key`` (the outbox target, the
  spawned child, the timer's execution), or by ``_`` when it has none, so
  ``stream=events:{target}`` gives every target its own stream.
- ``maxlen=N`` trims approximately (``MAXLEN ~ N``), which Redis does cheaply per node.
- The pipeline is not a transaction and keeps the batch order, so per-target order holds.
- ``rediss://`` verifies the server certificate (``options.redis_ca_file`` replaces the system
  store); plaintext to a non-loopback host needs ``options.allow_plaintext``.
- A connection error or timeout makes the whole batch Retry (some entries may already be in
  the stream: delivery is at-least-once; consumers dedupe on ``id``). ``ready()`` follows the
  last batch.
- Redis Cluster destinations (``redis+cluster://``) are not supported for streams yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relayd.envelope import Envelope
from relayd.errors import ConfigError, SinkError
from relayd.sinks.base import DELIVERED, Outcome, Retry, SinkOptions
from relayd.sinks.spec import SinkSpec, check_redis_url

#: What ``{target}`` becomes for an envelope without an ordering key.
NO_TARGET: Final = "_"
SOCKET_TIMEOUT_S: Final = 5.0


def stream_name(template: str, envelope: Envelope) -> str:
    """The stream ``envelope`` goes to: ``template`` with ``{target}`` filled in."""
    return template.replace("{target}", envelope.ordering_key or NO_TARGET)


class RedisStreamSink:
    """XADD envelopes to a stream (or one stream per target)."""

    name = "redis-stream"

    def __init__(self, spec: SinkSpec, options: SinkOptions, *, client: aioredis.Redis | None = None) -> None:
        if "+cluster" in spec.target.partition("://")[0]:
            raise ConfigError("sink 'redis-stream': Redis Cluster destinations are not supported for streams")
        self._stream = spec.params.get("stream", "")
        if not self._stream:
            raise ConfigError("sink 'redis-stream' needs a stream name: 'redis-stream:REDIS_URL?stream=NAME'")
        maxlen = spec.params.get("maxlen")
        self._maxlen = int(maxlen) if maxlen else None
        if client is None:
            check_redis_url(spec.target, "redis-stream", allow_plaintext=options.allow_plaintext)
        self._url = spec.target
        self._ca_file = options.redis_ca_file
        self._client = client
        self._owns_client = client is None
        self._healthy = True

    async def start(self) -> None:
        if self._client is not None:
            return
        kwargs: dict[str, Any] = {
            "socket_timeout": SOCKET_TIMEOUT_S,
            "socket_connect_timeout": SOCKET_TIMEOUT_S,
        }
        if self._url.startswith("rediss://"):
            kwargs |= {"ssl_cert_reqs": "required", "ssl_ca_certs": self._ca_file}
        try:
            self._client = aioredis.Redis.from_url(self._url, **kwargs)
        except ValueError as exc:
            raise ConfigError(f"sink 'redis-stream': malformed Redis URL ({type(exc).__name__})") from None

    async def deliver(self, batch: Sequence[Envelope]) -> Sequence[Outcome]:
        if self._client is None:
            raise SinkError("sink 'redis-stream' delivered to before start()")
        pipe = self._client.pipeline(transaction=False)
        for envelope in batch:
            pipe.xadd(
                stream_name(self._stream, envelope),
                {"envelope": envelope.to_json(), "id": envelope.id, "kind": envelope.kind},
                maxlen=self._maxlen,
                approximate=True,
            )
        try:
            results = await pipe.execute(raise_on_error=False)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            self._healthy = False
            return [Retry(error=f"redis-stream unreachable ({type(exc).__name__})")] * len(batch)
        self._healthy = True
        return [
            Retry(error=f"redis-stream XADD failed ({type(result).__name__})")
            if isinstance(result, RedisError)
            else DELIVERED
            for result in results
        ]

    def ready(self) -> bool:
        return self._healthy

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()
