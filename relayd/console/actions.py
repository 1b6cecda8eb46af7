"""Console actions: count what an action would change, replay at a bounded rate, purge, audit each.

Replays run as jobs in the console process: chunks of at most ``rate`` dead letters per second,
so a sink that just came back is not flooded. Every action that changed something is recorded
under ``P:relay:audit`` with its filter, its count and the equivalent ``relayd dlq`` command.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import structlog

from relayd.console.commands import purge_command, replay_command
from relayd.console.filters import DeadLetterFilter
from relayd.console.reads import dead_letter_totals
from relayd.state import RedisClient
from relayd.state.audit import AuditRecord, record_action
from relayd.state.deadletters import (
    decode_dead_letter,
    get_dead_letters,
    purge_dead_letters,
    replay,
)
from relayd.state.keys import RelayKeys
from store import Keyspace

log = structlog.get_logger(__name__)

#: Ids kept in an audit record (the count is always exact).
AUDIT_IDS: int = 100


async def matching_ids(
    client: RedisClient, keyspace: Keyspace, wanted: DeadLetterFilter, ids: Sequence[str] = ()
) -> AsyncIterator[str]:
    """Every parked id the action means: ``ids`` still parked, else those ``wanted`` matches."""
    if ids:
        for letter in await get_dead_letters(client, keyspace, list(ids), kind=wanted.kind):
            if wanted.matches(letter):
                yield letter.id
        return
    keys = RelayKeys(keyspace)
    for kind in wanted.kinds():
        async for field_, raw in client.hscan_iter(keys.dead(kind), count=500):
            if not wanted.narrows_within_kind or wanted.matches(decode_dead_letter(raw)):
                yield field_.decode() if isinstance(field_, bytes) else str(field_)


async def count_matching(
    client: RedisClient, keyspace: Keyspace, wanted: DeadLetterFilter, ids: Sequence[str] = ()
) -> int:
    """The dry-run count: how many dead letters the action would change right now."""
    if not ids and not wanted.narrows_within_kind:
        totals = await dead_letter_totals(client, keyspace)
        return sum(totals[k] for k in wanted.kinds())
    return sum([1 async for _ in matching_ids(client, keyspace, wanted, ids)])


@dataclass
class ReplayJob:
    """A replay in progress (or done), as the audit page shows it."""

    number: int
    prefix: str
    wanted: DeadLetterFilter
    planned: int
    started_at: float
    replayed: int = 0
    done: bool = False
    error: str | None = None
    ids: list[str] = field(default_factory=list)


class ActionRunner:
    """Runs replays and purges for one console, each recorded in the prefix's audit trail."""

    def __init__(
        self,
        client: RedisClient,
        *,
        rate_per_s: float,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._client = client
        self._sleep = sleep
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._monotonic = monotonic
        self.jobs: list[ReplayJob] = []
        self._numbers = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def start_replay(
        self, prefix: str, wanted: DeadLetterFilter, ids: Sequence[str], *, planned: int, source: str
    ) -> ReplayJob:
        job = ReplayJob(next(self._numbers), prefix, wanted, planned, self._clock(), ids=list(ids))
        self.jobs.insert(0, job)
        del self.jobs[50:]
        task = asyncio.create_task(self._replay(job, source))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _replay(self, job: ReplayJob, source: str) -> None:
        keyspace = Keyspace(job.prefix)
        chunk_size = max(1, int(self.rate_per_s))
        replayed_ids: list[str] = []
        try:
            chunk: list[str] = []
            async for id_ in matching_ids(self._client, keyspace, job.wanted, job.ids):
                chunk.append(id_)
                if len(chunk) >= chunk_size:
                    await self._replay_chunk(keyspace, job, chunk, replayed_ids)
                    chunk = []
            if chunk:
                await self._replay_chunk(keyspace, job, chunk, replayed_ids, pace=False)
        except Exception as exc:  # the job reports its failure on the audit page; the console goes on
            job.error = type(exc).__name__
            log.warning("console_replay_failed", prefix=job.prefix, error=type(exc).__name__)
        finally:
            job.done = True
            if job.replayed:
                record = AuditRecord(
                    at=self._clock(),
                    action="replay",
                    filter=job.wanted.as_record(),
                    count=job.replayed,
                    # A narrow filter has no CLI form: the command names the ids it replayed.
                    command=replay_command(
                        job.prefix,
                        job.wanted,
                        job.ids or (replayed_ids if job.wanted.narrows_within_kind else []),
                    ),
                    source=source,
                    ids=replayed_ids[:AUDIT_IDS],
                )
                await record_action(self._client, keyspace, record)
            log.info("console_replay_finished", prefix=job.prefix, count=job.replayed)

    async def _replay_chunk(
        self,
        keyspace: Keyspace,
        job: ReplayJob,
        chunk: list[str],
        replayed_ids: list[str],
        *,
        pace: bool = True,
    ) -> None:
        started = self._monotonic()
        done = await replay(self._client, keyspace, ids=chunk, kind=job.wanted.kind)
        job.replayed += done.count
        replayed_ids += [i for i in chunk if i in done.parked and i not in done.kept]
        if pace:
            # One chunk per second at most: the rate limit that keeps a sink from being flooded.
            await self._sleep(max(0.0, 1.0 - (self._monotonic() - started)))

    async def purge(self, prefix: str, wanted: DeadLetterFilter, *, source: str) -> int:
        """Delete the dead letters of ``wanted.kind`` (every kind when None) and record it."""
        keyspace = Keyspace(prefix)
        count = await purge_dead_letters(self._client, keyspace, kind=wanted.kind)
        record = AuditRecord(
            at=self._clock(),
            action="purge",
            filter=wanted.as_record(),
            count=count,
            command=purge_command(prefix, wanted),
            source=source,
        )
        await record_action(self._client, keyspace, record)
        log.info("console_purge_finished", prefix=prefix, count=count)
        return count

    async def wait_idle(self) -> None:
        """Wait for every running job (tests and shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
