"""A backlog in harel's own shape for the broker and cloud sink end-to-end tests, and an order check.

``commit_harel_backlog`` commits through harel 0.9's own ``RedisStore`` (the engine in the
wild): every execution emits outbox events to a few shared targets (and some untargeted),
spawns a child, and arms timers that are already due plus one in the future. It returns the
delivery ids (docs/internals.md#key-space) a relay must deliver now; ``assert_relayed`` and
``assert_backlog_empty`` are the checks every consumer side and the drained Redis must pass.
``order_violations`` reads envelopes in the
order a consumer received them and names every id that came before an earlier entry of its own
target (outbox: seq per ``target_id``; timers: fire_at per execution); the first receipt counts,
so a redelivered duplicate is not a violation.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from harel.engine.execution import Execution as HarelExecution
from harel.engine.store import RedisStore as HarelRedisStore
from harel.engine.store import TimerOp as HarelTimerOp
from harel.spec.states import Event as HarelEvent


@dataclass
class HarelBacklog:
    """What ``commit_harel_backlog`` committed that is due now."""

    prefix: str
    due: list[str] = field(default_factory=list)
    future_timers: int = 0

    def of_kind(self, kind: str) -> list[str]:
        marker = "timeout:" if kind == "timer" else f"{self.prefix}:{kind}:"
        return [entry for entry in self.due if entry.startswith(marker)]


def commit_harel_backlog(
    client: Any,
    prefix: str,
    *,
    executions: int = 30,
    emits: int = 5,
    targets: int = 6,
    now: float | None = None,
) -> HarelBacklog:
    """Commit ``executions`` steps through harel's store: ``emits`` events, a spawn, due timers."""
    store = HarelRedisStore(client, prefix=prefix)
    now = time.time() if now is None else now
    backlog = HarelBacklog(prefix)
    for n in range(executions):
        exe = HarelExecution(id=f"h-{n}", definition_id="flow")
        events = [
            (
                None if i == 0 else f"target-{(n + i) % targets}",
                HarelEvent(kind="Ping", data={"n": n, "i": i}),
            )
            for i in range(emits)
        ]
        due = [HarelTimerOp("schedule", f"wait/{i}", now - 100 + n + i / 10) for i in range(2)]
        timers = (*due, HarelTimerOp("schedule", "later", now + 3600))
        spawns = ((f"h-{n}.child", "root.fork", {"n": n}),)
        seqs = store.commit(exe, events, None, timers=timers, spawns=spawns)
        backlog.due += [f"{prefix}:outbox:{seq}" for seq in seqs]
        backlog.due += [f"timeout:{exe.id}:{t.path}:{float(t.fire_at)}" for t in due]
        backlog.future_timers += 1
    spawned = int(client.get(f"{prefix}:spawns:seq") or 0)
    backlog.due += [f"{prefix}:spawn:{seq}" for seq in range(1, spawned + 1)]
    return backlog


def order_violations(envelopes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Ids received before an earlier entry of their own target (first receipt counts)."""
    last: dict[str, float] = {}
    seen: set[str] = set()
    wrong: list[str] = []
    for envelope in envelopes:
        entry_id = str(envelope["id"])
        if entry_id in seen:
            continue
        seen.add(entry_id)
        if envelope["kind"] == "outbox" and envelope["target_id"] is not None:
            key, rank = f"outbox:{envelope['target_id']}", float(envelope["seq"])
        elif envelope["kind"] == "timer":
            key, rank = f"timer:{envelope['execution_id']}", float(envelope["fire_at"])
        else:
            continue
        if rank < last.get(key, float("-inf")):
            wrong.append(entry_id)
        last[key] = max(last.get(key, float("-inf")), rank)
    return wrong


def assert_relayed(prefix: str, backlog: HarelBacklog, bodies: list[bytes], dedupe_ids: list[str]) -> None:
    """Every due entry arrived once as its relayd/1 JSON, with its id in the broker's dedupe field."""
    envelopes = [orjson.loads(body) for body in bodies]
    assert all(e["v"] == "relayd/1" and e["prefix"] == prefix for e in envelopes)
    assert [e["id"] for e in envelopes] == dedupe_ids
    assert sorted(dedupe_ids) == sorted(backlog.due), "each due entry exactly once"


def assert_backlog_empty(client: Any, backlog: HarelBacklog) -> None:
    """Everything due was acked: the hashes are empty and only the future timers are left."""
    prefix = backlog.prefix
    assert client.hlen(f"{prefix}:outbox") == 0
    assert client.hlen(f"{prefix}:spawns") == 0
    assert client.zcard(f"{prefix}:timers") == backlog.future_timers
