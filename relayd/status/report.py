"""Report the state of each prefix for ``relayd status``: backlog, due timers, lag, dead letters,
lease, operator pauses.

``collect_status`` is the I/O shell (one pipelined round-trip per prefix plus the lease read);
``StatusReport`` and the renderers are pure. Nothing here ever carries a secret: the report
holds counts, times and the lease holder's token (``host/pid/random``) only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.table import Table

from relayd.envelope import KINDS, Kind
from relayd.state.keys import RelayKeys
from relayd.state.pauses import Pause
from store import Keyspace

#: The fields of the harel sink's handoff hash: who delivered (``relayd`` or ``harel``) per kind.
HANDOFF_FIELDS: tuple[str, ...] = tuple(f"{kind}:{by}" for kind in KINDS for by in ("harel", "relayd"))


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
    #: kind -> why, for each kind whose live key has the wrong type (it is not relayed)
    wrong_type: dict[Kind, str] = field(default_factory=dict)
    #: the harel sink's handoffs: "KIND:relayd" (picked up, harel had not) and "KIND:harel" -> n
    harel: dict[str, int] = field(default_factory=dict)
    #: What operators paused: each scope's selectors, ``since`` (epoch s), ``by``, ``reason``.
    paused: list[dict[str, Any]] = field(default_factory=list)
    #: Each sink's health as the lease holder last published it (``engine.sink_health``): ``sink``,
    #: ``kinds``, breaker ``state`` and ``since``, ``last_error``, ``retrying``, ``at``.
    sinks: list[dict[str, Any]] = field(default_factory=list)

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
    wrong_type: dict[Kind, str] | None = None,
    harel: dict[str, int] | None = None,
    paused: Sequence[Pause] = (),
    sinks: Sequence[dict[str, Any]] = (),
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
        wrong_type=dict(wrong_type or {}),
        harel=dict(harel or {}),
        paused=[
            {**p.selectors(), "scope": p.describe(), "since": p.at, "by": p.by, "reason": p.reason}
            for p in paused
        ],
        sinks=list(sinks),
    )


def _count(reply: object) -> int:
    """A pipelined count, 0 in place of an error (a key of the wrong type answers WRONGTYPE)."""
    return 0 if isinstance(reply, Exception) else int(reply)  # type: ignore[call-overload]


async def collect_status(client: Any, prefix: str, *, now: float) -> StatusReport:
    """Read one prefix's counts in one pipelined round-trip plus the lease."""
    from relayd.engine.key_types import describe, read_key_types, wrong_types
    from relayd.engine.sink_health import SINKS_SUFFIX, decode_sink_health
    from relayd.state.lease import read_lease
    from relayd.state.pauses import read_pauses

    keyspace = Keyspace(prefix)
    relay = RelayKeys(keyspace)
    wrong = {
        k: describe(keyspace, k, t) for k, t in wrong_types(await read_key_types(client, keyspace)).items()
    }
    pipe = client.pipeline(transaction=False)
    pipe.hlen(keyspace.outbox)
    pipe.hlen(keyspace.spawns)
    pipe.zcard(keyspace.timers)
    pipe.zcount(keyspace.timers, "-inf", now)
    pipe.zrangebyscore(keyspace.timers, "-inf", now, start=0, num=1, withscores=True)
    pipe.get(keyspace.relay(SINKS_SUFFIX))
    for kind in KINDS:
        pipe.hlen(relay.dead(kind))
    pipe.hmget(relay.harel(), HANDOFF_FIELDS)  # a fixed set of fields: no HGETALL, whatever the hash
    outbox, spawns, timers, due, oldest, sinks, *dead_counts, harel = await pipe.execute(raise_on_error=False)
    if isinstance(oldest, Exception):
        oldest = []
    lease = await read_lease(client, keyspace)
    active = None if lease is None else ActiveReplica(holder=lease.holder, ttl_s=lease.ttl_ms / 1000)
    return build_report(
        prefix,
        now=now,
        outbox=_count(outbox),
        spawns=_count(spawns),
        timers=_count(timers),
        due_timers=_count(due),
        oldest_due_fire_at=float(oldest[0][1]) if oldest else None,
        dead=dict(zip(KINDS, (_count(n) for n in dead_counts), strict=True)),
        active=active,
        wrong_type=wrong,
        harel=_handoffs(harel),
        paused=await read_pauses(client, keyspace),
        sinks=decode_sink_health(None if isinstance(sinks, Exception) else sinks),
    )


def _handoffs(reply: object) -> dict[str, int]:
    """The harel sink's counts, ``KIND:BY -> n``, from its hash's ``HMGET`` (nothing when unreadable)."""
    if not isinstance(reply, list):
        return {}
    counts = {}
    for name, value in zip(HANDOFF_FIELDS, reply, strict=True):
        try:
            counts[name] = int(value)
        except (TypeError, ValueError):  # missing (None) or not a count
            continue
    return counts


def render_table(reports: Sequence[StatusReport]) -> Table:
    """A rich table, one row per prefix."""
    table = Table(
        title="relayd status", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    for column in (
        "prefix",
        "spawns",
        "outbox",
        "timers",
        "due\ntimers",
        "oldest\nlag",
        "dead\nletters",
        "active",
        *(("harel\nhandoffs",) if any(r.harel for r in reports) else ()),
    ):
        # Fold, never an ellipsis: a prefix, a holder or a count is read or copied whole.
        table.add_column(
            column, justify="left" if column in ("prefix", "active") else "right", overflow="fold"
        )
    for r in reports:
        lag = "-" if r.oldest_timer_lag_s is None else f"{r.oldest_timer_lag_s:.1f}s"
        dead = "\n".join(f"{kind}={n}" for kind, n in r.dead_letters.items())
        active = "none" if r.active is None else f"{r.active.holder} (ttl {r.active.ttl_s:.1f}s)"
        table.add_row(
            r.prefix,
            *(_backlog_cell(r, kind) for kind in ("spawn", "outbox", "timer")),
            str(r.due_timers),
            lag,
            dead,
            active,
            *((_handoff_cell(r),) if any(report.harel for report in reports) else ()),
        )
    return table


def _handoff_cell(report: StatusReport) -> str:
    """``KIND: relayd=N harel=M`` per kind the harel sink saw: relayd picked N up, harel did M."""
    lines = []
    for kind in KINDS:
        relayd, harel = report.harel.get(f"{kind}:relayd", 0), report.harel.get(f"{kind}:harel", 0)
        if relayd or harel:
            lines.append(f"{kind}: relayd={relayd} harel={harel}")
    return "\n".join(lines) or "-"


def render_pauses(reports: Sequence[StatusReport]) -> Table | None:
    """A second table, one row per operator pause (None when nothing is paused)."""
    rows = [(r, p) for r in reports for p in r.paused]
    if not rows:
        return None
    table = Table(title="paused", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for column in ("prefix", "scope", "since", "by", "reason"):
        table.add_column(column, overflow="fold")
    for report, p in rows:
        age_s = max(0.0, report.at - p["since"])
        table.add_row(report.prefix, p["scope"], f"{_utc(p['since'])} ({age_s:.0f}s)", p["by"], p["reason"])
    return table


def _utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _backlog_cell(report: StatusReport, kind: Kind) -> str:
    if kind in report.wrong_type:
        return f"WRONGTYPE: {report.wrong_type[kind]}"
    return str(report.backlog[kind])


def render_sinks(reports: Sequence[StatusReport]) -> Table | None:
    """A table of each sink's breaker, its last error and its retries (None when none is known)."""
    rows = [(r, sink) for r in reports for sink in r.sinks]
    if not rows:
        return None
    table = Table(title="sinks", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for column in ("prefix", "sink", "kinds", "breaker", "since", "retrying", "last error"):
        table.add_column(column, overflow="fold", justify="right" if column == "retrying" else "left")
    # Unhealthy first: an open breaker is what an operator looks for.
    rows.sort(key=lambda row: (row[1].get("state") == "closed", row[0].prefix))
    for report, sink in rows:
        since = sink.get("since")
        when = (
            "-"
            if not isinstance(since, int | float)
            else f"{_utc(since)} ({max(0.0, report.at - since):.0f}s)"
        )
        table.add_row(
            report.prefix,
            str(sink.get("sink", "")),
            ",".join(str(k) for k in sink.get("kinds") or ()),
            str(sink.get("state", "")).replace("_", "-"),
            when,
            str(sink.get("retrying", 0)),
            str(sink.get("last_error") or "-"),
        )
    return table
