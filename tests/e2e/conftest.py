"""End-to-end fixtures: a Redis reachable over TCP (real redis-server or fakeredis's TcpFakeServer),
the ``relayd`` console script run as a subprocess, and a backlog committed through ``store``."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import orjson
import pytest
import redis

from relayd.demo.embedded import EmbeddedRedis
from store import Event, Execution, RedisStore, TimerOp


@dataclass
class TcpRedis:
    """A Redis over TCP plus an in-process client on the same data (fast seeding)."""

    url: str
    client: redis.Redis


@pytest.fixture
def tcp_fake() -> Iterator[TcpRedis]:
    with EmbeddedRedis() as server:
        client = fakeredis.FakeRedis(server=server.fake_server)
        yield TcpRedis(url=server.url, client=client)
        client.close()


@pytest.fixture
def e2e_redis(backend: str, request: pytest.FixtureRequest) -> Iterator[TcpRedis]:
    """The parametrised backend as a TCP Redis: ``real`` redis-server or ``fake`` TcpFakeServer."""
    if backend == "fake":
        yield request.getfixturevalue("tcp_fake")
        return
    server = request.getfixturevalue("redis_server")
    client = server.client()
    yield TcpRedis(url=server.url, client=client)
    client.close()


def relayd_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAYD_")}
    env["RELAYD_LOG_FORMAT"] = "json"
    return {**env, **(extra or {})}


def relayd_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "relayd", *args]


def run_relayd(
    *args: str, timeout_s: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        relayd_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=relayd_env(env),
        check=False,
    )


def start_relayd(
    *args: str, env: dict[str, str] | None = None, stderr: Any = subprocess.PIPE
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        relayd_argv(*args), stdout=subprocess.PIPE, stderr=stderr, text=True, env=relayd_env(env)
    )


@dataclass
class Backlog:
    """What a workload committed, as the relay must deliver it (docs/internals.md#key-space)."""

    prefix: str
    outbox: dict[int, tuple[str | None, dict[str, Any]]] = field(default_factory=dict)
    spawns: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    past_timers: dict[tuple[str, str], float] = field(default_factory=dict)
    future_timers: dict[tuple[str, str], float] = field(default_factory=dict)
    executions: list[str] = field(default_factory=list)

    @property
    def due_count(self) -> int:
        return len(self.outbox) + len(self.spawns) + len(self.past_timers)


def commit_backlog(
    client: redis.Redis,
    prefix: str,
    *,
    executions: int = 100,
    emits: int = 20,
    spawns: int = 10,
    past_timers: int = 10,
    future_timers: int = 5,
    seed: int = 3,
    now: float | None = None,
) -> Backlog:
    """Commit a mixed backlog through ``store.RedisStore``: many targets, timers past and future."""
    rng = random.Random(seed)
    now = time.time() if now is None else now
    store = RedisStore(client, prefix=prefix)
    backlog = Backlog(prefix=prefix)
    targets = [f"target-{n}" for n in range(50)]
    for n in range(executions):
        exe = Execution(id=f"exe-{n}", definition_id="e2e.flow")
        store.save(exe)
        backlog.executions.append(exe.id)
        events = [
            (None if rng.random() < 0.05 else rng.choice(targets), Event(kind="Ping", data={"n": n, "i": i}))
            for i in range(emits)
        ]
        intents = [(f"{exe.id}.child-{i}", f"region/{i}", {"i": i, "parent": exe.id}) for i in range(spawns)]
        timers = [
            TimerOp("schedule", f"wait/p {i}:é", now - rng.uniform(1, 1000)) for i in range(past_timers)
        ]
        timers += [TimerOp("schedule", f"later/{i}", now + 3600 + i) for i in range(future_timers)]
        seqs = store.commit(exe, events, timers=timers, spawns=intents)
        for seq, (target, event) in zip(seqs, events, strict=True):
            backlog.outbox[seq] = (target, orjson.loads(event.model_dump_json()))
        backlog.spawns += [(exe.id, child, root, ctx) for child, root, ctx in intents]
        for timer in timers:
            bucket = backlog.past_timers if timer.fire_at <= now else backlog.future_timers
            bucket[(exe.id, timer.path)] = float(timer.fire_at)
    return backlog


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The envelopes of every complete line. A test polls the file while the daemon appends to
    it, so the last line may still be half written (no newline yet): it is not read until it is
    whole. Every complete line must parse."""
    if not path.exists():
        return []
    complete, _, _being_written = path.read_bytes().rpartition(b"\n")
    return [orjson.loads(line) for line in complete.splitlines() if line.strip()]


def snapshot_engine_keys(client: redis.Redis, prefix: str) -> dict[bytes, Any]:
    """Every key under the prefix that relayd must not touch, with its type and content."""
    skip = {f"{prefix}:{s}".encode() for s in ("outbox", "spawns", "timers")}
    found: dict[bytes, Any] = {}
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        if key in skip or key.startswith(f"{prefix}:relay:".encode()):
            continue
        kind = client.type(key)
        if kind == b"string":
            value: Any = client.get(key)
        elif kind == b"set":
            value = sorted(client.smembers(key))
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        elif kind == b"hash":
            value = client.hgetall(key)
        else:
            value = client.zrange(key, 0, -1, withscores=True)
        found[key] = (kind, value)
    return found
