"""Make ``redis.asyncio`` clients pack commands with hiredis (C) instead of pure Python.

redis-py's sync connections pack with ``hiredis.pack_command`` when hiredis is installed; its
asyncio connections never do. Their packer re-joins a growing buffer for every argument, so a
1000-field HMGET (a backlog window, an ack) or a batch of 1000 XADD arguments spends more
client CPU packing than everything else in a pass (``tests/benchmarks/profile_drain.py``). The bytes on
the wire are identical; only who builds them changes.

``use_hiredis_packing(client)`` swaps the connection class of a ``redis.asyncio.Redis`` pool
for a subclass with the hiredis packer, including the connections already pooled. Cluster
clients and clients with a non-UTF-8 encoding are left as they are.

The subclass also bounds each write with ``asyncio.timeout`` where redis-py uses
``asyncio.wait_for``, which on Python 3.11 runs every send in a new Task (every sink call, read,
ack and probe of a pass). Same bound,
same errors (``redis.exceptions.TimeoutError``, the connection dropped), no Task.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from redis.exceptions import DataError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import HIREDIS_AVAILABLE


class _HiredisPacking:
    """Mixin over a redis.asyncio connection class: hiredis packing, writes bounded in-task."""

    socket_timeout: float | None  # the redis-py connection's (annotation only: no class attribute)

    def pack_command(self, *args: Any) -> list[bytes]:
        import hiredis

        # 'CONFIG GET' style names carry their sub-command: Redis expects separate arguments
        if isinstance(args[0], str):
            args = (*args[0].encode().split(), *args[1:])
        elif b" " in args[0]:
            args = (*args[0].split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:
            pass
        # rare: buffers hiredis does not take; None, bool and the like stay refused
        args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError as exc:
            raise DataError(str(exc)) from None

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        timeout = self.socket_timeout
        if not timeout:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
            return
        # Without socket_timeout redis-py writes in this task; the bound is kept here instead.
        # Clearing it for the call is safe: one task uses a connection at a time (checked out of
        # the pool; a pubsub sends and reads in its one listener task).
        self.socket_timeout = None
        try:
            async with asyncio.timeout(timeout):
                await super().send_packed_command(command, check_health)  # type: ignore[misc]
        except TimeoutError:  # the bound; redis-py dropped the connection on the cancel
            raise RedisTimeoutError("Timeout writing to socket") from None
        finally:
            self.socket_timeout = timeout


@functools.cache
def _packing_class(base: type) -> type:
    return type(f"Hiredis{base.__name__}", (_HiredisPacking, base), {})


def use_hiredis_packing(client: Any) -> bool:
    """Switch ``client``'s connections to the hiredis packer; return whether it now uses it."""
    pool = getattr(client, "connection_pool", None)
    if not HIREDIS_AVAILABLE or pool is None or not hasattr(pool, "connection_class"):
        return False
    kwargs = getattr(pool, "connection_kwargs", {})
    if kwargs.get("encoding", "utf-8").lower().replace("-", "") != "utf8":
        return False  # hiredis encodes str as UTF-8 only
    if kwargs.get("encoding_errors", "strict") != "strict":
        return False
    base = pool.connection_class
    if issubclass(base, _HiredisPacking):
        return True
    fast = _packing_class(base)
    pool.connection_class = fast
    # connections pooled before the switch (a PING at connect time made one) switch too
    pooled = [*getattr(pool, "_available_connections", ()), *getattr(pool, "_in_use_connections", ())]
    for connection in pooled:
        if type(connection) is base:
            connection.__class__ = fast
    return True
