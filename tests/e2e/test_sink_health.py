"""Sink health in ``relayd status``: during a receiver outage a real relay publishes its open
breaker, the last error and the entries waiting to go again; once the receiver is back, closed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from faults.harness import RelayProcess
from support.binaries import require_binaries
from support.http_receiver import serve_in_thread
from support.redis_server import RedisServer
from support.seeding import Entries
from support.waiting import wait_until

from tests.e2e.conftest import relayd_argv, relayd_env

pytestmark = pytest.mark.slow

PREFIX = "sh"
ENTRIES = 20


def _status(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        relayd_argv("status", "--redis-url", url, "--prefix", PREFIX, *args),
        env=relayd_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _sink(url: str) -> dict[str, object] | None:
    done = _status(url, "--json")
    assert done.returncode == 0, done.stderr
    sinks = orjson.loads(done.stdout)["prefixes"][0]["sinks"]
    return sinks[0] if sinks else None


def test_status_names_the_open_breaker_its_last_error_and_the_retrying_count(tmp_path: Path) -> None:
    require_binaries("redis-server", "relayd")
    down = {"yes": True}

    async def receiver(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=503, text="maintenance") if down["yes"] else web.Response(status=200)

    server = RedisServer(tmp_path / "redis")
    server.start()
    client = server.client()
    try:
        entries = Entries(client.pipeline(), PREFIX)
        for seq in range(1, ENTRIES + 1):
            entries.outbox(seq, f"t{seq % 10}", f"e{seq}")
        entries.counters(outbox=ENTRIES).pipe.execute()
        with serve_in_thread(receiver) as hook:
            relay = RelayProcess(
                [
                    "--redis-url", server.url, "--prefix", PREFIX, "--sink", f"webhook:{hook}",
                    "--poll-interval", "0.2", "--breaker-cooldown-cap", "1", "--log-level", "warning",
                ],
                tmp_path / "relay.log",
            )  # fmt: skip
            relay.start()
            try:
                outage = wait_until(
                    lambda: (s := _sink(server.url)) is not None and s["state"] != "closed" and s,
                    30,
                    "the breaker open in status",
                )
                table = _status(server.url).stdout
                down["yes"] = False
                healed = wait_until(
                    lambda: (
                        (s := _sink(server.url)) is not None
                        and s["state"] == "closed"
                        and s["retrying"] == 0
                        and s
                    ),
                    30,
                    "the breaker closed in status",
                )
                wait_until(lambda: client.hlen(f"{PREFIX}:outbox") == 0, 30, "every entry delivered")
            finally:
                relay.stop()
    finally:
        server.kill()

    assert outage["sink"] == "webhook"
    assert outage["kinds"] == ["spawn", "outbox", "timer"]
    assert "503" in str(outage["last_error"])
    assert isinstance(outage["retrying"], int)
    assert 0 < outage["retrying"] <= ENTRIES
    assert isinstance(outage["since"], float)
    assert "sinks" in table
    assert "503" in table
    assert isinstance(healed["since"], float)
    assert healed["since"] > outage["since"]  # the close moved it
