"""Pure: every request → the exact keys, commands and script arguments both stores run.

``RedisStore`` and ``AsyncRedisStore`` only execute what these functions return, so the sync
and async twins cannot drift. Nothing here touches Redis or the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from store import codec
from store.keys import Keyspace, timer_member
from store.protocols import JsonModel, SpawnIntent, TimerOpLike
from store.scripts import CONFLICT_TAG

if TYPE_CHECKING:
    from store.models import ExecutionPage, ExecutionSummary, Status

#: One Redis command for a pipeline: the redis-py method name and its positional arguments.
Command = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Allocation:
    """What to INCRBY before a complex commit (INCR cannot answer from inside MULTI)."""

    outbox: int
    spawns: int
    trace: bool
    #: Also read the server's ``TIME``, the commit time stamped on the outbox and spawn values.
    clock: bool = False

    def commands(self, ks: Keyspace, execution_id: str) -> list[Command]:
        out: list[Command] = []
        if self.outbox:
            out.append(("incrby", (ks.outbox_seq, self.outbox)))
        if self.spawns:
            out.append(("incrby", (ks.spawns_seq, self.spawns)))
        if self.trace:
            out.append(("incr", (ks.trace_seq(execution_id),)))
        if self.clock:
            out.append(("time", ()))
        return out

    def committed_at(self, replies: Sequence[Any]) -> float | None:
        """The server's time from the replies of ``commands`` (epoch seconds), when it was asked."""
        if not self.clock:
            return None
        seconds, micros = replies[-1]
        return int(seconds) + int(micros) / 1_000_000

    def split(self, replies: Sequence[Any]) -> tuple[list[int], list[int], int | None]:
        """Replies of ``commands`` → (outbox seqs, spawn seqs, 0-based trace index)."""
        it = iter(replies)
        outbox = _range_ending(int(next(it)), self.outbox) if self.outbox else []
        spawns = _range_ending(int(next(it)), self.spawns) if self.spawns else []
        trace = int(next(it)) - 1 if self.trace else None
        return outbox, spawns, trace


def _range_ending(last: int, count: int) -> list[int]:
    return list(range(last - count + 1, last + 1))


@dataclass(frozen=True, slots=True)
class CommitPlan:
    """A commit, encoded before any seq is spent: a bad value fails without side effects."""

    exe_key: str
    processed_key: str
    old_version: int
    outbox_values: list[bytes]
    spawn_values: list[bytes]
    timer_commands: list[Command]
    processed_event_id: str | None
    trace: Mapping[str, Any] | None

    @property
    def fast(self) -> bool:
        """A state-only commit takes the one-call Lua compare-and-set."""
        return not (self.outbox_values or self.spawn_values or self.timer_commands) and self.trace is None

    @property
    def allocation(self) -> Allocation:
        return Allocation(len(self.outbox_values), len(self.spawn_values), self.trace is not None)

    def cas_args(self, exe_json: str) -> tuple[list[str], list[str | int]]:
        """KEYS and ARGV of the fast-path script."""
        return [self.exe_key, self.processed_key], [exe_json, self.old_version, self.processed_event_id or ""]

    def writes(
        self,
        ks: Keyspace,
        *,
        exe_json: str,
        outbox_seqs: Sequence[int],
        spawn_seqs: Sequence[int],
        trace_index: int | None,
        trace_max: int,
        execution_id: str,
        committed_at: float | None = None,
    ) -> list[Command]:
        """Everything the MULTI block queues, in the order harel queues it; with ``committed_at``
        each outbox and spawn value carries it (``codec.stamp_commit_time``)."""
        outbox_values, spawn_values = self.outbox_values, self.spawn_values
        if committed_at is not None:
            outbox_values = [codec.stamp_commit_time(v, committed_at) for v in outbox_values]
            spawn_values = [codec.stamp_commit_time(v, committed_at) for v in spawn_values]
        cmds: list[Command] = [("set", (self.exe_key, exe_json))]
        cmds += [("hset", (ks.outbox, str(s), v)) for s, v in zip(outbox_seqs, outbox_values, strict=True)]
        if self.processed_event_id is not None:
            cmds.append(("sadd", (self.processed_key, self.processed_event_id)))
        cmds += [("hset", (ks.spawns, str(s), v)) for s, v in zip(spawn_seqs, spawn_values, strict=True)]
        cmds += self.timer_commands
        if self.trace is not None and trace_index is not None:
            cmds += trace_commands(
                ks, execution_id, codec.encode_trace_step(self.trace, trace_index), trace_max
            )
        return cmds


def plan_commit(
    ks: Keyspace,
    execution_id: str,
    old_version: int,
    *,
    emits: Sequence[tuple[str | None, JsonModel]],
    processed_event_id: str | None,
    timers: Sequence[TimerOpLike],
    spawns: Sequence[SpawnIntent],
    trace: Mapping[str, Any] | None,
    span_context: Mapping[str, str] | None = None,
) -> CommitPlan:
    """Encode a commit. Raises (before anything is written) when a value cannot be encoded.

    Each outbox and spawn value carries ``span_context``, the W3C trace context active at the
    commit (``store.trace_context.active``), when there is one.
    """
    timer_cmds: list[Command] = []
    for op in timers:
        member = timer_member(execution_id, op.path)
        if op.action == "schedule":
            timer_cmds.append(("zadd", (ks.timers, {member: float(op.fire_at)})))
        elif op.action == "cancel":
            timer_cmds.append(("zrem", (ks.timers, member)))
        else:
            raise ValueError(f"unknown timer action {op.action!r}")
    return CommitPlan(
        exe_key=ks.exe(execution_id),
        processed_key=ks.processed(execution_id),
        old_version=old_version,
        outbox_values=[codec.encode_outbox_value(t, e, span_context) for t, e in emits],
        spawn_values=[codec.encode_spawn_value(execution_id, c, r, x, span_context) for c, r, x in spawns],
        timer_commands=timer_cmds,
        processed_event_id=processed_event_id,
        trace=trace,
    )


def version_conflict(current: bytes | str | None, old_version: int) -> tuple[bool, int | None]:
    """(conflict?, stored version): a fresh insert needs no row and version 0, else equal versions."""
    if current is None:
        return old_version != 0, None
    found = codec.stored_version(current)
    return found != old_version, found


def conflict_version(message: str) -> tuple[bool, int | None]:
    """Parse a fast-path error reply: (is it our conflict tag?, the stored version it names)."""
    if CONFLICT_TAG not in message:
        return False, None
    tail = message.split(CONFLICT_TAG, 1)[1].strip()
    return True, int(tail) if tail.lstrip("-").isdigit() else None


def trace_commands(ks: Keyspace, execution_id: str, step_json: bytes, trace_max: int) -> list[Command]:
    """RPUSH the step, then LTRIM to the last ``trace_max`` (0 = unbounded): the ring."""
    key = ks.trace(execution_id)
    cmds: list[Command] = [("rpush", (key, step_json))]
    if trace_max:
        cmds.append(("ltrim", (key, -trace_max, -1)))
    return cmds


def timer_delete_args(timers: Iterable[tuple[bytes | str, float]]) -> list[bytes | str | float]:
    """ARGV for the compare-and-delete script: member, fire_at, member, fire_at, ...

    A float goes on the wire as its ``repr`` (redis-py's encoder and hiredis's packer alike),
    the shortest decimal that reads back as the same double, so Lua compares exactly.
    """
    args: list[bytes | str | float] = []
    for member, fire_at in timers:
        args += (member, float(fire_at))
    return args


def ack_fields(fields: Iterable[str | int]) -> list[str]:
    """Hash fields to HDEL for acked seqs, de-duplicated in order."""
    return list(dict.fromkeys(map(str, fields)))


def scan_request(ks: Keyspace, limit: int, cursor: str | None) -> tuple[int, str, int]:
    """(SCAN cursor, MATCH pattern, COUNT) for one listing page (``cursor`` is opaque)."""
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        start = 0
    return start, f"{glob_escape(ks.prefix)}:exe:*", max(limit, 20)


def glob_escape(text: str) -> str:
    """``text`` as a literal inside a SCAN / HSCAN / ZSCAN MATCH glob."""
    # a hash-tag prefix such as "{stm}" must match literally inside a SCAN MATCH glob
    return "".join("\\" + c if c in "\\*?[]" else c for c in text)


def listing_page(
    rows: Iterable[bytes | str | None],
    next_cursor: int,
    *,
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
) -> ExecutionPage:
    """Filter one SCAN batch client-side; order within the page by id (SCAN has no order)."""
    from store.models import ExecutionPage, Status  # on first use: see store.codec

    wanted = {Status(s) for s in status} if status is not None else None
    items: list[ExecutionSummary] = []
    for raw in rows:
        summary = codec.decode_summary(raw) if raw else None
        if summary is None:
            continue  # vanished between SCAN and MGET, or not an execution: a monitor skips it
        if wanted is not None and summary.status not in wanted:
            continue
        if definition_id is not None and summary.definition_id != definition_id:
            continue
        if roots_only and summary.parent_id is not None:
            continue
        items.append(summary)
    items.sort(key=lambda s: s.id)
    return ExecutionPage(items=items, next_cursor=str(next_cursor) if int(next_cursor) else None)
