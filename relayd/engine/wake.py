"""Wake idle prefix loops at once when new work is written, from Redis keyspace notifications.

One pubsub connection per process subscribes to ``__keyspace@<db>__:<key>`` of every prefix's
outbox hash, spawns hash and timers zset (``engine.notify``); a message that may mean new work
sets that prefix's wake event, which its idle sleep waits on. Polling never stops: a message
missed while the connection was down, or never published, is found by the next poll anyway.
So this is only ever a latency shortcut, never a source of truth.

relayd never changes server configuration. At start it reads ``CONFIG GET
notify-keyspace-events``; when the server does not publish hash and sorted-set events it logs
``wake_unavailable`` with the ``CONFIG SET`` an operator would run, and does not subscribe.
When CONFIG is refused (managed Redis renames or forbids it) it cannot tell, logs the same line
and subscribes anyway: where the operator enabled notifications, wake-ups then work. A cluster
publishes notifications on the node that owns the key only, so on a cluster client wake-up
stays off (one log line). A dropped pubsub connection is retried with backoff; while it is
down the relay just polls. Reading the subscription sends no command (no pings): an idle relay
costs Redis nothing more with wake-up on.

A prefix whose passes run back to back has no idle wait to cut short, while every write to its
keys still arrives as a message that costs the relay CPU to parse, per write, more than the
wait it could cut short is worth. So its loop reports itself busy and the subscription leaves that
prefix's channels until the loop waits idle again (``busy``); the change is applied by the
listener itself within ``APPLY_EVERY_S``, and the poll covers anything written meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Mapping
from typing import Any, Final

import structlog
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from relayd.engine.backoff import retry_delay
from relayd.engine.notify import (
    NEEDED_FLAGS,
    channels_by_prefix,
    configured_flags,
    notifications_ready,
    suggested_flags,
    wakes,
)
from relayd.metrics import RelayMetrics
from relayd.state import RedisClient

log = structlog.get_logger(__name__)

#: Reconnect backoff of the subscription: from this ...
_RETRY_BASE_S: Final = 0.2
#: ... up to this.
_RETRY_CAP_S: Final = 30.0
#: Seconds within which the listener applies a prefix's busy/idle change (a local read timeout,
#: no command is sent).
APPLY_EVERY_S: Final = 1.0


class WakeSubscriber:
    """The process's one keyspace subscription, setting each prefix's wake event on new work."""

    def __init__(
        self,
        client: RedisClient,
        events: Mapping[str, asyncio.Event],
        *,
        metrics: RelayMetrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.events = dict(events)
        self.metrics = metrics
        self.rng = rng or random.Random()
        pool = getattr(client, "connection_pool", None)
        db = int(pool.connection_kwargs.get("db") or 0) if pool is not None else 0
        self.channels = channels_by_prefix(self.events, db)
        #: Subscriptions made so far (1 at start, one more per reconnect): tests and logs read it.
        self.subscriptions = 0
        self._busy: set[str] = set()  # prefixes whose passes run back to back
        self._dirty = False  # ``_busy`` changed since the listener last applied it
        self._on: set[bytes] = set()  # channels subscribed on the current connection
        self._pending: set[bytes] = set()  # subscribed by us, confirmation not seen yet

    def busy(self, prefix: str, busy: bool) -> None:
        """Leave (``busy``) or rejoin (idle) ``prefix``'s channels, within ``APPLY_EVERY_S``."""
        if (prefix in self._busy) != busy:
            if busy:
                self._busy.add(prefix)
            else:
                self._busy.discard(prefix)
            self._dirty = True

    async def run(self, stop: asyncio.Event) -> None:
        """Subscribe (when the server allows it) and wake prefixes until ``stop`` is set."""
        if not self.channels or not await self.available():
            return
        listening = asyncio.create_task(self._listen_forever())
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({listening, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (listening, stopped):
                task.cancel()
            for task in (listening, stopped):
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception as exc:  # a wake-up failure must never take the relay down
                    log.warning("wake_failed", error=f"{type(exc).__name__}: {exc}"[:300])

    async def available(self) -> bool:
        """Whether to subscribe; logs ``wake_unavailable`` (once) when wake-up cannot work."""
        fix = f"CONFIG SET notify-keyspace-events {NEEDED_FLAGS}"
        if isinstance(self.client, RedisCluster):
            log.info("wake_unavailable", reason="cluster: notifications are per node", fix=None)
            return False
        try:
            reply = await self.client.config_get("notify-keyspace-events")
        except ResponseError as exc:
            log.warning(
                "wake_unavailable",
                reason=f"CONFIG GET refused ({str(exc)[:120]}); subscribing anyway",
                fix=fix,
            )
            return True
        except Exception as exc:  # Redis down at start: the poll still finds everything
            log.warning("wake_unavailable", reason=f"{type(exc).__name__}: {exc}"[:200], fix=fix)
            return False
        flags = configured_flags(reply)
        if not notifications_ready(flags):
            log.warning(
                "wake_unavailable",
                reason=f"notify-keyspace-events is {flags!r}",
                fix=f"CONFIG SET notify-keyspace-events {suggested_flags(flags)}",
            )
            return False
        return True

    async def _listen_forever(self) -> None:
        failures = 0
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: the poll covers, come back after a backoff
                failures += 1
                delay_s = retry_delay(failures, base_s=_RETRY_BASE_S, cap_s=_RETRY_CAP_S, rng=self.rng)
                log.warning(
                    "wake_disconnected",
                    error=f"{type(exc).__name__}: {exc}"[:300],
                    retry_in_s=round(delay_s, 2),
                )
                await asyncio.sleep(delay_s)
            else:
                failures = 0

    async def _listen(self) -> None:
        pubsub = self.client.pubsub()
        self._on, self._pending = set(), set()
        counted = False  # this connection's first subscription was counted
        try:
            await self._apply(pubsub)
            while True:
                if self._dirty:
                    await self._apply(pubsub)
                if not self._on and pubsub.connection is None:  # every prefix busy from the start
                    await asyncio.sleep(APPLY_EVERY_S)
                    continue
                message = await pubsub.get_message(timeout=APPLY_EVERY_S)
                if message is None:
                    continue
                name = message["channel"]
                name = name.encode() if isinstance(name, str) else name
                if message["type"] == "subscribe":
                    if name in self._pending:  # one we asked for
                        self._pending.discard(name)
                        if not counted:
                            counted = True
                            self._subscribed()
                    elif self._on and name == min(self._on):
                        self._subscribed()  # redis-py reconnected and subscribed again on its own
                elif message["type"] == "message":
                    prefix = self.channels.get(name)
                    if prefix is not None and wakes(message["data"]):
                        self._wake(prefix)
        finally:
            with contextlib.suppress(Exception):  # closing a connection the server already dropped
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _apply(self, pubsub: Any) -> None:
        """Subscribe to the channels of the prefixes not busy, and only those."""
        self._dirty = False
        wanted = {channel for channel, prefix in self.channels.items() if prefix not in self._busy}
        leave, join = self._on - wanted, wanted - self._on
        if leave:  # never an empty UNSUBSCRIBE: that would leave every channel
            await pubsub.unsubscribe(*sorted(leave))
        if join:
            self._pending |= join
            await pubsub.subscribe(*sorted(join))
        self._on = wanted

    def _subscribed(self) -> None:
        self.subscriptions += 1
        log.info("wake_subscribed", channels=len(self.channels), subscriptions=self.subscriptions)
        if self.subscriptions > 1:
            # Whatever was written while the connection was down: look now, not at the next poll.
            for prefix in self.events:
                self._wake(prefix)

    def _wake(self, prefix: str) -> None:
        event = self.events[prefix]
        if event.is_set():
            return
        event.set()
        if self.metrics is not None:
            self.metrics.wakeups.labels(prefix).inc()
