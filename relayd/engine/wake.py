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

The subscription stays up whatever the loops do. A loop that is busy still needs to hear of a
write during its pass (its next pass then starts at once instead of waiting), and the cost of
hearing it is kept small: everything the socket holds is read in one go and parsed by hiredis,
and the whole read is folded into one set of (prefix, kind) before any prefix is told
(``notify.new_work``). Each prefix's ``WakeTarget`` collects the kinds written since its loop last
took them (a pass reads those lanes without probing them) and its event ends the idle wait.
``live`` says whether the subscription is confirmed on the current connection: only then may a
loop rely on it (wait a whole poll interval, skip probing lanes nobody wrote to). On every
(re)subscription every prefix is woken for every kind: a write made while it was down is read at
once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import hiredis
import structlog
from prometheus_client import Counter
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from relayd.engine.backoff import retry_delay
from relayd.engine.clock import sleep_until
from relayd.engine.notify import (
    NEEDED_FLAGS,
    configured_flags,
    new_work,
    notifications_ready,
    suggested_flags,
    watched_channels,
)
from relayd.envelope import KINDS, Kind
from relayd.observability.metrics import RelayMetrics
from relayd.state import RedisClient

log = structlog.get_logger(__name__)

#: Reconnect backoff of the subscription: from this ...
_RETRY_BASE_S: Final = 0.2
#: ... up to this.
_RETRY_CAP_S: Final = 30.0
#: Bytes taken from the socket per read (a keyspace message is about 50 bytes).
_READ_BYTES: Final = 1 << 16
#: While every target is already woken, the socket is left unread until a loop takes its
#: wake-up, for at most this long (s): the messages meanwhile wait in socket buffers and are
#: then read at once, and a standby whose loops take nothing still drains them now and then.
PAUSE_AT_MOST_S: Final = 1.0
#: A read that brought this many replies or more may have left more in the socket: read on
#: before pausing, so a backlog of messages never outgrows the reads.
_READ_ON_REPLIES: Final = 256

#: One read of the subscription: every reply the socket holds now (waits for at least one).
ReadReplies = Callable[[], Awaitable[list[Any]]]


@dataclass(slots=True)
class WakeTarget:
    """What the subscription tells one prefix's loop: its wake event and the kinds written."""

    #: Set on new work: ends the loop's idle wait (``take`` clears it, before each pass).
    event: asyncio.Event = field(default_factory=asyncio.Event)
    #: Kinds written since the loop last took them (``take``).
    kinds: set[Kind] = field(default_factory=set)
    #: Set by ``take``: tells a subscriber that paused (every target already woken) to read on.
    taken: asyncio.Event = field(default_factory=asyncio.Event)

    def take(self) -> frozenset[Kind]:
        """Clear the wake-up and hand over the kinds written since the last ``take``."""
        self.event.clear()
        kinds = frozenset(self.kinds)
        self.kinds.clear()
        self.taken.set()
        return kinds


class WakeSubscriber:
    """The process's one keyspace subscription, waking each prefix's loop on new work."""

    def __init__(
        self,
        client: RedisClient,
        targets: Mapping[str, WakeTarget],
        *,
        metrics: RelayMetrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.targets = dict(targets)
        self._taken = asyncio.Event()  # some target's wake-up was taken: read on
        for target in self.targets.values():
            target.taken = self._taken
        self.metrics = metrics
        self._wakeups: dict[str, Counter] = {}  # ``relayd_wakeups_total`` per prefix
        self.rng = rng or random.Random()
        pool = getattr(client, "connection_pool", None)
        db = int(pool.connection_kwargs.get("db") or 0) if pool is not None else 0
        self.channels = watched_channels(self.targets, db)
        #: Subscriptions made so far (1 at start, one more per reconnect): tests and logs read it.
        self.subscriptions = 0
        #: Confirmed on the current connection: every write to a watched key reaches a target.
        self.live = False
        #: The subscription's transport (a socket connection), paused while every target is woken.
        self._transport: asyncio.ReadTransport | None = None
        #: Socket reads that brought replies, and the replies they brought (tests read them).
        self.reads = 0
        self.replies = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Subscribe (when the server allows it) and wake prefixes until ``stop`` is set."""
        if not self.channels or not await self.available():
            return
        listening = asyncio.create_task(self._listen_forever())
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({listening, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.live = False
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
        """Subscribe on a connection of its own and fold every read into wake-ups until it fails.

        The connection comes from the client's pool class (so TLS, credentials and a
        sentinel's master lookup apply) but is never returned to the pool.
        """
        pool = self.client.connection_pool  # type: ignore[union-attr]  # never a cluster: ``available``
        connection = pool.make_connection()
        try:
            await connection.connect()
            await connection.send_command("SUBSCRIBE", *sorted(self.channels))
            read = _socket_reader(connection) or _reply_reader(connection)
            self._transport = _transport(connection)
            unconfirmed = set(self.channels)
            while True:
                replies = await read()
                self.reads += 1
                self.replies += len(replies)
                if unconfirmed:
                    unconfirmed -= _confirmed(replies)
                    if not unconfirmed:
                        self._subscribed()
                for prefix, kind in new_work(replies, self.channels):
                    self._wake(prefix, kind)
                if len(replies) < _READ_ON_REPLIES:
                    await self._pause_while_all_woken()
        finally:
            self.live = False
            self._transport = None
            with contextlib.suppress(Exception):  # closing a connection the server already dropped
                await connection.disconnect()

    async def _pause_while_all_woken(self) -> None:
        """Leave the socket unread while every target is woken already (``PAUSE_AT_MOST_S``).

        Nothing a message could say is lost meanwhile: each loop will pass anyway. Under a
        steady load this makes one read per pass of whatever came, instead of one per write.
        The transport stops reading too: otherwise the event loop would still wake for every
        message to copy it into the stream's buffer; the kernel holds them instead.
        """
        self._taken.clear()
        if not all(target.event.is_set() for target in self.targets.values()):
            return
        transport = self._transport
        if transport is not None:
            transport.pause_reading()
        try:
            await sleep_until(PAUSE_AT_MOST_S, self._taken)
        finally:
            if transport is not None and not transport.is_closing():
                transport.resume_reading()

    @property
    def socket_paused(self) -> bool:
        """Whether the subscription's socket is left unread now (every target woken)."""
        return self._transport is not None and not self._transport.is_reading()

    def _subscribed(self) -> None:
        self.subscriptions += 1
        self.live = True
        log.info("wake_subscribed", channels=len(self.channels), subscriptions=self.subscriptions)
        # Whatever was written before the subscription was confirmed: look now, not at the next poll.
        for prefix in self.targets:
            for kind in KINDS:
                self._wake(prefix, kind)

    def _wake(self, prefix: str, kind: Kind) -> None:
        target = self.targets[prefix]
        target.kinds.add(kind)
        if target.event.is_set():
            return
        target.event.set()
        if self.metrics is not None:
            series = self._wakeups.get(prefix)
            if series is None:  # looked up once per prefix (a label lookup takes a lock each time)
                series = self._wakeups[prefix] = self.metrics.wakeups.labels(prefix)
            series.inc()


def _confirmed(replies: list[Any]) -> set[bytes]:
    """The channels whose subscription ``replies`` confirm; raises an error reply."""
    confirmed: set[bytes] = set()
    for reply in replies:
        if isinstance(reply, Exception):  # e.g. NOPERM: the caller backs off and tries again
            raise reply
        if reply[0] == b"subscribe":
            confirmed.add(reply[1])
    return confirmed


def _socket_reader(connection: Any) -> ReadReplies | None:
    """Read the subscription's socket straight into a hiredis reader (None: not a socket).

    redis-py parses and wraps each message on its own (tens of µs each, one per write to a
    watched key); this takes whatever the socket holds and parses it in C.
    """
    stream = getattr(connection, "_reader", None)
    if not isinstance(stream, asyncio.StreamReader):
        return None
    parser = hiredis.Reader()

    async def read() -> list[Any]:
        replies: list[Any] = []
        while not replies:
            data = await stream.read(_READ_BYTES)
            if not data:
                raise RedisConnectionError("the server closed the subscription")
            parser.feed(data)
            while (reply := parser.gets()) is not False:
                replies.append(reply)
        return replies

    return read


def _transport(connection: Any) -> asyncio.ReadTransport | None:
    """The transport under a redis-py connection's socket (None: no socket, e.g. fakeredis)."""
    transport = getattr(getattr(connection, "_writer", None), "transport", None)
    return transport if isinstance(transport, asyncio.ReadTransport) else None


def _reply_reader(connection: Any) -> ReadReplies:
    """One reply per read through redis-py (a connection without a socket: fakeredis)."""

    async def read() -> list[Any]:
        return [await connection.read_response(disable_decoding=True)]

    return read
