"""A replay where the engine's counter was reset: nothing lost, nothing overwritten (case 6).

Real processes: redis-server, ``relayd sweep --once`` and ``relayd dlq replay`` against a local
receiver. Twenty entries are dead-lettered (the receiver answers 422), then the engine's counter
is reset and five new entries are committed at seqs 1-5, and dead-lettered too. Before: the new
dead letters overwrote five old ones, and ``dlq replay --all`` said ``replayed 20`` while five
went nowhere (HSETNX failed, the dead letter was deleted anyway). Now both dead letters of a
reused seq are kept, every one goes back (under a new seq), and a final sweep delivers all 25.
A timer dead letter whose member the engine re-armed stays parked, named on stderr.
"""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import outbox_value

from store import Keyspace, timer_member
from tests.e2e.conftest import run_relayd

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "rp"


def test_case_6_replay_after_a_counter_reset_loses_no_dead_letter(redis_process: RedisServer) -> None:
    client = redis_process.client()
    keyspace = Keyspace(PREFIX)
    dead_outbox = keyspace.relay("dead:outbox")
    accept = {"now": False}
    delivered: list[str] = []

    async def receive(request: web.Request) -> web.Response:
        envelope = orjson.loads(await request.read())
        if not accept["now"]:
            return web.Response(status=422)
        delivered.append(str(envelope["event"]["id"]))
        return web.Response(status=200)

    pipe = client.pipeline()
    for seq in range(1, 21):
        pipe.hset(keyspace.outbox, str(seq), outbox_value(f"t{seq % 4}", f"old-{seq}"))
    pipe.set(keyspace.outbox_seq, 20)
    pipe.zadd(keyspace.timers, {timer_member("exe", "p"): 1.0})
    pipe.execute()
    with serve_in_thread(receive) as url:
        common = ["--redis-url", redis_process.url, "--prefix", PREFIX]
        sweep = [*common, "--sink", f"webhook:{url}"]
        first = run_relayd("sweep", "--once", *sweep)
        # The engine's counter is reset (a restore): seqs 1-5 are committed again.
        pipe = client.pipeline()
        for seq in range(1, 6):
            pipe.hset(keyspace.outbox, str(seq), outbox_value(f"t{seq % 4}", f"new-{seq}"))
        pipe.set(keyspace.outbox_seq, 5)
        pipe.execute()
        second = run_relayd("sweep", "--once", *sweep)
        parked_before = client.hlen(dead_outbox)
        client.zadd(keyspace.timers, {timer_member("exe", "p"): 2.0})  # the engine re-arms it
        replayed = run_relayd("dlq", "replay", "--all", *common)
        accept["now"] = True
        last = run_relayd("sweep", "--once", *sweep)

    assert first.returncode == 1, first.stderr[-2000:]
    assert second.returncode == 1, second.stderr[-2000:]
    assert parked_before == 25  # both dead letters of seqs 1-5 kept
    assert "replayed 25 dead letter(s)" in replayed.stdout, replayed.stdout + replayed.stderr
    assert replayed.returncode == 1
    assert "timeout:exe:p:1.0" in replayed.stderr  # not replayed, still parked, named
    assert client.hlen(keyspace.relay("dead:timer")) == 1
    assert last.returncode == 0, last.stderr[-2000:]
    assert "timeout:exe:p:2.0" in delivered  # the re-armed timer, from the engine
    assert sorted(d for d in delivered if not d.startswith("timeout:")) == sorted(
        [f"old-{n}" for n in range(1, 21)] + [f"new-{n}" for n in range(1, 6)]
    )
    assert client.hlen(dead_outbox) == 0
