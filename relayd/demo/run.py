"""``relayd demo``'s run: the real relay on an embedded Redis while a generated workload commits.

Three parts run side by side in one process:

- an embedded Redis: fakeredis's ``TcpFakeServer`` (Lua through lupa) on a free loopback port,
  served from a thread, so the relay talks to it over TCP exactly as it would to redis-server;
- a workload thread committing through ``store.RedisStore``: executions emitting events to one
  another (and now and then untargeted), spawning children, arming timers that come due within
  the run; it stops committing early enough that everything it armed is due before the end;
- ``run_relay`` (the same code path as ``relayd sweep``) delivering to a counting sink, with
  ``/metrics`` served and a live table of committed vs delivered per kind.

The demo stops by itself after ``duration_s`` and exits 0 only if every committed entry that
was due by the end was delivered, counted by unique delivery id (delivery is at-least-once).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import redis
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry
from rich.console import Console
from rich.live import Live
from rich.table import Table

from relayd.demo.embedded import EmbeddedRedis
from relayd.engine.loop import RunSummary, run_relay
from relayd.engine.options import SweepOptions
from relayd.envelope import KINDS, Kind
from relayd.envelope.batch import Batch
from relayd.observability.health import Health
from relayd.observability.heartbeat import heartbeat
from relayd.observability.http import serve_http
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Outcome
from store import Event, Execution, RedisStore, TimerOp

#: The key prefix the demo's engine writes under.
DEMO_PREFIX: Final = "demo"
#: Executions the workload creates up front (emit targets are picked among them).
EXECUTIONS: Final = 40
#: Share of the run during which the workload commits; the rest lets the relay drain.
WORKLOAD_SHARE: Final = 0.6
#: Pause between two workload commits, in seconds (about 250 commits per second at most).
COMMIT_PAUSE_S: Final = 0.004
#: Seconds between two refreshes of the live table.
REFRESH_S: Final = 0.25


class CountingSink:
    """A sink that records the unique delivery ids per kind (redeliveries are counted once)."""

    name = "demo-counter"

    def __init__(self) -> None:
        self.ids: dict[Kind, set[str]] = {kind: set() for kind in KINDS}
        self.deliveries = 0

    async def start(self) -> None:
        return None

    async def deliver(self, batch: Batch) -> Sequence[Outcome]:
        for envelope in batch:
            self.ids[envelope.kind].add(envelope.id)
        self.deliveries += len(batch)
        return [DELIVERED] * len(batch)

    def ready(self) -> bool:
        return True

    async def close(self) -> None:
        return None


@dataclass
class Committed:
    """What the workload committed, written by its thread and read by the display (a lock guards it)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outbox: int = 0
    spawn: int = 0
    timer_fire_ats: list[float] = field(default_factory=list)
    commits: int = 0

    def due(self, now: float) -> dict[Kind, int]:
        """Committed entries per kind that are due at ``now`` (timers only once their fire_at passed)."""
        with self.lock:
            timers = sum(1 for fire_at in self.timer_fire_ats if fire_at <= now)
            return {"spawn": self.spawn, "outbox": self.outbox, "timer": timers}


def run_workload(store: RedisStore, committed: Committed, *, until: float, rng: random.Random) -> None:
    """Commit emits, spawns and timers until ``until`` (epoch seconds); timers come due by then + 1 s."""
    executions = [Execution(id=f"order-{n}", definition_id="demo.order") for n in range(EXECUTIONS)]
    for exe in executions:
        store.save(exe)
    serial = 0
    while (now := time.time()) < until:
        serial += 1
        exe = rng.choice(executions)
        targets = rng.sample(executions, k=rng.randint(1, 3))
        emits: list[tuple[str | None, Event]] = [
            (t.id, Event(kind="ping", data={"from": exe.id, "n": serial})) for t in targets
        ]
        if rng.random() < 0.05:
            emits.append((None, Event(kind="broadcast", data={"n": serial})))
        spawns = []
        if rng.random() < 0.3:
            spawns.append((f"{exe.id}.child-{serial}", "fulfilment", {"order": exe.id, "n": serial}))
        timers = []
        if rng.random() < 0.5:
            fire_at = min(now + rng.uniform(0.1, 1.5), until + 1.0)
            timers.append(TimerOp(action="schedule", path=f"wait.{serial}", fire_at=fire_at))
        store.commit(exe, emits, timers=timers, spawns=spawns)
        with committed.lock:
            committed.outbox += len(emits)
            committed.spawn += len(spawns)
            committed.timer_fire_ats += [t.fire_at for t in timers]
            committed.commits += 1
        time.sleep(COMMIT_PAUSE_S)


def start_workload(client: redis.Redis, committed: Committed, *, until: float) -> threading.Thread:
    """Start ``run_workload`` on the demo prefix in a daemon thread (the store's client is synchronous)."""
    workload = threading.Thread(
        target=run_workload,
        args=(RedisStore(client, prefix=DEMO_PREFIX), committed),
        kwargs={"until": until, "rng": random.Random(7)},
        name="demo-workload",
        daemon=True,
    )
    workload.start()
    return workload


def start_relay(
    client: aioredis.Redis, sink: CountingSink, *, metrics: RelayMetrics, health: Health, stop: asyncio.Event
) -> asyncio.Task[RunSummary]:
    """Start ``run_relay`` on the demo prefix, every kind to ``sink``, until ``stop`` is set."""
    options = SweepOptions(prefixes=(DEMO_PREFIX,), batch=500, poll_interval_s=0.2, lease_ttl_s=2.0)
    sinks: dict[Kind, CountingSink] = dict.fromkeys(KINDS, sink)
    return asyncio.create_task(
        run_relay(options, redis=client, sinks=sinks, metrics=metrics, health=health, stop=stop)
    )


def progress_table(committed: dict[Kind, int], sink: CountingSink, *, title: str) -> Table:
    table = Table(title=title)
    for column in ("kind", "committed (due)", "delivered", "pending"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in KINDS:
        delivered = len(sink.ids[kind])
        table.add_row(kind, str(committed[kind]), str(delivered), str(max(0, committed[kind] - delivered)))
    return table


def run_demo(
    *, duration_s: float, host: str = "127.0.0.1", port: int = 0, console: Console | None = None
) -> int:
    """Run the whole demo; return 0 when every due committed entry was delivered, else 1."""
    out = console or Console()
    with EmbeddedRedis() as server:
        return asyncio.run(_run(duration_s=duration_s, redis_port=server.port, host=host, port=port, out=out))


async def _run(*, duration_s: float, redis_port: int, host: str, port: int, out: Console) -> int:
    started = time.time()
    end = started + duration_s
    workload_until = started + duration_s * WORKLOAD_SHARE
    sync_client = redis.Redis(host="127.0.0.1", port=redis_port)
    client = aioredis.Redis(host="127.0.0.1", port=redis_port)
    committed = Committed()
    sink = CountingSink()
    registry = CollectorRegistry()
    health = Health()
    http = serve_http(host, port, registry, health)
    out.print(f"relayd demo: embedded Redis on 127.0.0.1:{redis_port}, prefix {DEMO_PREFIX!r}")
    out.print(f"metrics: http://{host}:{http.port}/metrics  (also /healthz, /readyz)")
    stop = asyncio.Event()
    try:
        async with heartbeat(health):
            workload = start_workload(sync_client, committed, until=workload_until)
            relay = start_relay(client, sink, metrics=RelayMetrics(registry), health=health, stop=stop)
            with Live(console=out, refresh_per_second=4, transient=False) as live:
                while (now := time.time()) < end and not relay.done():
                    title = f"relayd demo ({end - now:4.1f}s left)"
                    live.update(progress_table(committed.due(now), sink, title=title))
                    await asyncio.sleep(REFRESH_S)
                stop.set()
                summary = await relay
                finished_at = time.time()
                live.update(progress_table(committed.due(finished_at), sink, title="relayd demo: finished"))
            workload.join(5)
    finally:
        stop.set()
        http.close()
        await client.aclose()
        sync_client.close()
    due = committed.due(finished_at)
    missing = {kind: due[kind] - len(sink.ids[kind]) for kind in KINDS if len(sink.ids[kind]) < due[kind]}
    every_kind = all(len(sink.ids[kind]) > 0 for kind in KINDS)
    out.print(summary_table(due, sink, commits=committed.commits, dead=dict(summary.dead_lettered)))
    if missing or not every_kind:
        out.print(f"[red]not everything due was delivered: missing {missing}[/red]")
        return 1
    out.print("[green]every committed entry that came due was delivered[/green]")
    return 0


def summary_table(due: dict[Kind, int], sink: CountingSink, *, commits: int, dead: dict[Kind, int]) -> Table:
    table = Table(title=f"relayd demo summary ({commits} commits, {sink.deliveries} deliveries)")
    for column in ("kind", "committed (due)", "delivered (unique)", "dead-lettered"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in KINDS:
        table.add_row(kind, str(due[kind]), str(len(sink.ids[kind])), str(dead.get(kind, 0)))
    return table
