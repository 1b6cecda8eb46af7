"""The event loop's heartbeat over real HTTP: /healthz stays 200 while the loop awaits something
that never comes (a hung sink), and turns 503 only while the loop itself is blocked."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support.waiting import wait_until

from relayd.observability.health import Health
from relayd.observability.heartbeat import heartbeat
from relayd.observability.http import serve_http

#: Liveness threshold for these tests; the beat comes twenty times as often.
STALE_AFTER_S = 1.0
BEAT_EVERY_S = 0.05


def _status(url: str) -> int:
    return httpx.get(url, timeout=10).status_code


@pytest.fixture
def served():
    health = Health(stale_after_s=STALE_AFTER_S)
    handle = serve_http("127.0.0.1", 0, CollectorRegistry(), health)
    yield f"http://127.0.0.1:{handle.port}/healthz", health
    handle.close()


@pytest.mark.slow
async def test_a_loop_awaiting_a_hung_call_stays_live(served) -> None:
    """A task awaits a future nobody completes for three thresholds: every probe says 200."""
    url, health = served
    never = asyncio.get_running_loop().create_future()

    async with heartbeat(health, every_s=BEAT_EVERY_S):
        hung = asyncio.create_task(asyncio.wait_for(never, 3 * STALE_AFTER_S))
        started_s = time.monotonic()
        answers, asked_at_s = [], []
        while not hung.done():
            answers.append(await asyncio.to_thread(_status, url))
            asked_at_s.append(time.monotonic() - started_s)
            await asyncio.sleep(0.1)
        with contextlib.suppress(TimeoutError):
            await hung

    assert max(asked_at_s) > 2 * STALE_AFTER_S
    assert set(answers) == {200}


async def test_a_blocked_loop_fails_liveness_until_it_runs_again(served) -> None:
    """The loop blocked by synchronous work: the probe (its own thread) turns 503; once the loop
    runs again, 200."""
    url, health = served
    turned_503 = threading.Event()

    def watch() -> None:
        wait_until(lambda: _status(url) == 503, 30, "/healthz 503 while the loop is blocked")
        turned_503.set()

    async with heartbeat(health, every_s=BEAT_EVERY_S):
        await asyncio.sleep(3 * BEAT_EVERY_S)
        before = await asyncio.to_thread(_status, url)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        blocked = turned_503.wait(60)  # blocks the event loop itself: no beat can run
        watcher.join(5)
        await asyncio.sleep(3 * BEAT_EVERY_S)
        after = await asyncio.to_thread(_status, url)

    assert before == 200
    assert blocked
    assert after == 200
