"""Report the state of each prefix for ``relayd status``: backlog, due timers, lag, dead letters, lease.

``collect_status`` is the I/O shell (one pipelined round-trip per prefix plus the lease read);
``StatusReport`` and the renderers are pure. Nothing here ever carries a secret: the report
holds counts, times and the lease holder's token (``host/pid/random``) only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

from relayd.envelope import KINDS, Kind
from relayd.state.keys import RelayKeys
from store import Keyspace


@dataclass(frozen=True, slots=True)
class ActiveReplica:
    """Who holds a prefix's lease and for how much longer."""

    holder: str
    ttl_s: float


@dataclass(frozen=True, slots=True)
class StatusReport:
    """One prefix at one instant (``at``, epoch seconds)."""

    prefix: str
    at: float
    #: outbox and spawn: entries pending; timer: every armed timer (due or not).
    backlog: dict[Kind, int]
    due_timers: int
    #: now minus the smallest due fire_at; None when no timer is due.
    oldest_timer_lag_s: float | None
    dead_letters: dict[Kind, int]
    active: ActiveReplica | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def build_report(
    prefix: str,
    *,
    now: float,
    outbox: int,
    spawns: int,
    timers: int,
    due_timers: int,
    oldest_due_fire_at: float | None,
    dead: dict[Kind, int],
    active: ActiveReplica | None,
) -> StatusReport:
    """Assemble a report from raw counts (pure)."""
    lag = None if oldest_due_fire_at is None or due_timers == 0 else max(0.0, now - oldest_due_fire_at)
    return StatusReport(
        prefix=prefix,
        at=now,
        backlog={"spawn": spawns, "outbox": outbox, "timer": timers},
        due_timers=due_timers,
        oldest_timer_lag_s=lag,
        dead_letters={kind: dead.get(kind, 0) for kind in KINDS},
        active=active,
    )


async def collect_status(client: Any, prefix: str, *, now: float) -> StatusReport:
    """Read one prefix's counts in one pipelined round-trip plus the lease."""
    from relayd.state.lease import read_lease

    keyspace = Keyspace(prefix)
    relay = RelayKeys(keyspace)
    pipe = client.pipeline(transaction=False)
    pipe.hlen(keyspace.outbox)
    pipe.hlen(keyspace.spawns)
    pipe.zcard(keyspace.timers)
    pipe.zcount(keyspace.timers, "-inf", now)
    pipe.zrangebyscore(keyspace.timers, "-inf", now, start=0, num=1, withscores=True)
    for kind in KINDS:
        pipe.hlen(relay.dead(kind))
    outbox, spawns, timers, due, oldest, *dead_counts = await pipe.execute()
    lease = await read_lease(client, keyspace)
    active = None if lease is None else ActiveReplica(holder=lease.holder, ttl_s=lease.ttl_ms / 1000)
    return build_report(
        prefix,
        now=now,
        outbox=int(outbox),
        spawns=int(spawns),
        timers=int(timers),
        due_timers=int(due),
        oldest_due_fire_at=float(oldest[0][1]) if oldest else None,
        dead=dict(zip(KINDS, (int(n) for n in dead_counts), strict=True)),
        active=active,
    )


def render_table(reports: Sequence[StatusReport]) -> Table:
    """A rich table, one row per prefix."""
    table = Table(title="relayd status")
    for column in (
        "prefix",
        "spawns",
        "outbox",
        "timers",
        "due timers",
        "oldest lag",
        "dead letters",
        "active",
    ):
        table.add_column(column, justify="left" if column in ("prefix", "active") else "right")
    for r in reports:
        lag = "-" if r.oldest_timer_lag_s is None else f"{r.oldest_timer_lag_s:.1f}s"
        dead = " ".join(f"{kind}={n}" for kind, n in r.dead_letters.items())
        active = "none" if r.active is None else f"{r.active.holder} (ttl {r.active.ttl_s:.1f}s)"
        table.add_row(
            r.prefix,
            str(r.backlog["spawn"]),
            str(r.backlog["outbox"]),
            str(r.backlog["timer"]),
            str(r.due_timers),
            lag,
            dead,
            active,
        )
    return table
