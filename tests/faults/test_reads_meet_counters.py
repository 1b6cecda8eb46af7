"""The reader where the engine's counters misbehave, and spawns where events meet them.

Real processes: redis-server, ``relayd sweep`` against a local webhook receiver.

- Case 5: the outbox counter is reset (or restored from a backup older than relayd's cursor)
  and twelve entries to one target are committed at seqs 1-12, below and above the frontier.
  Before: seqs 7-12 went first and 1-6 followed from the reconcile scan. Now in seq order.
- Case 9: the counter jumps by 10^9 (an INCRBY by mistake). Before: new entries waited while
  the window walked the burned range (about 12 minutes per 10^9 seqs). Now within seconds.
- Case 3: 300 spawns and 300 events to their children (in the reverse order), read 100 at a
  time: before, 100 events reached a child before its spawn. And while the spawn sink is down,
  events to children whose spawns are pending wait, while events to others flow.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
import pytest
from aiohttp import web
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import outbox_value, spawn_value
from support.waiting import wait_until

from store import Keyspace
from tests.e2e.conftest import run_relayd, start_relayd

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "rc"


def _receiver(delivered: list[dict[str, object]], refuse: Callable[[dict[str, object]], bool] | None = None):
    async def receive(request: web.Request) -> web.Response:
        envelope = orjson.loads(await request.read())
        if refuse is not None and refuse(envelope):
            return web.Response(status=503)
        delivered.append(envelope)
        return web.Response(status=200)

    return receive


def _event_id(envelope: dict[str, object]) -> str:
    event = envelope["event"]
    assert isinstance(event, dict)
    return str(event["id"])


def _sweep_args(redis_process: RedisServer, url: str) -> list[str]:
    """``relayd sweep``'s arguments for this prefix on ``redis_process``, into the webhook ``url``."""
    return ["--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{url}"]


def _key(envelope: dict[str, object]) -> tuple[str, str]:
    """(kind, the child a spawn creates or the target an event goes to)."""
    kind = str(envelope["kind"])
    return kind, str(envelope["child_id"] if kind == "spawn" else envelope["target_id"])


def test_case_5_a_counter_reset_below_the_cursor_delivers_in_seq_order(redis_process: RedisServer) -> None:
    client = redis_process.client()
    keyspace = Keyspace(PREFIX)
    delivered: list[dict[str, object]] = []
    pipe = client.pipeline()
    for seq in range(1, 7):
        pipe.hset(keyspace.outbox, str(seq), outbox_value("t1", f"old-{seq}"))
    pipe.set(keyspace.outbox_seq, 6)
    pipe.execute()
    with serve_in_thread(_receiver(delivered)) as url:
        sweep = [*_sweep_args(redis_process, url), "--batch", "4"]
        first = run_relayd("sweep", "--once", *sweep)
        # The counter is reset (a restore from an older backup): 1-12 are committed again,
        # in one transaction, all to one target.
        pipe = client.pipeline(transaction=True)
        for seq in range(1, 13):
            pipe.hset(keyspace.outbox, str(seq), outbox_value("t2", f"new-{seq}"))
        pipe.set(keyspace.outbox_seq, 12)
        pipe.execute()
        second = run_relayd("sweep", "--once", *sweep)

    assert first.returncode == 0, first.stderr[-2000:]
    assert second.returncode == 0, second.stderr[-2000:]
    assert client.get(keyspace.relay("cursor:outbox")) is not None
    t2 = [_event_id(e) for e in delivered if e["target_id"] == "t2"]
    assert t2 == [f"new-{seq}" for seq in range(1, 13)]


def test_case_9_a_counter_jump_does_not_stall_new_entries(redis_process: RedisServer) -> None:
    client = redis_process.client()
    keyspace = Keyspace(PREFIX)
    delivered: list[dict[str, object]] = []
    client.hset(keyspace.outbox, "1", outbox_value("t1", "before"))
    client.set(keyspace.outbox_seq, 1)
    with serve_in_thread(_receiver(delivered)) as url:
        sweep = _sweep_args(redis_process, url)
        first = run_relayd("sweep", "--once", *sweep)
        jumped = client.incrby(keyspace.outbox_seq, 10**9)
        pipe = client.pipeline(transaction=True)
        for n in range(1, 4):
            pipe.hset(keyspace.outbox, str(jumped + n), outbox_value("t1", f"after-{n}"))
        pipe.incrby(keyspace.outbox_seq, 3)
        pipe.execute()
        started = time.monotonic()
        second = run_relayd("sweep", "--once", *sweep, timeout_s=60)
        took_s = time.monotonic() - started

    assert first.returncode == 0, first.stderr[-2000:]
    assert second.returncode == 0, second.stderr[-2000:]
    assert [_event_id(e) for e in delivered] == ["before", "after-1", "after-2", "after-3"]
    assert took_s < 30, f"walked the burned range: {took_s:.1f} s"


def test_case_3_events_to_a_child_wait_for_its_spawn_in_memory_or_in_redis(
    redis_process: RedisServer,
) -> None:
    client = redis_process.client()
    keyspace = Keyspace(PREFIX)
    delivered: list[dict[str, object]] = []
    pipe = client.pipeline()
    for n in range(1, 301):
        pipe.hset(keyspace.spawns, str(n), spawn_value("parent", f"kid-{n}"))
        # Events in the reverse order: the first read of events names the last spawns.
        pipe.hset(keyspace.outbox, str(n), outbox_value(f"kid-{301 - n}", f"to-kid-{301 - n}"))
    pipe.set(keyspace.spawns_seq, 300)
    pipe.set(keyspace.outbox_seq, 300)
    pipe.execute()
    with serve_in_thread(_receiver(delivered)) as url:
        sweep = _sweep_args(redis_process, url)
        done = run_relayd("sweep", "--once", *sweep, "--batch", "100")

    assert done.returncode == 0, done.stderr[-2000:]
    position = {_key(e): i for i, e in enumerate(delivered)}
    early = [n for n in range(1, 301) if position[("outbox", f"kid-{n}")] < position[("spawn", f"kid-{n}")]]
    assert len(position) == 600
    assert early == []


def test_case_3_while_the_spawn_sink_is_down_events_to_its_children_wait(redis_process: RedisServer) -> None:
    client = redis_process.client()
    keyspace = Keyspace(PREFIX)
    delivered: list[dict[str, object]] = []
    spawns_up = {"now": False}

    def refuse(envelope: dict[str, object]) -> bool:
        return envelope["kind"] == "spawn" and not spawns_up["now"]

    # Two receivers: two sinks, each with its own breaker (one URL would be one sink).
    with (
        serve_in_thread(_receiver(delivered)) as url,
        serve_in_thread(_receiver(delivered, refuse)) as spawn_url,
    ):
        relay = start_relayd(
            "sweep",
            "--redis-url",
            redis_process.url,
            "--prefix",
            PREFIX,
            "--sink",
            f"webhook:{url}",
            "--spawn-sink",
            f"webhook:{spawn_url}",
            "--poll-interval",
            "0.05",
            "--breaker-cooldown-cap",
            "1",
        )
        try:
            # The spawn sink's breaker opens on the first spawns; then more are committed.
            for n in range(1, 21):
                pipe = client.pipeline(transaction=True)
                pipe.hset(keyspace.spawns, str(n), spawn_value("parent", f"kid-{n}"))
                pipe.set(keyspace.spawns_seq, n)
                pipe.hset(keyspace.outbox, str(2 * n - 1), outbox_value(f"kid-{n}", f"to-kid-{n}"))
                pipe.hset(keyspace.outbox, str(2 * n), outbox_value(f"other-{n}", f"to-other-{n}"))
                pipe.set(keyspace.outbox_seq, 2 * n)
                pipe.execute()
                time.sleep(0.1)
            wait_until(lambda: sum(e["kind"] == "outbox" for e in delivered) >= 20, what="the other events")
            time.sleep(1.0)  # time for an event to a child to slip through, were it not held
            during = [_event_id(e) for e in delivered if e["kind"] == "outbox"]
            spawns_up["now"] = True
            wait_until(lambda: len(delivered) >= 60, 60, "every spawn and event")
        finally:
            relay.terminate()
            relay.wait(timeout=30)

    assert sorted(during) == sorted(f"to-other-{n}" for n in range(1, 21))
    position = {
        (str(e["kind"]), str(e.get("child_id") or e.get("target_id"))): i for i, e in enumerate(delivered)
    }
    assert all(position[("spawn", f"kid-{n}")] < position[("outbox", f"kid-{n}")] for n in range(1, 21))
