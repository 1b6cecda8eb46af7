"""One round-trip of several commands on an asyncio client, without a redis-py ``Pipeline``.

A reader under a steady writer makes one such round-trip per pass, and redis-py's pipeline
costs more client CPU than the commands it carries: a pipeline object, pre-flight hooks, a
response step per command, operation metrics, and a Task per call to give the connection back
(``Pipeline.reset`` shields the release). ``round_trip`` sends the packed commands in one write
on one pooled connection and reads every reply in order, as the pipeline does (same
connection-error retries, by the connection's ``Retry``, on a fresh socket each time); then it
raises the first error reply, once every reply has been read, so the connection stays in step.
Replies come as the server sent them: no response callbacks (``PING`` is ``b"PONG"``), so it
suits commands that have none (``GET``, ``HMGET``, ``HDEL``, ``EVALSHA``).
A connection left with unread replies (a cancel, an error mid-read) is dropped, never reused.
Clients without a connection pool (a cluster) use a pipeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: One command: its name and arguments, as ``execute_command`` takes them.
Command = Sequence[Any]


async def round_trip(client: Any, commands: Sequence[Command]) -> list[Any]:
    """Every reply of ``commands``, sent in one write; raises the first error reply."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(await pipe.execute())
    connection = await pool.get_connection()
    try:

        async def send_and_read() -> list[Any]:
            await connection.send_packed_command(connection.pack_commands(commands))
            return await _read_replies(connection, len(commands))

        async def drop(_error: Exception) -> None:
            await connection.disconnect()  # the next attempt connects afresh

        replies: list[Any] = await connection.retry.call_with_retry(send_and_read, drop)
    except BaseException:
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    return replies


async def _read_replies(connection: Any, count: int) -> list[Any]:
    """``count`` replies in order, error replies among them, bounded as one read.

    redis-py bounds each reply by the connection's ``socket_timeout`` (a timer armed and
    cancelled per reply); here one bound covers them all, with the same error when it runs out
    (``redis.exceptions.TimeoutError``, the connection dropped). Clearing the timeout for the
    block is safe: the connection is checked out of the pool, used by this task alone.
    """
    timeout = connection.socket_timeout
    connection.socket_timeout = None
    replies: list[Any] = []
    try:
        async with asyncio.timeout(timeout):
            for _ in range(count):
                try:
                    replies.append(await connection.read_response())
                except ResponseError as exc:  # an error reply: read in full, the next ones follow
                    replies.append(exc)
    except TimeoutError:  # the bound: redis-py dropped the connection on the cancel
        raise RedisTimeoutError("Timeout reading from the server") from None
    finally:
        connection.socket_timeout = timeout
    return replies
