"""A backlog committed by harel's own RedisStore for the broker end-to-end tests, and the checks
every broker's consumer side must pass (each envelope once, its id, per-target order)."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis
from harel.engine.execution import Execution as HarelExecution
from harel.engine.store import RedisStore as HarelRedisStore
from harel.engine.store import TimerOp as HarelTimerOp
from harel.spec.states import Event as HarelEvent


@dataclass
class HarelBacklog:
    """The delivery ids (DESIGN §3) a relay must deliver now, and the timers it must leave."""

    prefix: str
    due_ids: set[str] = field(default_factory=set)
    future_timers: int = 0


def commit_harel_backlog(
    client: redis.Redis, prefix: str, *, executions: int = 40, seed: int = 5, now: float | None = None
) -> HarelBacklog:
    """Commit through harel's RedisStore: events to many targets (some untargeted), a spawn per
    commit, timers already due and timers an hour ahead."""
    rng = random.Random(seed)
    now = time.time() if now is None else now
    store = HarelRedisStore(client, prefix=prefix)
    backlog = HarelBacklog(prefix)
    targets = [f"h-{n}" for n in range(executions)]
    for n in range(executions):
        exe = HarelExecution(id=f"h-{n}", definition_id="e2e.flow")
        events = [
            (
                None if rng.random() < 0.1 else rng.choice(targets),
                HarelEvent(kind="Ping", data={"n": n, "i": i}),
            )
            for i in range(12)
        ]
        timers = [HarelTimerOp("schedule", f"wait-{i}", now - 100 + n + i / 10) for i in range(3)]
        timers.append(HarelTimerOp("schedule", "later", now + 3600))
        spawns = ((f"h-{n}-c", "root/region", {"n": n}),)
        seqs = store.commit(exe, events, None, timers=tuple(timers), spawns=spawns)
        backlog.due_ids |= {f"{prefix}:outbox:{seq}" for seq in seqs}
        backlog.due_ids |= {f"timeout:{exe.id}:{t.path}:{float(t.fire_at)}" for t in timers[:-1]}
        backlog.future_timers += 1
    spawn_count = int(client.get(f"{prefix}:spawns:seq") or 0)
    backlog.due_ids |= {f"{prefix}:spawn:{seq}" for seq in range(1, spawn_count + 1)}
    return backlog


def out_of_order(envelopes: Iterable[dict[str, Any]]) -> list[str]:
    """Ids consumed before an earlier entry of their own target (outbox by seq, timers by fire_at).

    ``envelopes`` is one ordered stream of the consumer side (a partition, a subject).
    """
    last: dict[str, float] = defaultdict(lambda: float("-inf"))
    wrong = []
    for envelope in envelopes:
        if envelope["kind"] == "outbox" and envelope["target_id"] is not None:
            key, rank = f"outbox:{envelope['target_id']}", float(envelope["seq"])
        elif envelope["kind"] == "timer":
            key, rank = f"timer:{envelope['execution_id']}", float(envelope["fire_at"])
        else:
            continue
        if rank < last[key]:
            wrong.append(str(envelope["id"]))
        last[key] = max(last[key], rank)
    return wrong


def assert_relayed(prefix: str, backlog: HarelBacklog, bodies: list[bytes], header_ids: list[str]) -> None:
    """Every due entry arrived once as its relayd/1 JSON, with its id in the broker's dedupe field."""
    envelopes = [orjson.loads(body) for body in bodies]
    assert all(e["v"] == "relayd/1" and e["prefix"] == prefix for e in envelopes)
    assert [e["id"] for e in envelopes] == header_ids
    assert sorted(header_ids) == sorted(backlog.due_ids), "each due entry exactly once"


def assert_backlog_empty(client: redis.Redis, backlog: HarelBacklog) -> None:
    prefix = backlog.prefix
    assert client.hlen(f"{prefix}:outbox") == 0
    assert client.hlen(f"{prefix}:spawns") == 0
    assert client.zcard(f"{prefix}:timers") == backlog.future_timers  # only the ones not due
