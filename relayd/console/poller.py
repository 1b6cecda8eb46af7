"""The one overview poller every open console page shares, never polling faster than its interval.

Pages subscribe to it (server-sent events); it runs only while at least one page listens, reads
each prefix once per interval, and hands every subscriber the same snapshot. A page that is hidden
closes its stream (``static/console.js``), so an idle browser tab costs Redis nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from relayd.console.groups import reason_counts
from relayd.console.rates import KindCounters, delivery_rates
from relayd.console.warnings import prefix_warnings
from relayd.envelope import KINDS, Kind
from relayd.state import RedisClient
from relayd.state.deadletters import scan_dead_letters
from relayd.status.prefix_hint import ScanMemo, prefix_hints
from relayd.status.report import StatusReport, collect_status
from store import Keyspace

#: Shortest time between two overview reads, in seconds (the console never polls faster).
MIN_INTERVAL_S: Final = 1.0
#: Dead letters of each kind read per poll for the per-reason counts (exact at or below it).
REASON_SAMPLE: Final = 500


@dataclass(frozen=True, slots=True)
class PrefixOverview:
    """One prefix at one instant, as the overview shows it."""

    report: StatusReport
    #: Dead letters per reason code, per kind; exact when ``reasons_exact``, else from a sample.
    reasons: dict[Kind, dict[str, int]]
    reasons_exact: bool
    #: Entries delivered per second since the previous reading (None: unknown).
    rates: dict[Kind, float | None] = field(default_factory=dict)
    counters: dict[Kind, KindCounters] = field(default_factory=dict)
    #: What an operator should look at now (``console.warnings``).
    warnings: tuple[str, ...] = ()


def trouble(overview: PrefixOverview) -> tuple[str, ...]:
    """What is wrong with a prefix, in a few words each, for the summary table (empty: healthy)."""
    report = overview.report
    found = list(overview.warnings)
    found += [
        f"sink {s.get('sink')} {str(s.get('state')).replace('_', '-')}"
        for s in report.sinks
        if s.get("state") != "closed"
    ]
    found += [f"paused: {p['scope']}" for p in report.paused]
    dead = sum(report.dead_letters.values())
    if dead:
        found.append(f"{dead} dead letters")
    return tuple(found)


def unhealthy_first(prefixes: list[PrefixOverview]) -> list[PrefixOverview]:
    """The prefixes with something wrong first, each group in the configured order."""
    return sorted(prefixes, key=lambda p: not trouble(p))


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: float
    prefixes: list[PrefixOverview]
    version: int


async def read_prefix(
    client: RedisClient, prefix: str, *, now: float, memo: ScanMemo | None = None
) -> PrefixOverview:
    """One prefix's status report, engine seq counters and a bounded reason sample; ``memo``
    keeps the empty-prefix hint's ``SCAN`` to one a minute (``relayd.status.prefix_hint``)."""
    keyspace = Keyspace(prefix)
    report = await collect_status(client, prefix, now=now)
    pipe = client.pipeline(transaction=False)
    pipe.get(keyspace.outbox_seq)
    pipe.get(keyspace.spawns_seq)
    outbox_seq, spawns_seq = await pipe.execute()
    reasons: dict[Kind, dict[str, int]] = {}
    exact = True
    for kind in KINDS:
        if report.dead_letters[kind] == 0:
            reasons[kind] = {}
            continue
        _, letters = await scan_dead_letters(client, keyspace, kind, 0, REASON_SAMPLE)
        reasons[kind] = reason_counts(letters)
        exact = exact and len(letters) >= report.dead_letters[kind]
    counters: dict[Kind, KindCounters] = {
        "outbox": KindCounters(int(outbox_seq or 0), report.backlog["outbox"], report.dead_letters["outbox"]),
        "spawn": KindCounters(int(spawns_seq or 0), report.backlog["spawn"], report.dead_letters["spawn"]),
        "timer": KindCounters(None, report.backlog["timer"], report.dead_letters["timer"]),
    }
    return PrefixOverview(
        report=report,
        reasons=reasons,
        reasons_exact=exact,
        counters=counters,
        warnings=(*prefix_warnings(report), *await prefix_hints(client, [prefix], memo=memo)),
    )


def _with_rates(previous: Snapshot | None, current: list[PrefixOverview], now: float) -> list[PrefixOverview]:
    if previous is None:
        return current
    before = {p.report.prefix: p for p in previous.prefixes}
    out = []
    for overview in current:
        old = before.get(overview.report.prefix)
        rates = {} if old is None else delivery_rates(old.counters, overview.counters, now - previous.at)
        out.append(dataclasses.replace(overview, rates=rates))
    return out


class OverviewPoller:
    """Reads every prefix at most once per ``interval_s`` and shares the snapshot."""

    def __init__(
        self,
        client: RedisClient,
        prefixes: Sequence[str],
        *,
        interval_s: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._prefixes = tuple(prefixes)
        self.interval_s = max(MIN_INTERVAL_S, interval_s)
        self._clock = clock
        self._monotonic = monotonic
        self._snapshot: Snapshot | None = None
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.scan_memo = ScanMemo(monotonic=monotonic)
        self.subscribers = 0
        self.reads = 0

    async def current(self) -> Snapshot:
        """The latest snapshot, read anew only when the last one is older than the interval."""
        async with self._lock:
            if self._snapshot is None or self._monotonic() - self._read_at >= self.interval_s:
                now = self._clock()
                prefixes = [
                    await read_prefix(self._client, p, now=now, memo=self.scan_memo) for p in self._prefixes
                ]
                version = 1 if self._snapshot is None else self._snapshot.version + 1
                self._snapshot = Snapshot(now, _with_rates(self._snapshot, prefixes, now), version)
                self._read_at = self._monotonic()
                self.reads += 1
                async with self._changed:
                    self._changed.notify_all()
            return self._snapshot

    def _changed_since(self, version: int) -> bool:
        return self._snapshot is not None and self._snapshot.version != version

    async def _run(self) -> None:
        while self.subscribers > 0:
            await self.current()
            await asyncio.sleep(max(0.0, self.interval_s - (self._monotonic() - self._read_at)))

    async def subscribe(self) -> AsyncGenerator[Snapshot, None]:
        """Yield every new snapshot while the caller listens; the loop runs while anyone does."""
        self.subscribers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        try:
            snapshot = await self.current()
            while True:
                yield snapshot
                seen = snapshot.version
                async with self._changed:
                    await self._changed.wait_for(functools.partial(self._changed_since, seen))
                snapshot = self._snapshot or snapshot
        finally:
            self.subscribers -= 1

    async def close(self) -> None:
        self.subscribers = 0
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
