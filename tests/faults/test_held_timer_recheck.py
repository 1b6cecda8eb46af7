"""A timer held for retry follows the engine: cancelled, it is not sent again; moved, not at the
old time.

A real ``relayd sweep`` relays three due timers to a local receiver that answers 503 (retry) to the
first request of each. While the first request of ``cancelled`` is in flight the engine cancels it
(``ZREM``); while that of ``moved`` is in flight it moves it an hour later (``ZADD`` with the new
``fire_at``). ``control`` is left alone and is delivered on its retry, so by then the others' retries
were due as well. Neither ``cancelled`` nor ``moved`` reaches the receiver again, and no attempt record
is left for them.
"""

from __future__ import annotations

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
from support.waiting import wait_until

from store import Keyspace, timer_member

pytestmark = [pytest.mark.faults]

PREFIX = "held"
EXECUTION = "exe-1"
KEYS = Keyspace(PREFIX)
#: Retry delays (seconds): short, so every held timer's retry falls due within the test.
RETRY_BASE_S, RETRY_CAP_S = 0.2, 0.4
#: How long the receiver is watched after the control timer's retry (seconds): past every
#: other retry's latest due time.
WATCH_AFTER_S = 2 * RETRY_CAP_S + 0.5


@dataclass
class Receiver:
    """Answers 503 to the first request of each timer path, 200 after; runs the engine's change
    (``on_first``) for that path before answering."""

    client: redis.Redis
    hits: list[tuple[str, int]] = field(default_factory=list)  # (path, status answered)
    moved_to: float = 0.0

    def statuses(self, path: str) -> list[int]:
        return [s for p, s in list(self.hits) if p == path]

    async def handle(self, request: web.Request) -> web.Response:
        path = str(orjson.loads(await request.read())["id"]).split(":")[2]
        first = not self.statuses(path)
        if first and path == "root.cancelled":
            self.client.zrem(KEYS.timers, timer_member(EXECUTION, path))
        elif first and path == "root.moved":
            self.client.zadd(KEYS.timers, {timer_member(EXECUTION, path): self.moved_to})
        status = 503 if first else 200
        self.hits.append((path, status))
        return web.Response(status=status)


@pytest.fixture
def receiver(redis_process: RedisServer) -> Iterator[tuple[Receiver, str]]:
    state = Receiver(redis_process.client())
    with serve_in_thread(state.handle) as url:
        yield state, url


def test_a_held_timer_cancelled_or_moved_by_the_engine_is_not_sent_again(
    redis_process: RedisServer, receiver: tuple[Receiver, str], tmp_path: Path
) -> None:
    state, url = receiver
    client = redis_process.client()
    seconds, micros = client.time()
    now = seconds + micros / 1e6
    state.moved_to = round(now + 3600, 3)
    paths = ("root.cancelled", "root.moved", "root.control")
    client.zadd(
        KEYS.timers, {timer_member(EXECUTION, p): round(now - 1 + n * 0.001, 3) for n, p in enumerate(paths)}
    )
    relay = RelayProcess(
        [
            "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{url}",
            "--poll-interval", "0.1", "--retry-base", str(RETRY_BASE_S), "--retry-cap", str(RETRY_CAP_S),
            "--log-format", "json",
        ],
        tmp_path / "relay.log",
    )  # fmt: skip
    try:
        relay.start()
        wait_until(lambda: state.statuses("root.control") == [503, 200], 60, "control delivered on retry")
        wait_until(lambda: client.zscore(KEYS.timers, timer_member(EXECUTION, "root.control")) is None, 30)
        time.sleep(WATCH_AFTER_S)  # every other retry was due by now
        attempts = {k: client.hgetall(k) for k in client.scan_iter(KEYS.relay("attempts:*"))}
    finally:
        relay.stop()
    # A cancelled timer is not sent again; a moved one does not fire at its old time.
    sent = {p: state.statuses(p) for p in ("root.cancelled", "root.moved")}
    assert sent == {"root.cancelled": [503], "root.moved": [503]}
    assert client.zscore(KEYS.timers, timer_member(EXECUTION, "root.moved")) == state.moved_to
    assert not any(attempts.values()), f"attempt records left: {attempts}"
