"""A replica that loses its lease mid-pass and takes it again does not revive its old pass.

Two real ``relayd sweep`` processes relay one prefix's outbox to a local receiver, each to its own
path. Replica A sends X (target T) and the receiver freezes A (SIGSTOP) and holds that request
unanswered; Y of the same target waits in A's memory behind it. A's lease expires, B takes over
and delivers X, Y and a later W of T, and stops (releasing the lease). A is resumed and takes the
lease again, in a new term; only then is its held request answered 503 (retry). A's old pass must
neither leave an attempt record for X (already acked) nor send X or Y again after W: the next
thing A sends is a new entry Z of T, read in its new term.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
import redis
from aiohttp import web
from faults.harness import RelayProcess
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.replicas import wait_new_holder
from support.seeding import outbox_value
from support.waiting import wait_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.crash]

PREFIX = "term"
TARGET = "exe-t"
LEASE_TTL_S = 2.0
#: How long A stays frozen (seconds): well past the lease TTL, well within its webhook timeout.
FROZEN_S = 4.0
KEYS = Keyspace(PREFIX)


@dataclass
class Receiver:
    """``POST /{replica}``: A's first request freezes A and is held until ``release``, then 503."""

    hits: list[tuple[str, str]] = field(default_factory=list)  # (replica, delivery id)
    pid_a: int = 0
    frozen: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def ids(self, replica: str) -> list[str]:
        return [i for r, i in list(self.hits) if r == replica]

    async def handle(self, request: web.Request) -> web.Response:
        replica = request.match_info["replica"]
        self.hits.append((replica, str(orjson.loads(await request.read())["id"])))
        if replica == "a" and not self.frozen.is_set():
            os.kill(self.pid_a, signal.SIGSTOP)
            self.frozen.set()
            while not self.release.is_set():
                await asyncio.sleep(0.02)
            return web.Response(status=503)
        return web.Response(status=200)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    state = Receiver()
    with serve_in_thread(state.handle, "/{replica}") as url:
        yield state, url.removesuffix("/{replica}")
        state.release.set()


def _commit(client: redis.Redis, seq: int) -> str:
    """Commit one event to ``TARGET`` at ``seq``, as the engine would."""
    client.hset(KEYS.outbox, str(seq), outbox_value(TARGET, f"ev-{seq}"))
    client.set(KEYS.outbox_seq, seq)
    return f"{PREFIX}:outbox:{seq}"


def _replica(name: str, redis: RedisServer, base_url: str, tmp_path: Path) -> RelayProcess:
    return RelayProcess(
        [
            "--redis-url", redis.url, "--prefix", PREFIX, "--sink", f"webhook:{base_url}/{name}",
            "--lease-ttl", str(LEASE_TTL_S), "--poll-interval", "0.1", "--webhook-timeout", "60",
            "--retry-base", "0.1", "--retry-cap", "0.2", "--log-format", "json",
        ],
        tmp_path / f"{name}.log",
    )  # fmt: skip


def test_a_lease_lost_and_retaken_mid_pass_neither_redelivers_nor_charges_acked_entries(
    redis_process: RedisServer, receiver: tuple[Receiver, str], tmp_path: Path
) -> None:
    state, base_url = receiver
    client = redis_process.client()
    x, y = _commit(client, 1), _commit(client, 2)
    a, b = (_replica(n, redis_process, base_url, tmp_path) for n in ("a", "b"))
    try:
        a.start()
        assert a.proc is not None
        state.pid_a = a.proc.pid
        wait_until(state.frozen.is_set, 60, "A frozen with X in flight")
        frozen_at_s = time.monotonic()
        w = _commit(client, 3)
        b.start()
        wait_new_holder(client, KEYS.relay("lease"), not_pids=[a.proc.pid], timeout_s=60)
        wait_until(lambda: state.ids("b") == [x, y, w], 60, "B delivering X, Y and W")
        wait_until(lambda: client.hlen(KEYS.outbox) == 0, 30, "B acking them")
        assert b.stop() == 0
        assert client.get(KEYS.relay("lease")) is None, "B released the lease"
        time.sleep(max(0.0, FROZEN_S - (time.monotonic() - frozen_at_s)))
        a.proc.send_signal(signal.SIGCONT)
        wait_until(
            lambda: f"/{state.pid_a}/".encode() in (client.get(KEYS.relay("lease")) or b""),
            30,
            "A holding the lease again",
        )
        state.release.set()  # A's old pass gets its answer: retry X
        z = _commit(client, 4)
        wait_until(lambda: z in state.ids("a"), 30, "A delivering Z in its new term")
        wait_until(lambda: client.hlen(KEYS.outbox) == 0, 30, "A acking Z")
        attempts = client.hgetall(KEYS.relay("attempts:outbox"))
    finally:
        if a.proc is not None and a.alive:
            a.proc.send_signal(signal.SIGCONT)
        a.stop()
        b.stop()
    assert state.ids("a") == [x, z], "A sent nothing of its old pass after the resume"
    assert attempts == {}, "no attempt record for an entry already acked"
