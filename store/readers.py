"""I/O shells over ``SeqWindow``: the sync ``BacklogReader`` and the ``AsyncBacklogReader``.

Each read is one pipelined round-trip (counter GET + one HMGET of gaps and window; the async
reader's without a redis-py pipeline object, ``store.round_trip``), plus one HSCAN step when the
reconcile is due, and an HLEN (then, for a small hash, an HKEYS) when a read finds nothing with a
long range left below the counter (``SeqWindow.burned_ahead``). The persisted cursor
``P:relay:cursor:{kind}`` is the only key a reader writes, and only on ``checkpoint()``, except
that an async read may carry the ack of entries it returned before
(``AsyncBacklogReader.read_new``'s ``ack``): their HDEL goes
first in the same round-trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from redis.exceptions import NoScriptError, ResponseError

from store.backlog import RawEntry, SeqWindow, WindowRead, merge
from store.fence import Fence, check_guard, fenced_call, fenced_refusal, guard_read
from store.keys import Keyspace
from store.plans import ack_fields
from store.round_trip import Command, round_trip
from store.scripts import FENCED_HDEL

BacklogKind = Literal["outbox", "spawns"]


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _as_text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes | bytearray) else value


class _ReaderKeys:
    __slots__ = ("counter", "cursor", "hash")

    def __init__(self, keyspace: Keyspace, kind: BacklogKind) -> None:
        if kind not in ("outbox", "spawns"):
            raise ValueError(f"unknown backlog kind {kind!r}")
        self.hash = keyspace.outbox if kind == "outbox" else keyspace.spawns
        self.counter = keyspace.outbox_seq if kind == "outbox" else keyspace.spawns_seq
        self.cursor = keyspace.relay(f"cursor:{kind}")


class _ReaderBase:
    """What both readers share: the state machine and the reply decoding."""

    def __init__(
        self,
        client: Any,
        keyspace: Keyspace,
        kind: BacklogKind,
        *,
        grace_s: float,
        reconcile_interval_s: float,
    ) -> None:
        self.client = client
        self.kind = kind
        self.keys = _ReaderKeys(keyspace, kind)
        self.window = SeqWindow(grace_s=grace_s, reconcile_interval_s=reconcile_interval_s)
        #: The replies of the last async read's ``then`` commands.
        self.then_replies: list[Any] = []

    def resolve(self, fields: Iterable[str]) -> None:
        """Forget returned entries that were acked or dead-lettered."""
        self.window.resolve(fields)

    @property
    def open_count(self) -> int:
        return self.window.open_count

    @property
    def low_water_mark(self) -> int:
        return self.window.low_water_mark

    @property
    def exhausted(self) -> bool:
        return self.window.exhausted

    def _restore(self, raw: bytes | str | None) -> None:
        text = _as_text(raw) if raw is not None else ""
        self.window.restore(int(text) if text.isdigit() else None)

    def _fold_window(
        self, read: WindowRead, counter: bytes | str | None, values: Sequence[bytes | str | None], now: float
    ) -> list[RawEntry]:
        count = int(counter) if counter is not None else None
        # Replies are bytes already on a client without decode_responses: convert only if not.
        # One reply is all bytes or all str, so its first value tells (no check per value).
        first = next((v for v in values if v is not None), None)
        if first is not None and type(first) is not bytes:
            values = [None if v is None else _as_bytes(v) for v in values]
        return self.window.apply(read, count, cast("Sequence[bytes | None]", values), now)

    def _below_frontier(self, limit: int, size: int, now: float) -> bool:
        """Whether to list the hash's fields for entries below the frontier (``SeqWindow.rewind``):
        it holds entries this reader does not know of, and listing them is cheap."""
        return self.window.unknown_entries(size, now) and self.window.lists_cheaply(limit, size)

    def _skip(self, limit: int, size: int, fields: list[str] | None) -> None:
        """Jump the frontier past a burned range (``SeqWindow.skip_target``)."""
        target = self.window.skip_target(limit, size, fields)
        if target is not None:
            self.window.skip_to(target)

    def _fold_scan(
        self, cursor: int | bytes, pairs: Mapping[Any, Any], budget: int, now: float
    ) -> list[RawEntry]:
        decoded = [(_as_text(f), _as_bytes(v)) for f, v in pairs.items()]
        return self.window.apply_scan(int(cursor), decoded, budget, now)


class BacklogReader(_ReaderBase):
    """Bounded, gap-tolerant reads of one hash on a sync redis-py client (see ``store.backlog``)."""

    def start(self) -> None:
        """Load the persisted cursor (a missing key starts at seq 1)."""
        self._restore(self.client.get(self.keys.cursor))

    def read_new(self, limit: int, *, now: float, reconcile: bool = True) -> list[RawEntry]:
        """Entries never returned before, at most ``limit``, in seq order (``seq=None`` last).

        ``reconcile=False`` skips the HSCAN step (see ``AsyncBacklogReader.read_new``).
        """
        read = self.window.plan(limit - (self.window.reconcile_share(limit, now) if reconcile else 0))
        pipe = self.client.pipeline(transaction=False)
        pipe.hlen(self.keys.hash)
        pipe.get(self.keys.counter)
        pipe.hmget(self.keys.hash, read.fields)
        size, counter, values = pipe.execute()
        entries = self._fold_window(read, counter, values, now)
        listed: list[str] | None = None  # the hash's fields, when this read listed them
        if reconcile and self._below_frontier(limit, int(size), now):
            listed = [_as_text(f) for f in self.client.hkeys(self.keys.hash)]
            if (rewound := self.window.rewind(listed, entries, now)) is not None:
                # The walk starts at once: what it finds joins this read (no reconcile this time).
                room = limit - len(rewound)
                return merge(rewound, self.read_new(room, now=now, reconcile=False)) if room else rewound
        budget = limit - len(entries)
        if reconcile and budget > 0 and self.window.reconcile_due(now, bool(entries)):
            cursor, pairs = self.client.hscan(self.keys.hash, self.window.scan_cursor, count=limit)
            entries = merge(entries, self._fold_scan(cursor, pairs, budget, now))
        if not entries and self.window.burned_ahead(limit):
            if listed is None and self.window.lists_cheaply(limit, int(size)):
                listed = [_as_text(f) for f in self.client.hkeys(self.keys.hash)]
            self._skip(limit, int(size), listed)
        return entries

    def checkpoint(self) -> None:
        """Persist the low-water mark as the restart point."""
        self.client.set(self.keys.cursor, self.window.low_water_mark)


class AsyncBacklogReader(_ReaderBase):
    """The asyncio twin of ``BacklogReader`` (same state machine, awaited I/O)."""

    _fenced_hdel: Any = None  # the fenced HDEL script, registered on first use

    async def start(self) -> None:
        """Load the persisted cursor (a missing key starts at seq 1)."""
        self._restore(await self.client.get(self.keys.cursor))

    async def read_new(
        self,
        limit: int,
        *,
        now: float,
        reconcile: bool = True,
        ack: Sequence[str] = (),
        fence: Fence | None = None,
        then: Sequence[Command] = (),
    ) -> list[RawEntry]:
        """Entries never returned before, at most ``limit``, in seq order (``seq=None`` last).

        ``reconcile=False`` skips the HSCAN step: for a read that runs while entries it returned
        earlier are being acked (a prefetch). Such a scan could see an entry just before its
        HDEL and, finding it resolved by the time the reply is folded, return it again.

        ``ack``: fields this reader returned before, delivered since: deleted first in the same
        round-trip (with ``fence``, only while the fence holds: else ``StoreFenced``, nothing
        deleted), then resolved. A reader under a steady writer thus acks one pass's entries
        with the next pass's read instead of a round-trip of its own.

        ``fence`` without ``ack``: a fenced read. A ``GET`` of the guard key goes first in the
        same round-trip; when it holds another token (or none), ``StoreFenced`` and the read
        hands over nothing (the entries it found stay unread, for the guard's holder).

        ``then``: commands that run after the read in the same round-trip (Redis runs a
        connection's commands in order); their replies are left in ``then_replies``, or none
        when the read returns entries found after that round-trip (by its reconcile scan or a
        rewind), which those replies say nothing of.
        """
        read = self.window.plan(limit - (self.window.reconcile_share(limit, now) if reconcile else 0))
        names = ack_fields(ack)
        guard = None if names else fence  # with an ack, its script checks the fence
        commands: list[Command] = [self._ack_command(names, fence)] if names else []
        if guard is not None:
            commands.append(guard_read(guard))
        # HLEN first: an entry committed during the round-trip then cannot look unknown.
        commands += [
            ("HLEN", self.keys.hash),
            ("GET", self.keys.counter),
            ("HMGET", self.keys.hash, *read.fields),
            *then,
        ]
        try:
            try:
                replies = await round_trip(self.client, commands)
            except NoScriptError:  # first use on this server, or it lost its scripts: load, once
                await self.client.script_load(self._fenced_hdel.script)
                replies = await round_trip(self.client, commands)
        except ResponseError as exc:
            if (fenced := fenced_refusal(exc, fence)) is not None:
                raise fenced from exc
            raise
        size, counter, values = replies[len(replies) - len(then) - 3 : len(replies) - len(then)]
        if guard is not None:
            check_guard(guard, replies[0], found=values)
        self.then_replies = replies[len(replies) - len(then) :]
        if names:
            self.resolve(names)
        return await self._after_round_trip(
            self._fold_window(read, counter, values, now), limit, int(size), now, reconcile=reconcile
        )

    async def _after_round_trip(
        self, entries: list[RawEntry], limit: int, size: int, now: float, *, reconcile: bool
    ) -> list[RawEntry]:
        """What a read does after its round-trip found ``entries``: a rewind below the frontier,
        the reconcile scan, a jump past a burned range. Returning entries found here leaves no
        ``then_replies`` (those commands ran before these reads). A rewind keeps only entries of
        the round-trip, and its walk's own read leaves none."""
        listed: list[str] | None = None  # the hash's fields, when this read listed them
        if reconcile and self._below_frontier(limit, size, now):
            listed = [_as_text(f) for f in await self.client.hkeys(self.keys.hash)]
            if (rewound := self.window.rewind(listed, entries, now)) is not None:
                # The walk starts at once: what it finds joins this read (no reconcile this time);
                # its own round-trip carries no ``then``, so it leaves no replies of them.
                room = limit - len(rewound)
                if room:
                    rewound = merge(rewound, await self.read_new(room, now=now, reconcile=False))
                return rewound
        budget = limit - len(entries)
        if reconcile and budget > 0 and self.window.reconcile_due(now, bool(entries)):
            cursor, pairs = await self.client.hscan(self.keys.hash, self.window.scan_cursor, count=limit)
            if scanned := self._fold_scan(cursor, pairs, budget, now):
                self.then_replies = []
                entries = merge(entries, scanned)
        if not entries and self.window.burned_ahead(limit):
            if listed is None and self.window.lists_cheaply(limit, size):
                listed = [_as_text(f) for f in await self.client.hkeys(self.keys.hash)]
            self._skip(limit, size, listed)
        return entries

    async def checkpoint(self) -> None:
        """Persist the low-water mark as the restart point."""
        await self.client.set(self.keys.cursor, self.window.low_water_mark)

    def _ack_command(self, names: list[str], fence: Fence | None) -> tuple[Any, ...]:
        """The HDEL of ``names`` (fenced: the script by its SHA, so the round-trip needs no
        SCRIPT EXISTS of its own; a server without it answers NOSCRIPT)."""
        if fence is None:
            return ("HDEL", self.keys.hash, *names)
        if self._fenced_hdel is None:
            self._fenced_hdel = self.client.register_script(FENCED_HDEL)
        keys, args = fenced_call([self.keys.hash], names, fence)
        return ("EVALSHA", self._fenced_hdel.sha, len(keys), *keys, *args)
