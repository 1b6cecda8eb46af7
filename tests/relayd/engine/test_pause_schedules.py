"""Pauses in random schedules of the pass: whatever is paused, resumed, committed or failed in
between, once everything is resumed every entry is delivered, in per-target order, and nothing
is dead-lettered or charged an attempt by a pause.

Each seed is one schedule over a fake clock: commits to a few targets, pauses and resumes of a
kind, a target or the whole prefix, passes, and a sink that fails now and then (retries with
backoff); while a scope is paused, no entry of it reaches the sink.
"""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry

from relayd.engine.options import SweepOptions
from relayd.engine.sweeper import Sweeper
from relayd.observability.metrics import RelayMetrics
from relayd.sinks.base import DELIVERED, Retry
from relayd.sinks.memory import MemorySink
from relayd.state.keys import RelayKeys
from relayd.state.pauses import Pause, pause, read_pauses, resume
from store import AsyncRedisStore, Keyspace

TARGETS = ("a", "b", "c")
SCOPES = (Pause(kind="outbox"), Pause(kind="spawn"), Pause(target="a"), Pause(target="b"), Pause())


def _matches(scope: Pause, kind: str, key: str | None) -> bool:
    return (scope.kind is None or scope.kind == kind) and (scope.target is None or scope.target == key)


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("seed", range(12))
async def test_a_pause_in_any_schedule_never_loses_reorders_or_dead_letters(
    async_client, prefix, seeder, clock, seed: int
) -> None:
    rng = random.Random(seed)
    keyspace = Keyspace(prefix)
    failing = {"on": False}
    violations: list[str] = []
    paused: list[Pause] = []

    def script(envelope):
        key = envelope.ordering_key
        # The sink must never see an entry of a scope paused before this pass read the pauses.
        for scope in seen_paused:
            if _matches(scope, envelope.kind, key):
                violations.append(f"{envelope.id} sent while {scope.describe()} was paused")
        return Retry(error="down") if failing["on"] and rng.random() < 0.5 else DELIVERED

    seen_paused: list[Pause] = []
    sink = MemorySink(script)
    sweeper = Sweeper(
        AsyncRedisStore(async_client, prefix=prefix),
        sinks={"outbox": sink, "spawn": sink, "timer": sink},
        options=SweepOptions(
            prefixes=(prefix,), batch=7, backoff_base_s=0.5, backoff_cap_s=2.0, max_attempts=1000
        ),
        metrics=RelayMetrics(CollectorRegistry()),
        clock=clock,
        rng=random.Random(seed),
    )
    await sweeper.start()
    committed: dict[str, list[str]] = {t: [] for t in TARGETS}

    for step in range(60):
        action = rng.choice(("commit", "commit", "pass", "pass", "pause", "resume", "fail"))
        if action == "commit":
            target = rng.choice(TARGETS)
            event_id = f"{target}-{step}"
            if rng.random() < 0.2:
                await seeder.spawn("parent", target)
            else:
                await seeder.outbox(target, event_id)
                committed[target].append(event_id)
        elif action == "pause":
            scope = rng.choice(SCOPES)
            await pause(
                async_client,
                keyspace,
                Pause(scope.kind, None, scope.target, 0, "t", "r"),
                command="c",
                source="s",
            )
            paused.append(scope)
        elif action == "resume" and paused:
            scope = paused.pop(rng.randrange(len(paused)))
            await resume(async_client, keyspace, scope, command="c", source="s")
        elif action == "fail":
            failing["on"] = not failing["on"]
        else:
            clock.advance(1.0)  # past the pauses' read period: this pass reads them
            seen_paused[:] = await read_pauses(async_client, keyspace)
            await sweeper.run_pass()

    failing["on"] = False
    for scope in paused:
        await resume(async_client, keyspace, scope, command="c", source="s")
    seen_paused.clear()
    for _ in range(40):
        clock.advance(3.0)
        await sweeper.run_pass()

    assert violations == []
    delivered = [e for e in sink.delivered if e.kind == "outbox"]
    for target, events in committed.items():
        got = [e.body["event"]["id"] for e in delivered if e.ordering_key == target]
        assert got == events, target  # each once, in commit order
    assert await async_client.hlen(keyspace.outbox) == 0
    assert await async_client.hlen(keyspace.spawns) == 0
    for kind in ("outbox", "spawn", "timer"):
        assert await async_client.hlen(RelayKeys(keyspace).dead(kind)) == 0
