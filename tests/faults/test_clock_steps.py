"""Clocks where they meet timers and signatures (case 8).

Real processes: redis-server (behind a proxy that steps its ``TIME``), ``relayd sweep`` (under
libfaketime for the signatures) and a local receiver. A step of Redis's clock (an NTP step on
the Redis host, a failover to a host whose clock differs) is taken at the relay's next clock
measure, so timers fire by the new clock at once; before, the relay kept its old offset for
minutes and fired them late (or early) by the step. Webhook signature timestamps are Redis's
time too: a relay host whose clock is ten minutes off still signs requests a Standard Webhooks
receiver (five minutes' tolerance) accepts; before, every entry was refused and dead-lettered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import standardwebhooks
from aiohttp import web
from faults.harness import RelayProcess, sample
from support.faketime import faked_clock, faked_offset_s
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from store import Keyspace, timer_member

pytestmark = [pytest.mark.faults, pytest.mark.slow]

PREFIX = "clk"
STEP_S = 300
POLL_INTERVAL_S = 0.5
#: Lateness allowed beyond the poll interval (seconds), for a busy machine.
SLACK_S = 3.0


def _redis_now(client: Any) -> float:
    seconds, micros = client.time()
    return float(seconds + micros / 1_000_000)


def _active(relay: RelayProcess) -> bool:
    return sample(relay.metrics(), "relayd_active", prefix=PREFIX) == 1


class SteppedTime:
    """A loopback proxy to Redis whose ``TIME`` replies are moved by ``step_s`` (0 at first): to
    whoever connects through it, Redis's clock steps when the test says so, as after an NTP step
    on the Redis host or a failover to a host whose clock differs. (redis-server cannot run under
    libfaketime: its allocator's clock calls recurse into it.)"""

    TIME_REPLY = re.compile(rb"\*2\r\n\$10\r\n(\d{10})\r\n\$(\d)\r\n(\d+)\r\n")

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.step_s = 0
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, name="stepped-time", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _moved(self, match: re.Match[bytes]) -> bytes:
        seconds = str(int(match[1]) + self.step_s).encode()
        return b"*2\r\n$%d\r\n%s\r\n$%s\r\n%s\r\n" % (len(seconds), seconds, match[2], match[3])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, rewrite: bool) -> None:
            with contextlib.suppress(OSError):
                while chunk := await source.read(65536):
                    sink.write(self.TIME_REPLY.sub(self._moved, chunk) if rewrite else chunk)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def test_case_8_a_step_of_redis_s_clock_is_taken_at_once(redis_process: RedisServer, tmp_path: Path) -> None:
    """Redis's clock jumps 300 s ahead under a running relay: the relay logs the step within a
    clock measure, and a timer armed by the new clock fires on time, not 300 s late."""
    proxy = SteppedTime(redis_process.port)
    client = redis.Redis.from_url(proxy.url)
    arrivals: list[tuple[str, float]] = []

    async def receive(request: web.Request) -> web.Response:
        envelope = orjson.loads(await request.read())
        arrivals.append((str(envelope["id"]), _redis_now(client)))
        return web.Response(status=200)

    try:
        with serve_in_thread(receive) as url:
            relay = RelayProcess(
                [
                    "--redis-url", proxy.url, "--prefix", PREFIX, "--sink", f"webhook:{url}",
                    "--lease-ttl", "3", "--poll-interval", str(POLL_INTERVAL_S), "--log-level", "info",
                ],
                tmp_path / "relay.log",
            )  # fmt: skip
            relay.start()
            try:
                wait_until(lambda: _active(relay), 30, "the relay holding the lease")
                before = _redis_now(client)
                proxy.step_s = STEP_S
                assert _redis_now(client) - before > STEP_S - 5, "the proxy stepped Redis's clock"
                wait_until(lambda: "redis_clock_stepped" in relay.log_tail(50_000), 30, "the step noticed")
                fire_at = round(_redis_now(client) + 2.0, 3)
                client.zadd(Keyspace(PREFIX).timers, {timer_member("exe", "wait"): fire_at})
                wait_until(lambda: arrivals, 2.0 + POLL_INTERVAL_S + SLACK_S + 30, "the timer delivered")
            finally:
                relay.stop()
    finally:
        client.close()
        proxy.stop()

    (_, arrived_at) = arrivals[0]
    assert fire_at <= arrived_at <= fire_at + POLL_INTERVAL_S + SLACK_S


def test_case_8_signatures_use_redis_s_clock_not_the_host_s(
    redis_process: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay host's clock is 10 minutes ahead (libfaketime): a receiver verifying Standard
    Webhooks signatures with the usual 5-minute tolerance accepts every request."""
    faking = faked_clock("+600s")
    ahead_s = faked_offset_s(faking)
    assert abs(ahead_s - 600) < 10, f"libfaketime moves a child's clock by 600 s, not {ahead_s:.0f} s"
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    secret_file = tmp_path / "secret"
    secret_file.write_text(secret + "\n")
    secret_file.chmod(0o600)
    client = redis_process.client()
    pipe = client.pipeline()
    entries = Entries(pipe, PREFIX)
    for seq in range(1, 6):
        entries.outbox(seq, f"t{seq}", f"ev-{seq}")
    pipe.set(Keyspace(PREFIX).outbox_seq, 5)
    pipe.execute()
    verified: list[bool] = []

    async def receive(request: web.Request) -> web.Response:
        try:
            standardwebhooks.Webhook(secret).verify(await request.read(), dict(request.headers))
        except standardwebhooks.WebhookVerificationError:
            verified.append(False)
            return web.Response(status=400)
        verified.append(True)
        return web.Response(status=200)

    with serve_in_thread(receive) as url:
        relay = RelayProcess(
            [
                "--redis-url", redis_process.url, "--prefix", PREFIX, "--sink", f"webhook:{url}",
                "--webhook-secret-file", str(secret_file), "--lease-ttl", "3",
                "--poll-interval", str(POLL_INTERVAL_S), "--log-level", "info",
            ],
            tmp_path / "relay.log",
        )  # fmt: skip
        with monkeypatch.context() as env:  # only the relay runs under libfaketime
            for name, value in faking.items():
                env.setenv(name, value)
            relay.start()
        try:
            wait_until(lambda: len(verified) >= 5, 60, "five requests")
        finally:
            relay.stop()

    assert verified == [True] * 5
    assert '"event":"dead_lettered"' not in relay.log_tail(50_000)
