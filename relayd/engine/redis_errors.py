"""What counts as "Redis is unwell" for the engine: retried with backoff, never fatal."""

from __future__ import annotations

from typing import Final

from redis.exceptions import RedisError

from store import StoreUnavailable

#: A Redis command's failure as the relay loops see it: redis-py's errors, the store's
#: unavailable, and the socket-level errors a dropped connection can surface as.
REDIS_ERRORS: Final = (RedisError, StoreUnavailable, OSError, TimeoutError)
