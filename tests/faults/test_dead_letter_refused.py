"""A dead letter Redis refuses (out of memory) leaves its entry unresolved (case 11).

Real processes: redis-server under ``maxmemory`` with ``noeviction``, ``relayd sweep`` and a
local receiver answering 422 to seq 1 of target ``a`` and 200 to anything else. The dead
letter of seq 1 cannot be written while Redis is out of memory; seq 2 of the same target must
not overtake it: it reaches the receiver only once seq 1 is parked, and seq 1 is held (sent
again after a pause) meanwhile. Before, seq 1 was forgotten, left for the reconcile scan: on a
small hash the scan found it again at once and it was sent again on every pass (a dozen times
in a tenth of a second); on a large one, seq 2 went first.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from aiohttp import web
from faults.harness import RelayProcess
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import outbox_value
from support.waiting import wait_until

from store import Keyspace

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "oomdl"


def test_case_11_oom_dead_letter_keeps_its_target_waiting(redis_process: RedisServer, tmp_path: Path) -> None:
    client = redis_process.client()
    keyspace = Keyspace(PREFIX)
    dead_key = keyspace.relay("dead:outbox")
    first = f"{PREFIX}:outbox:1"
    sent: list[str] = []
    parked_when_second_came: list[bool] = []

    async def receive(request: web.Request) -> web.Response:
        envelope = orjson.loads(await request.read())
        sent.append(str(envelope["id"]))
        if envelope["id"] == first:
            return web.Response(status=422)
        if envelope["id"] == f"{PREFIX}:outbox:2":
            parked_when_second_came.append(bool(client.hexists(dead_key, first)))
        return web.Response(status=200)

    with serve_in_thread(receive) as url:
        relay = RelayProcess(
            [
                "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{url}",
                "--poll-interval", "0.2", "--lease-ttl", "3", "--log-level", "info",
            ],
            tmp_path / "relay.log",
        )  # fmt: skip
        relay.start()
        try:
            wait_until(lambda: client.exists(keyspace.relay("lease")), 30, "the relay to take the lease")
            pipe = client.pipeline(transaction=True)  # the relay reads nothing before memory runs out
            pipe.hset(keyspace.outbox, "1", outbox_value("a", "ev-1"))
            pipe.hset(keyspace.outbox, "2", outbox_value("a", "ev-2"))
            pipe.hset(keyspace.outbox, "3", outbox_value("b", "ev-3"))
            pipe.set(keyspace.outbox_seq, 3)
            pipe.config_set("maxmemory-policy", "noeviction")
            pipe.config_set("maxmemory", 1)
            pipe.execute()
            wait_until(lambda: sent.count(first) >= 2, 60, "seq 1 refused again, its dead letter refused")
            client.config_set("maxmemory", 0)
            wait_until(lambda: parked_when_second_came, 60, "seq 2 delivered")
        finally:
            client.config_set("maxmemory", 0)
            relay.stop()

    assert parked_when_second_came == [True], sent
    # Held and sent again after a pause, not re-read and re-sent on every pass (before: a
    # dozen sends of seq 1 within a tenth of a second, until memory was freed).
    assert sent.count(first) <= 3, sent
    assert f"{PREFIX}:outbox:3" in sent  # another target was not held up
    assert "bookkeeping_refused" in relay.log_tail(100_000)
