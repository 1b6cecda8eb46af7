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
    health_check_interval: float  # likewise

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
        if not (check_health and self.health_check_interval) and self._fits_send_buffer(command):
            # Nothing here can wait (``_fits_send_buffer``), so no bound is needed: one timer
            # less per command on the path of every read, ack and sink call.
            self.socket_timeout = None
            try:
                await super().send_packed_command(command, check_health)  # type: ignore[misc]
            finally:
                self.socket_timeout = timeout
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

    def _fits_send_buffer(self, command: Any) -> bool:
        """Whether writing ``command`` (packed bytes) to the connected socket cannot block.

        Within the transport's low-water mark, before the write and after it, the writer is not
        paused (a pause lasts until the buffer drains to that mark) and will not be (a pause
        starts above the high-water mark), so the drain returns at once.
        """
        writer = getattr(self, "_writer", None)
        transport = getattr(writer, "transport", None)
        if not isinstance(transport, asyncio.WriteTransport) or transport.is_closing():
            return False  # not connected (the send connects, bounded by its own timeout)
        if isinstance(command, bytes):
            size = len(command)
        elif isinstance(command, list) and all(type(part) is bytes for part in command):
            size = sum(map(len, command))
        else:
            return False
        try:
            return transport.get_write_buffer_size() + size <= transport.get_write_buffer_limits()[0]
        except NotImplementedError:  # a transport without flow control: keep the bound
            return False


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
