"""``--events-sink``: a webhook receiver gets the breaker and dead-letter events as CloudEvents the
SDK reads; a receiver that never answers does not slow the main delivery."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cloudevents.core.formats.json import JSONFormat
from faults.harness import RelayProcess, sample
from support.binaries import require_binaries
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

pytestmark = pytest.mark.slow


def _relay(server: RedisServer, prefix: str, hook: str, events_hook: str, log: Path) -> RelayProcess:
    return RelayProcess(
        [
            "--redis-url", server.url, "--prefix", prefix, "--sink", f"webhook:{hook}",
            "--events-sink", f"webhook:{events_hook}", "--poll-interval", "0.2",
            "--breaker-cooldown-cap", "1", "--log-level", "warning",
        ],
        log,
    )  # fmt: skip


def test_breaker_and_dead_letter_events_reach_a_webhook_as_cloudevents(tmp_path: Path) -> None:
    require_binaries("redis-server", "relayd")
    healed = threading.Event()
    events: list[Any] = []

    async def main(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=200 if healed.is_set() else 503, text="maintenance")

    async def receiver(request: web.Request) -> web.Response:
        events.append(JSONFormat().read(None, await request.read()))
        return web.Response(status=200)

    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    try:
        entries = Entries(client.pipeline(), "ev")
        for seq in range(1, 11):
            entries.outbox(seq, f"t{seq % 5}", f"e{seq}")
        entries.raw_outbox("11", b"not json").counters(outbox=11).pipe.execute()
        with serve_in_thread(main) as hook, serve_in_thread(receiver) as events_hook:
            relay = _relay(server, "ev", hook, events_hook, tmp_path / "relay.log")
            relay.start()
            try:
                wait_until(lambda: _types(events) >= {"dev.relayd.sink.breaker.opened"}, 30, "breaker opened")
                healed.set()
                wait_until(lambda: client.hlen("ev:outbox") == 0, 30, "every entry delivered")
                wait_until(lambda: "dev.relayd.sink.breaker.closed" in _types(events), 30, "breaker closed")
            finally:
                relay.stop()
    finally:
        server.kill()

    by_type = {e.get_type(): e for e in events}
    assert {"dev.relayd.lease.acquired", "dev.relayd.entry.dead_lettered"} <= set(by_type)
    opened = by_type["dev.relayd.sink.breaker.opened"]
    assert (opened.get_subject(), opened.get_specversion()) == ("webhook", "1.0")
    assert opened.get_source().startswith("relayd://")
    assert "503" in opened.get_data()["error"]
    dead = by_type["dev.relayd.entry.dead_lettered"]
    assert dead.get_subject() == "ev:outbox:11"
    assert dead.get_data()["reason_code"] == "bad_json"
    assert len({e.get_id() for e in events}) == len(events)


def _types(events: list[Any]) -> set[str]:
    return {e.get_type() for e in list(events)}


def test_an_events_receiver_that_never_answers_does_not_slow_delivery(tmp_path: Path) -> None:
    require_binaries("redis-server", "relayd")
    release = threading.Event()
    delivered: list[bytes] = []
    held: list[bytes] = []  # event requests the stuck receiver got (and holds)

    async def main(request: web.Request) -> web.Response:
        delivered.append(await request.read())
        return web.Response(status=200)

    async def stuck(request: web.Request) -> web.Response:
        held.append(await request.read())
        while not release.is_set():  # holds every event request until the test ends
            await asyncio.sleep(0.05)
        return web.Response(status=200)

    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    try:
        entries = Entries(client.pipeline(), "sl")
        for seq in range(1, 201):
            entries.outbox(seq, f"t{seq % 10}", f"e{seq}")
        entries.raw_outbox("201", b"not json").counters(outbox=201).pipe.execute()
        with serve_in_thread(main) as hook, serve_in_thread(stuck) as events_hook:
            relay = _relay(server, "sl", hook, events_hook, tmp_path / "relay.log")
            relay.start()
            try:
                wait_until(lambda: client.hlen("sl:outbox") == 0, 30, "every entry delivered")
                sent = sample(relay.metrics(), "relayd_events_total", outcome="sent")
                held_at_drain = len(held)
            finally:
                release.set()
                relay.stop()
    finally:
        server.kill()

    assert len(delivered) == 200
    assert sent == 0  # the events were still waiting on the receiver all along
    assert held_at_drain >= 1  # an event (the dead letter's) was out, held, while deliveries went on
