"""AsyncRedisStore: the asyncio execution store over an injected redis.asyncio-compatible client.

Every operation of the specification (``seeds/000``) with the relay's additions: bounded
reads, many acks per round-trip and an atomic timer compare-and-delete. The commands come
from ``store.plans``; this module only executes them.
"""

# unasync: async only, from here
# The sync twin, store/redis_store.py, is generated from this module by `python -m store._generate`
# (`make generate`): edit here and generate it again. A block like this one stays out of it.
# unasync: async only, to here

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

from store import codec, plans, purging, trace_context
from store._base import EvtT, ExeT, StoreCore
from store.backlog import RawEntry, RawTimer
from store.fence import Fence, fenced_call
from store.keys import timer_member
from store.protocols import SpawnIntent, TimerOpLike
from store.readers import AsyncBacklogReader, BacklogKind

if TYPE_CHECKING:
    # Annotations only: the relay uses this store's backlog and acks, which need no models.
    from store.models import ExecutionPage, OutboxEntry, SpawnEntry, Status


class AsyncRedisStore(StoreCore[ExeT, EvtT]):
    """A durable execution store in Redis (asyncio). See ``StoreCore`` for the constructor.

    ``AsyncRedisStore(client, prefix="stm", execution_model=Execution, event_model=Event,
    conflict_error=StoreConflict, trace_max=200)``: an engine hands in its own model classes
    and conflict error and gets its own types back.
    """

    _readers: dict[str, AsyncBacklogReader]

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        sentinel_username: str | None = None,
        sentinel_password: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """Build the store on a client for ``url``: ``redis[s]://`` or ``redis[s]+sentinel://``.

        A Sentinel URL gives a client of the master the sentinels name, which follows a
        failover (``store.clients``); ``sentinel_username``/``sentinel_password`` are the
        sentinels' own credentials. Other keywords go to the store's constructor.
        """
        from store.clients import async_client_from_url

        client = async_client_from_url(
            url, sentinel_username=sentinel_username, sentinel_password=sentinel_password
        )
        return cls(client, **kwargs)

    # --- executions -------------------------------------------------------------------------
    async def load(self, execution_id: str) -> ExeT | None:
        with self._io():
            return self._load_model(await self.client.get(self.keyspace.exe(execution_id)))

    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[ExeT | None, bool]:
        """Load and the dedupe check in one pipelined round-trip."""
        with self._io():
            pipe = self.client.pipeline(transaction=False)
            pipe.get(self.keyspace.exe(execution_id))
            pipe.sismember(self.keyspace.processed(execution_id), event_id)
            raw, hit = await pipe.execute()
        exe = self._load_model(raw)
        return exe, bool(hit) if exe is not None else False

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One SCAN step + MGET, filtered client-side; keep paging while ``next_cursor`` is set."""
        start, match, count = plans.scan_request(self.keyspace, limit, cursor)
        with self._io():
            next_cursor, keys = await self.client.scan(cursor=start, match=match, count=count)
            rows = await self.client.mget(keys) if keys else []
        return plans.listing_page(
            rows, int(next_cursor), status=status, definition_id=definition_id, roots_only=roots_only
        )

    async def save(self, exe: ExeT) -> None:
        await self.commit(exe, [])

    async def commit(  # noqa: PLR0917  # the specification's positional signature
        self,
        exe: ExeT,
        emits: Sequence[tuple[str | None, EvtT]],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOpLike] = (),
        spawns: Sequence[SpawnIntent] = (),
        trace: Mapping[str, Any] | None = None,
        step: object | None = None,
    ) -> list[int]:
        """Persist ``exe`` at ``version + 1`` with everything it enqueues, all or nothing.

        ``step`` (harel's commit description) is accepted and ignored. Returns the outbox
        seqs in ``emits`` order. Raises the conflict error, version rolled back, when the
        stored version is not ``exe.version``.
        """
        old = exe.version
        plan = plans.plan_commit(
            self.keyspace,
            exe.id,
            old,
            emits=emits,
            processed_event_id=processed_event_id,
            timers=timers,
            spawns=spawns,
            trace=trace,
            span_context=trace_context.active() if emits or spawns else None,
        )
        with self._io():
            if plan.fast:
                await self._commit_fast(exe, plan)
                return []
            return await self._commit_complex(exe, plan)

    async def _commit_fast(self, exe: ExeT, plan: plans.CommitPlan) -> None:
        old = exe.version
        exe.version = old + 1
        try:
            keys, args = plan.cas_args(exe.model_dump_json())
            await self._cas_script(keys=keys, args=args)
        except self._ResponseError as exc:
            exe.version = old
            conflict = self._fast_conflict(exc, exe.id, old)
            if conflict is None:
                raise
            raise conflict from None
        except BaseException:
            exe.version = old
            raise

    async def _commit_complex(self, exe: ExeT, plan: plans.CommitPlan) -> list[int]:
        alloc = self._allocation(plan)
        pipe = self.client.pipeline(transaction=False)
        for name, args in alloc.commands(self.keyspace, exe.id):
            getattr(pipe, name)(*args)
        replies = await pipe.execute()
        outbox_seqs, spawn_seqs, trace_index = alloc.split(replies)
        old = exe.version
        async with self.client.pipeline(transaction=True) as tx:
            try:
                await tx.watch(plan.exe_key)
                conflict, found = plans.version_conflict(await tx.get(plan.exe_key), old)
                if conflict:
                    await tx.unwatch()
                    raise self._conflict(exe.id, old, found)
                exe.version = old + 1
                tx.multi()
                writes = plan.writes(
                    self.keyspace,
                    exe_json=exe.model_dump_json(),
                    outbox_seqs=outbox_seqs,
                    spawn_seqs=spawn_seqs,
                    trace_index=trace_index,
                    trace_max=self.trace_max,
                    execution_id=exe.id,
                    committed_at=alloc.committed_at(replies),
                )
                for name, args in writes:
                    getattr(tx, name)(*args)
                await tx.execute()
            except self._WatchError:
                exe.version = old  # a concurrent writer won between WATCH and EXEC
                raise self._conflict(exe.id, old, None) from None
            except BaseException:
                exe.version = old
                raise
        return outbox_seqs

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        with self._io():
            return bool(await self.client.sismember(self.keyspace.processed(execution_id), event_id))

    # --- trace ------------------------------------------------------------------------------
    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The kept trace steps, oldest first (each with its stable ``index``)."""
        with self._io():
            rows = await self.client.lrange(self.keyspace.trace(execution_id), 0, -1)
        return [codec.decode_trace_step(r) for r in rows]

    async def append_trace(self, execution_id: str, entry: Mapping[str, Any]) -> None:
        with self._io():
            index = int(await self.client.incr(self.keyspace.trace_seq(execution_id))) - 1
            step = codec.encode_trace_step(entry, index)
            pipe = self.client.pipeline(transaction=False)
            for name, args in plans.trace_commands(self.keyspace, execution_id, step, self.trace_max):
                getattr(pipe, name)(*args)
            await pipe.execute()

    # --- outbox and spawns ------------------------------------------------------------------
    def backlog(
        self, kind: Literal["outbox", "spawns"], *, grace_s: float = 30.0, reconcile_interval_s: float = 1.0
    ) -> AsyncBacklogReader:
        """A new bounded, gap-tolerant reader of one hash (call ``start()`` first)."""
        return AsyncBacklogReader(
            self.client, self.keyspace, kind, grace_s=grace_s, reconcile_interval_s=reconcile_interval_s
        )

    async def _pending_raw(self, kind: BacklogKind, limit: int) -> list[tuple[str, bytes]]:
        """The first ``limit`` pending entries of a hash via the store's own reader, O(limit)."""
        reader = self._readers.get(kind)
        if reader is None:
            reader = self._readers[kind] = self.backlog(kind)
            await reader.start()
        held = sorted(reader.window.open)
        values = await self.client.hmget(reader.keys.hash, held) if held else []
        present = [(f, v) for f, v in zip(held, values, strict=True) if v is not None]
        reader.resolve(f for f, v in zip(held, values, strict=True) if v is None)
        fresh: list[RawEntry] = []
        while (wanted := limit - len(present) - len(fresh)) > 0:
            got = await reader.read_new(wanted, now=self.clock())
            fresh += got
            if reader.window.caught_up and len(got) < wanted:
                break  # the frontier reached the counter: nothing more to find now
        return [*present, *((e.field, e.value) for e in fresh)]

    async def pending_outbox(self, limit: int | None = None) -> list[OutboxEntry[EvtT]]:
        """Undelivered outbox entries, oldest first: all of them (HGETALL) or the first ``limit``."""
        with self._io():
            if limit is None:
                rows = await self.client.hgetall(self.keyspace.outbox)
                return self._outbox(rows.items())
            return self._outbox(await self._pending_raw("outbox", limit))[:limit]

    async def pending_spawns(self, limit: int | None = None) -> list[SpawnEntry]:
        """Undelivered spawn intents, oldest first: all of them or the first ``limit``."""
        with self._io():
            if limit is None:
                rows = await self.client.hgetall(self.keyspace.spawns)
                return self._spawns(rows.items())
            return self._spawns(await self._pending_raw("spawns", limit))[:limit]

    async def _ack(self, kind: BacklogKind, fields: Iterable[str | int], fence: Fence | None = None) -> int:
        names = plans.ack_fields(fields)
        if not names:
            return 0
        key = self._hash_key(kind)
        with self._io(fence):
            if fence is None:
                removed = int(await self.client.hdel(key, *names))
            else:
                fenced = await self._fenced_hdel_script(*fenced_call([key], names, fence))
                removed = int(fenced)
        self._forget(kind, names)
        return removed

    async def ack_outbox(self, seq: int) -> None:
        await self._ack("outbox", [seq])

    async def ack_spawn(self, seq: int) -> None:
        await self._ack("spawns", [seq])

    async def ack_outbox_many(self, fields: Iterable[str | int], *, fence: Fence | None = None) -> int:
        """HDEL many outbox fields in one round-trip; returns how many existed.

        With ``fence``, one script call that deletes only while the fence holds (else raises
        ``StoreFenced`` and deletes nothing).
        """
        return await self._ack("outbox", fields, fence)

    async def ack_spawns_many(self, fields: Iterable[str | int], *, fence: Fence | None = None) -> int:
        """HDEL many spawn fields in one round-trip; returns how many existed.

        With ``fence``, one script call that deletes only while the fence holds (else raises
        ``StoreFenced`` and deletes nothing).
        """
        return await self._ack("spawns", fields, fence)

    # --- timers -----------------------------------------------------------------------------
    async def due_timers(self, now: float, limit: int | None = None) -> list[tuple[str, str, float]]:
        """``(execution_id, path, fire_at)`` with fire_at <= now, in fire_at order."""
        with self._io():
            rows = await self.client.zrangebyscore(
                self.keyspace.timers, "-inf", now, **self._zrange_args(now, limit)
            )
        return self._timers(rows)

    async def due_timer_entries(
        self, now: float, limit: int, *, skip: Collection[bytes] = ()
    ) -> list[RawTimer]:
        """Due timers exactly as stored, minus ``skip``, at most ``limit``, in fire_at order."""
        if limit <= 0:
            return []
        with self._io():
            rows = await self.client.zrangebyscore(
                self.keyspace.timers, "-inf", now, start=0, num=limit + len(skip), withscores=True
            )
        return self._raw_timers(rows, limit, skip)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        """Remove the timer only if it still fires at ``fire_at`` (one atomic Lua call)."""
        return await self.delete_timers_many([(timer_member(execution_id, path), fire_at)]) == 1

    async def delete_timers_many(
        self, timers: Iterable[tuple[bytes | str, float]], *, fence: Fence | None = None
    ) -> int:
        """Compare-and-delete many timers in one Lua call; returns how many were removed.

        With ``fence``, the same call deletes only while the fence holds (else raises
        ``StoreFenced`` and deletes nothing).
        """
        args = plans.timer_delete_args(timers)
        if not args:
            return 0
        keys, argv = self._timer_delete_call(self.keyspace.timers, args, fence)
        with self._io(fence):
            return int(await self._timer_delete_script(keys=keys, args=argv))

    # --- purging (harel's control plane) --------------------------------------------------------
    async def ids_with_prefix(self, prefix: str) -> list[str]:
        """Ids of every stored execution whose id starts with ``prefix``, in no order (SCAN)."""
        match = purging.ids_match(self.keyspace, prefix)
        with self._io():
            keys = [k async for k in self.client.scan_iter(match=match, count=purging.PAGE)]
        return purging.ids_from_keys(self.keyspace, keys)

    async def purge(self, execution_id: str, expected_version: int) -> bool:
        """Delete the execution and everything keyed by it iff it is at ``expected_version``.

        Returns True when an execution was deleted. Returns False, touching nothing, when it
        moved on or a concurrent writer changed it before the deletion (the caller re-checks).
        With no execution stored, its leftover rows are still removed and False is returned.
        The shared hashes and the timer zset are paged (``store.purging``), all under WATCH of
        ``exe:{id}``, so no command walks a whole backlog; the deletion is one MULTI/EXEC.
        """
        exe_key = self.keyspace.exe(execution_id)
        owner = purging.Owner(execution_id)
        with self._io():
            async with self.client.pipeline(transaction=True) as tx:
                try:
                    await tx.watch(exe_key)
                    current = await tx.get(exe_key)
                    if purging.moved_on(current, expected_version):
                        await tx.unwatch()
                        return False
                    doomed = purging.Doomed(
                        outbox=await self._scan_hash(tx, self.keyspace.outbox, owner.outbox_fields),
                        spawns=await self._scan_hash(tx, self.keyspace.spawns, owner.spawn_fields),
                        timers=await self._scan_timers(tx, owner),
                    )
                    tx.multi()
                    for name, args in doomed.commands(self.keyspace, execution_id):
                        getattr(tx, name)(*args)
                    await tx.execute()
                except self._WatchError:
                    return False  # a concurrent writer changed the execution: nothing was deleted
        self._forget("outbox", purging.field_names(doomed.outbox))
        self._forget("spawns", purging.field_names(doomed.spawns))
        return current is not None

    @staticmethod
    async def _scan_hash(
        tx: Any, key: str, keep: Callable[[dict[purging.Raw, purging.Raw]], list[purging.Raw]]
    ) -> list[purging.Raw]:
        kept: list[purging.Raw] = []
        cursor = 0
        while True:
            cursor, page = await tx.hscan(key, cursor, count=purging.PAGE)
            kept += keep(page)
            if not int(cursor):
                return kept

    async def _scan_timers(self, tx: Any, owner: purging.Owner) -> list[purging.Raw]:
        kept: list[purging.Raw] = []
        cursor = 0
        while True:
            cursor, page = await tx.zscan(
                self.keyspace.timers, cursor, match=owner.timer_match, count=purging.PAGE
            )
            kept += owner.timer_members(page)
            if not int(cursor):
                return kept

    # unasync: async only, from here
    async def aclose(self) -> None:
        """The same as ``close``, under asyncio's name for it."""
        await self.client.aclose()

    # unasync: async only, to here
    async def close(self) -> None:
        """Close the client's connections (harel's stores close with ``close``)."""
        await self.client.aclose()
