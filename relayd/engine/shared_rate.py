"""``--sink-rate-scope cluster``: one token bucket per sink name in Redis, shared by every replica.

The bucket is a hash under the first prefix served (``P:relay:rate:{sink}``, so the ACL rule of
the prefixes covers it and replicas configured alike share it), updated by one Lua script on
the Redis server's clock (``state/scripts/rate_take.lua``): each delivery takes its entries'
tokens there and waits what the script answers, so the replicas together deliver at most the
rate to the sink. Its capacity is the local bucket's (``engine.rate``): a tenth of a second's
worth, the largest batch.

When the script fails (Redis unreachable, a timeout, a refusal), ``--sink-rate-fallback``
decides: ``process`` (the default) limits this process alone with its own bucket until Redis
answers again (the sink may then see up to the rate times the replicas); ``hold`` raises the
error, so the pass fails and is retried as any Redis error is: nothing goes to the sink until
the bucket answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import structlog

from relayd.engine.clock import Clock
from relayd.engine.options import SweepOptions
from relayd.engine.rate import TokenBucket
from relayd.engine.redis_errors import REDIS_ERRORS
from relayd.state import RedisClient, scripts
from store import Keyspace

log = structlog.get_logger(__name__)

Fallback = Literal["process", "hold"]


class SharedBucket:
    """A sink's token bucket in Redis; ``reserve`` answers how long to wait, as ``TokenBucket``'s."""

    def __init__(
        self, client: RedisClient, key: str, rate_per_s: float, *, sink: str, fallback: Fallback, clock: Clock
    ) -> None:
        self.client = client
        self.key = key
        self.sink = sink
        self.local = TokenBucket(rate_per_s)  # the fallback, and the capacity
        self.fallback = fallback
        self.clock = clock
        self._failing = False

    @property
    def capacity(self) -> int:
        return self.local.capacity

    async def reserve(self, count: int) -> float:
        """Take ``count`` tokens from the shared bucket; seconds to wait before sending."""
        rate = self.local.rate_per_s
        try:
            reply = await self.client.eval(scripts.RATE_TAKE, 1, self.key, repr(rate), self.capacity, count)
        except REDIS_ERRORS as exc:
            if self.fallback == "hold":
                raise
            if not self._failing:
                log.warning("sink_rate_shared_failed", sink=self.sink, error=type(exc).__name__)
                self._failing = True
            return self.local.reserve(count, self.clock.monotonic())
        if self._failing:
            log.info("sink_rate_shared_restored", sink=self.sink)
            self._failing = False
        return float(reply.decode() if isinstance(reply, bytes) else reply)


def shared_buckets(client: RedisClient, options: SweepOptions, clock: Clock) -> Callable[[str], SharedBucket]:
    """The factory of each sink's shared bucket, by guard name, under the first prefix."""
    keyspace = Keyspace(options.prefixes[0])
    fallback: Fallback = "hold" if options.sink_rate_fallback == "hold" else "process"

    def bucket(sink: str) -> SharedBucket:
        return SharedBucket(
            client,
            keyspace.relay(f"rate:{sink}"),
            options.sink_rate_per_s,
            sink=sink,
            fallback=fallback,
            clock=clock,
        )

    return bucket
